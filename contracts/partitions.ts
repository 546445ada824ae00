/**
 * Agents are divided into P partitions by a stable hash of their id:
 *
 *   partition(agentId) = FNV-1a-32(UTF-16 code units of agentId) mod P
 *
 * (agent ids are ASCII subject tokens, so this is FNV-1a over their bytes).
 * P is fixed per deployment by WM_PARTITIONS (default 16): every process
 * that writes or routes events must read the same value, and the services
 * record it in the lease bucket at first start and refuse to run with
 * another (services/platform/partitions/settings.ts). Changing P means
 * re-partitioning the log (`wm migrate`).
 */

export const DEFAULT_PARTITIONS = 16
/** An upper bound that keeps per-partition consumers and leases cheap. */
export const MAX_PARTITIONS = 1024

/** 32-bit FNV-1a of the string's code units. */
export const fnv1a32 = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193)
  return hash >>> 0
}

export const partitionOf = (agentId: string, partitions: number = partitionCount()): number =>
  fnv1a32(agentId) % partitions

/** Why a partition count is not valid (null: it is). */
export const partitionCountProblem = (n: number): string | null =>
  Number.isInteger(n) && n >= 1 && n <= MAX_PARTITIONS ? null : `must be an integer from 1 to ${MAX_PARTITIONS}`

let cached: { readonly raw: string | undefined; readonly count: number } | undefined

/** The deployment's partition count: WM_PARTITIONS from the environment, else DEFAULT_PARTITIONS. */
export const partitionCount = (): number => {
  const raw = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.WM_PARTITIONS
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
