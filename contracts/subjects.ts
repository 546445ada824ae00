/**
 * Subject layout. One stream (WM_EVENTS) captures `wm.evt.>`:
 *
 *   wm.evt.<p>.<agent>.agent            agent registered, budget changed
 *   wm.evt.<p>.<agent>.step             steps, focus, reads, references
 *   wm.evt.<p>.<agent>.entry.<entry>    everything that happens to one entry
 *
 * where <p> is the agent's partition (contracts/partitions.ts), so a replica
 * that owns some partitions consumes only theirs (`wm.evt.<p>.>`), one agent
 * replays alone (`wm.evt.<p>.<agent>.>`), one entry's events can be guarded
 * with Nats-Expected-Last-Subject-Sequence, and the whole log replays for an
 * audit (`wm.evt.>`).
 *
 * Requests go to `wm.api.<agent>.<operation>`; the agent id in the subject
 * lets broker permissions confine an agent to its own memory, and lets the
 * replica that owns the agent's partition answer (services/platform/api/serve.ts).
 *
 * Logs written before partitions (`wm.evt.<agent>.…`) are rewritten by
 * `wm migrate` (cli/audit/migrate.ts); `legacyAgentOfEventSubject` reads them.
 */
import { entryIdOf, type MemoryEvent } from "./events.ts"
import { partitionOf } from "./partitions.ts"

export const EVENTS_STREAM = "WM_EVENTS"

/** Where clients and services look for NATS when NATS_URL is not set. */
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
export const EVENTS_ROOT = "wm.evt"
export const ALL_EVENTS = `${EVENTS_ROOT}.>`

export const DEAD_LETTER_STREAM = "WM_DEAD_LETTERS"
export const DEAD_LETTER_ROOT = "wm.dlq"
export const deadLetterSubject = (projection: string) => `${DEAD_LETTER_ROOT}.${projection}`

/** Where one agent's events live: its partition's subtree. */
const agentRoot = (agentId: string) => `${EVENTS_ROOT}.${partitionOf(agentId)}.${agentId}`
/** Every event of one partition: what a replica owning it consumes. */
export const partitionEvents = (partition: number) => `${EVENTS_ROOT}.${partition}.>`
export const agentEvents = (agentId: string) => `${agentRoot(agentId)}.>`
export const agentConfigSubject = (agentId: string) => `${agentRoot(agentId)}.agent`
export const agentStepSubject = (agentId: string) => `${agentRoot(agentId)}.step`
export const entrySubject = (agentId: string, entryId: string) => `${agentRoot(agentId)}.entry.${entryId}`
/** One agent's events whatever partition they were written to (a log of another placement). */
export const agentEventsInAnyPartition = (agentId: string) => `${EVENTS_ROOT}.*.${agentId}.>`
/** Every agent's configuration events: the gateway's admission state needs only these. */
export const ALL_AGENT_CONFIG = `${EVENTS_ROOT}.*.*.agent`
/** Every agent's step subjects. */
export const ALL_STEPS = `${EVENTS_ROOT}.*.*.step`
/** Every entry subject of every agent. */
export const ALL_ENTRIES = `${EVENTS_ROOT}.*.*.entry.*`
/** One entry's subject whoever recorded it. */
export const entryOfAnyAgent = (entryId: string) => `${EVENTS_ROOT}.*.*.entry.${entryId}`

/** The agent id in an event subject (its fourth token; "" when it is not one). */
export const agentIdOfEventSubject = (subject: string): string => subject.split(".")[3] ?? ""
/** The partition in an event subject (null when it is not one). */
export const partitionOfEventSubject = (subject: string): number | null => {
  const token = subject.split(".")[2] ?? ""
  return /^\d+$/.test(token) ? Number(token) : null
}
/**
 * A subject of the layout before partitions (`wm.evt.<agent>.agent|step`, `wm.evt.<agent>.entry.<entry>`)
 * in today's layout; null when the subject is not of the old layout (a subject of today's layout whose
 * partition token matches its agent's partition is today's).
 */
export const upgradeLegacySubject = (subject: string): string | null => {
  const t = subject.split(".")
  if (t[0] !== "wm" || t[1] !== "evt") return null
  if (isPartitionedSubject(t)) return null
  const agentId = t[2] ?? ""
  if (t.length === 4 && t[3] === "agent") return agentConfigSubject(agentId)
  if (t.length === 4 && t[3] === "step") return agentStepSubject(agentId)
  if (t.length === 5 && t[3] === "entry") return entrySubject(agentId, t[4] ?? "")
  return null
}

const isPartitionShaped = (t: ReadonlyArray<string>): boolean => {
  const kind = t[4]
  const shaped = (t.length === 5 && (kind === "agent" || kind === "step")) || (t.length === 6 && kind === "entry")
  return shaped && /^\d+$/.test(t[2] ?? "")
}
const isPartitionedSubject = (t: ReadonlyArray<string>): boolean =>
  isPartitionShaped(t) && Number(t[2]) === partitionOf(t[3] ?? "")

/**
 * Where a record of the log belongs in this deployment's layout: null when it is there already (or its
 * subject is not an event subject); otherwise the subject of today's layout for a record of the layout
 * before partitions, or for one written with another WM_PARTITIONS or WM_PARTITION_PINS (the same
 * subject in its agent's partition now).
 */
export const relocatedSubject = (subject: string): string | null => {
  const upgraded = upgradeLegacySubject(subject)
  if (upgraded !== null) return upgraded
  const t = subject.split(".")
  if (t[0] !== "wm" || t[1] !== "evt" || !isPartitionShaped(t) || isPartitionedSubject(t)) return null
  return [EVENTS_ROOT, String(partitionOf(t[3] ?? "")), ...t.slice(3)].join(".")
}

export const eventSubject = (event: MemoryEvent): string => {
  const entryId = entryIdOf(event)
  if (entryId !== null) return entrySubject(event.agentId, entryId)
  switch (event._tag) {
    case "AgentRegistered":
    case "BudgetChanged":
    case "AgentForgotten":
      return agentConfigSubject(event.agentId)
    default:
      return agentStepSubject(event.agentId)
  }
}

export const API_ROOT = "wm.api"
export const apiSubject = (agentId: string, operation: string) => `${API_ROOT}.${agentId}.${operation}`
/** The subscription that serves one operation for every agent. */
export const apiWildcard = (operation: string) => `${API_ROOT}.*.${operation}`
/** The queue group of one replica of a partitioned service: a queue of its own, so it sees every request. */
export const replicaQueue = (service: string, replicaId: string) => `wm-${service}.${replicaId}`
/** Every replica queue of a partitioned service (what its broker permissions allow). */
export const replicaQueues = (service: string) => `wm-${service}.*`
/** Queue group of the gateway's subscriber to `wm.api.*.>` that refuses operations the API does not have. */
export const UNKNOWN_OPERATIONS_QUEUE = "wm-unknown-operations"
/**
 * Requests memory replicas make of one another: the part of a thread held by the partition's owner
 * (`wm.peer.memory.thread.<p>`). Only memory services may publish or subscribe there.
 */
export const MEMORY_PEERS_ROOT = "wm.peer.memory"
export const threadPartSubject = (partition: number) => `${MEMORY_PEERS_ROOT}.thread.${partition}`
export const ALL_THREAD_PARTS = `${MEMORY_PEERS_ROOT}.thread.*`
/** The agent id is the third token of an API subject. */
export const agentIdOfApiSubject = (subject: string): string => subject.split(".")[2] ?? ""
