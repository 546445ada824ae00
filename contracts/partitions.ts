/**
 * Agents are divided into P partitions by a stable hash of their id:
 *
 *   partition(agentId) = FNV-1a-32(UTF-16 code units of agentId) mod P
 *
 * (agent ids are ASCII subject tokens, so this is FNV-1a over their bytes).
 * P is fixed per deployment by WM_PARTITIONS (default 16): every process
 * that writes or routes events must read the same value, and the services
 * check that the log's last subjects agree with it before they serve
 * (services/platform/partitions/partitioned-views.ts). Changing P means
 * re-partitioning the log (`wm migrate`).
 *
 * WM_PARTITION_PINS (contracts/partition-pins.ts) pins tenants to
 * partitions: a pinned tenant's agents hash (the same FNV-1a) over its own
 * partitions, every other agent over the partitions no tenant is pinned to.
 * Without pins the placement is the formula above.
 */
import { type Placement, placementFromSettings } from "./partition-pins.ts"

export const DEFAULT_PARTITIONS = 16
/** An upper bound that keeps per-partition consumers and leases cheap. */
export const MAX_PARTITIONS = 1024

/** 32-bit FNV-1a of the string's code units. */
export const fnv1a32 = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193)
  return hash >>> 0
}

/** The agent's partition in a deployment of `partitions`, with the environment's pins (if any). */
export const partitionOf = (agentId: string, partitions: number = partitionCount()): number => {
  const env = environment()
  if (env?.WM_PARTITION_PINS === undefined || env.WM_PARTITION_PINS.trim() === "") return fnv1a32(agentId) % partitions
  const candidates = deploymentPlacement(partitions).candidates(agentId)
  return candidates[fnv1a32(agentId) % candidates.length]!
}

/** Why a partition count is not valid (null: it is). */
export const partitionCountProblem = (n: number): string | null =>
  Number.isInteger(n) && n >= 1 && n <= MAX_PARTITIONS ? null : `must be an integer from 1 to ${MAX_PARTITIONS}`

const environment = () => (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env

let cached: { readonly raw: string | undefined; readonly count: number } | undefined

/** The deployment's partition count: WM_PARTITIONS from the environment, else DEFAULT_PARTITIONS. */
export const partitionCount = (): number => {
  const raw = environment()?.WM_PARTITIONS
  if (cached !== undefined && cached.raw === raw) return cached.count
  const count = raw === undefined || raw.trim() === "" ? DEFAULT_PARTITIONS : Number(raw)
  const problem = partitionCountProblem(count)
  if (problem !== null) throw new Error(`WM_PARTITIONS=${raw}: ${problem}`)
  cached = { raw, count }
  return count
}

/** Every partition number of a deployment of `partitions`. */
export const allPartitions = (partitions: number = partitionCount()): number[] =>
  Array.from({ length: partitions }, (_, i) => i)

let cachedPlacement:
  | {
      readonly partitions: number
      readonly pins: string | undefined
      readonly tenants: string | undefined
      readonly placement: Placement
    }
  | undefined

/**
 * The placement of a deployment of `partitions` with WM_PARTITION_PINS and WM_TENANTS from the
 * environment; throws `InvalidPlacementSetting` naming the variable and the reason.
 */
export const deploymentPlacement = (partitions: number = partitionCount()): Placement => {
  const env = environment()
  const pins = env?.WM_PARTITION_PINS
  const tenants = env?.WM_TENANTS
  const c = cachedPlacement
  if (c !== undefined && c.partitions === partitions && c.pins === pins && c.tenants === tenants) return c.placement
  const placement = placementFromSettings(partitions, pins, tenants)
  cachedPlacement = { partitions, pins, tenants, placement }
  return placement
}
