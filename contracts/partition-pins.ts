/**
 * Partition pins: a tenant's agents placed only on partitions of its own
 *
 *   WM_PARTITION_PINS="acme=0-3; beta=4,6"
 *
 * An agent of a pinned tenant (WM_TENANTS, contracts/tenants.ts) hashes over
 * its tenant's partitions; pinned partitions are reserved, so every other
 * agent hashes over the partitions no tenant is pinned to (over all of them
 * when every partition is pinned). Without pins every agent hashes over all
 * partitions: today's placement. contracts/partitions.ts does the hashing;
 * this module decides which partitions an agent hashes over.
 */
import { parseTenants, type Tenant } from "./tenants.ts"

export const PINS_VARIABLE = "WM_PARTITION_PINS"
const TENANTS_VARIABLE = "WM_TENANTS"

export interface PartitionPin {
  readonly tenant: string
  /** Ascending, without repeats. */
  readonly partitions: ReadonlyArray<number>
}

/** A placement setting that cannot be used, naming the variable and the reason. */
export class InvalidPlacementSetting extends Error {
  override readonly name = "InvalidPlacementSetting"
  readonly variable: string
  readonly reason: string
  constructor(variable: string, reason: string) {
    super(`${variable}: ${reason}`)
    this.variable = variable
    this.reason = reason
  }
}

const invalidPins = (reason: string) => new InvalidPlacementSetting(PINS_VARIABLE, reason)

const PIN_SHAPE = "<tenant>=<partition>|<from>-<to>,…"

/** The partitions of one list item: `4` or `0-3`. */
const partitionsOfItem = (item: string, part: string): number[] => {
  const range = /^(\d+)-(\d+)$/.exec(item)
  if (range !== null) {
    const from = Number(range[1])
    const to = Number(range[2])
    if (from > to) throw invalidPins(`'${part}': the range ${item} runs backwards`)
    return Array.from({ length: to - from + 1 }, (_, i) => from + i)
  }
  if (/^\d+$/.test(item)) return [Number(item)]
  throw invalidPins(`'${part}' is not ${PIN_SHAPE}`)
}

/** Parses `tenant=0-3,5` lists separated by `;` or whitespace: the syntax only (see `placementOf`). */
export const parsePartitionPins = (text: string): PartitionPin[] => {
  const seen = new Set<string>()
  return text
    .split(/[;\s]+/)
    .filter((part) => part.length > 0)
    .map((part) => {
      const [tenant, list, ...rest] = part.split("=")
      if (!tenant || !list || rest.length > 0) throw invalidPins(`'${part}' is not ${PIN_SHAPE}`)
      if (seen.has(tenant)) throw invalidPins(`tenant '${tenant}' is pinned twice`)
      seen.add(tenant)
      const items = list.split(",")
      if (items.some((item) => item === "")) throw invalidPins(`'${part}' is not ${PIN_SHAPE}`)
      const partitions = [...new Set(items.flatMap((item) => partitionsOfItem(item, part)))].sort((a, b) => a - b)
      return { tenant, partitions }
    })
}

/** Which partitions each agent of a deployment hashes over. */
export interface Placement {
  readonly partitions: number
  readonly pins: ReadonlyArray<PartitionPin>
  /** The partitions `agentId` hashes over: its pinned tenant's, else the unpinned ones. */
  readonly candidates: (agentId: string) => ReadonlyArray<number>
  /** Every agent of a pinned tenant. */
  readonly pinnedAgents: ReadonlyArray<string>
  /** The partitions every agent of no pinned tenant hashes over (all of them without pins). */
  readonly shared: ReadonlyArray<number>
  /** The same for every process whose placement is the same (partition count, pins and pinned agents). */
  readonly fingerprint: string
}

/** The placement of `partitions` with these pins over these tenants; refuses pins that cannot be honoured. */
export const placementOf = (
  partitions: number,
  pins: ReadonlyArray<PartitionPin>,
  tenants: ReadonlyArray<Tenant>,
): Placement => {
  const agentsOf = new Map<string, Set<string>>()
  for (const t of tenants) {
    const agents = agentsOf.get(t.name) ?? new Set<string>()
    for (const a of t.agents) agents.add(a)
    agentsOf.set(t.name, agents)
  }
  const pinnedTo = new Map<number, string>()
  const pinOf = new Map<string, PartitionPin>()
  for (const pin of pins) {
    const agents = agentsOf.get(pin.tenant)
    if (agents === undefined) throw invalidPins(`tenant '${pin.tenant}' is not one of ${TENANTS_VARIABLE}`)
    for (const p of pin.partitions) {
      if (p >= partitions)
        throw invalidPins(
          `partition ${p} of tenant '${pin.tenant}' is outside 0..${partitions - 1} (WM_PARTITIONS=${partitions})`,
        )
      const other = pinnedTo.get(p)
      if (other !== undefined) throw invalidPins(`partition ${p} is pinned to both '${other}' and '${pin.tenant}'`)
      pinnedTo.set(p, pin.tenant)
    }
    for (const agent of agents) {
      const other = pinOf.get(agent)
      if (other !== undefined)
        throw invalidPins(`agent '${agent}' is in two pinned tenants, '${other.tenant}' and '${pin.tenant}'`)
      pinOf.set(agent, pin)
    }
  }
  const all = Array.from({ length: partitions }, (_, i) => i)
  const unpinned = all.filter((p) => !pinnedTo.has(p))
  const rest = unpinned.length > 0 ? unpinned : all
  const fingerprint = JSON.stringify({
    partitions,
    pins: [...pins].sort((a, b) => (a.tenant < b.tenant ? -1 : 1)).map((p) => [p.tenant, p.partitions]),
    agents: [...pinOf.entries()].map(([agent, pin]) => [agent, pin.tenant]).sort(([a], [b]) => (a! < b! ? -1 : 1)),
  })
  return {
    partitions,
    pins,
    candidates: (agentId) => pinOf.get(agentId)?.partitions ?? rest,
    pinnedAgents: [...pinOf.keys()],
    shared: rest,
    fingerprint,
  }
}

const blank = (text: string | undefined) => text === undefined || text.trim() === ""

/**
 * The placement the variables' raw values declare: WM_PARTITION_PINS (unset or blank: no pins) over
 * WM_TENANTS (read only when there are pins).
 */
export const placementFromSettings = (
  partitions: number,
  pinsText: string | undefined,
  tenantsText: string | undefined,
): Placement => {
  if (blank(pinsText)) return placementOf(partitions, [], [])
  const pins = parsePartitionPins(pinsText!)
  let tenants: Tenant[]
  try {
    tenants = blank(tenantsText) ? [] : parseTenants(tenantsText!)
  } catch (error) {
    throw new InvalidPlacementSetting(TENANTS_VARIABLE, error instanceof Error ? error.message : String(error))
  }
  return placementOf(partitions, pins, tenants)
}
