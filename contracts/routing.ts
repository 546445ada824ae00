/**
 * Requests routed to their partition's owner by the NATS server.
 *
 * Callers send `wm.api.<agent>.<operation>`. For each operation a partitioned service serves, the server's
 * configuration maps that subject to
 *
 *   wm.route.<P>.<slot>.<agent>.<operation>      slot = partition(S, agent) = FNV-1a(agent) mod S
 *
 * where P is WM_PARTITIONS and S the number of partitions shared by every agent of no pinned tenant (P
 * without pins). Slot i belongs to the i-th shared partition, which is exactly where contracts/partitions.ts
 * places such an agent; a replica subscribes only to the slots of the partitions it answers for, so it never
 * receives another partition's requests. An agent of a pinned tenant hashes over its tenant's partitions
 * instead: the slot's owner forwards its request once, to `wm.route.<P>.p<partition>.<agent>.<operation>`.
 *
 * A server without these mappings delivers `wm.api.…` unchanged, and every replica receives every request
 * (and answers those of its partitions): the system works, without routing. Operations the API does not have
 * are not mapped, so the refusal of an unknown operation still answers them.
 */
import { operations } from "./api.ts"
import type { Placement } from "./partition-pins.ts"
import { fnv1a32 } from "./partitions.ts"
import { API_ROOT } from "./subjects.ts"

export const ROUTE_ROOT = "wm.route"

/** The services whose replicas divide the agents' partitions between them. */
export const PARTITIONED_SERVICES: ReadonlySet<string> = new Set(["gateway", "working", "retrieval"])

/** The API subjects (without the agent) the server routes: every operation a partitioned service serves. */
export const routedOperationSubjects = (): ReadonlyArray<string> =>
  Object.values(operations)
    .filter((op) => PARTITIONED_SERVICES.has(op.servedBy))
    .map((op) => op.subject)

/** The number of slots requests are hashed over. */
export const slotCount = (placement: Placement): number => placement.shared.length

/** The slot the server maps an agent's requests to (NATS `partition()` is FNV-1a over the token). */
export const slotOf = (agentId: string, slots: number): number => fnv1a32(agentId) % slots

/** The partition a slot belongs to. */
export const partitionOfSlot = (placement: Placement, slot: number): number => placement.shared[slot]!

/** The slot of a partition, if agents of no pinned tenant are placed on it. */
export const slotOfPartition = (placement: Placement, partition: number): number | undefined => {
  const slot = placement.shared.indexOf(partition)
  return slot === -1 ? undefined : slot
}

/** The subject a routed request arrives on, by slot. */
export const slotSubject = (partitions: number, slot: number, agentId: string, operation: string) =>
  `${ROUTE_ROOT}.${partitions}.${slot}.${agentId}.${operation}`

/** The subject a request forwarded to its agent's partition arrives on. */
export const forwardedSubject = (partitions: number, partition: number, agentId: string, operation: string) =>
  `${ROUTE_ROOT}.${partitions}.p${partition}.${agentId}.${operation}`

/** The subscriptions of a replica answering `partition` for one operation. */
export const routeSubscriptions = (placement: Placement, partition: number, operation: string): string[] => {
  const subjects = [`${ROUTE_ROOT}.${placement.partitions}.p${partition}.*.${operation}`]
  const slot = slotOfPartition(placement, partition)
  if (slot !== undefined) subjects.push(`${ROUTE_ROOT}.${placement.partitions}.${slot}.*.${operation}`)
  return subjects
}

export interface RoutedRequest {
  readonly partitions: number
  /** The slot it was mapped to, or the partition it was forwarded to. */
  readonly target: { readonly slot: number } | { readonly partition: number }
  readonly agentId: string
  readonly operation: string
}

/** Reads a routed subject; undefined for any other. */
export const parseRouteSubject = (subject: string): RoutedRequest | undefined => {
  const tokens = subject.split(".")
  if (tokens.length < 6 || `${tokens[0]}.${tokens[1]}` !== ROUTE_ROOT) return undefined
  const partitions = Number(tokens[2])
  const where = tokens[3]!
  const forwarded = where.startsWith("p")
  const n = Number(forwarded ? where.slice(1) : where)
  if (!Number.isInteger(partitions) || !Number.isInteger(n) || where === "" || where === "p") return undefined
  return {
    partitions,
    target: forwarded ? { partition: n } : { slot: n },
    agentId: tokens[4]!,
    operation: tokens.slice(5).join("."),
  }
}

/** The server's subject mappings that route requests for this placement. */
export const routingMappings = (placement: Placement): Record<string, string> => {
  const slots = slotCount(placement)
  const mappings: Record<string, string> = {}
  for (const operation of routedOperationSubjects())
    mappings[`${API_ROOT}.*.${operation}`] =
      `${ROUTE_ROOT}.${placement.partitions}.{{partition(${slots},1)}}.{{wildcard(1)}}.${operation}`
  return mappings
}

/** The same, as a nats-server configuration block (top level: the account every user of the file is in). */
export const routingConfig = (placement: Placement): string =>
  [
    "# Routes each request to the replica owning its agent's partition (contracts/routing.ts).",
    "mappings {",
    ...Object.entries(routingMappings(placement)).map(([from, to]) => `  "${from}": "${to}"`),
    "}",
    "",
  ].join("\n")

/** The partition `placement` puts an agent on (contracts/partitions.ts, for a placement given rather than read). */
export const placedPartition = (placement: Placement, agentId: string): number => {
  const candidates = placement.candidates(agentId)
  return candidates[fnv1a32(agentId) % candidates.length]!
}
