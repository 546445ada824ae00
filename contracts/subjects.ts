/**
 * Subject layout. One stream (WM_EVENTS) captures `wm.evt.>`:
 *
 *   wm.evt.<agent>.agent            agent registered, budget changed
 *   wm.evt.<agent>.step             steps, focus, reads, references
 *   wm.evt.<agent>.entry.<entry>    everything that happens to one entry
 *
 * so one agent replays alone (`wm.evt.<agent>.>`), one entry's events can be
 * guarded with Nats-Expected-Last-Subject-Sequence, and the whole log
 * replays for an audit (`wm.evt.>`).
 *
 * Requests go to `wm.api.<agent>.<operation>`; the agent id in the subject
 * lets broker permissions confine an agent to its own memory.
 */
import { entryIdOf, type MemoryEvent } from "./events.ts"

export const EVENTS_STREAM = "WM_EVENTS"

/** Where clients and services look for NATS when NATS_URL is not set. */
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
export const EVENTS_ROOT = "wm.evt"
export const ALL_EVENTS = `${EVENTS_ROOT}.>`

export const DEAD_LETTER_STREAM = "WM_DEAD_LETTERS"
export const DEAD_LETTER_ROOT = "wm.dlq"
export const deadLetterSubject = (projection: string) => `${DEAD_LETTER_ROOT}.${projection}`

export const agentEvents = (agentId: string) => `${EVENTS_ROOT}.${agentId}.>`
export const agentConfigSubject = (agentId: string) => `${EVENTS_ROOT}.${agentId}.agent`
export const agentStepSubject = (agentId: string) => `${EVENTS_ROOT}.${agentId}.step`
export const entrySubject = (agentId: string, entryId: string) => `${EVENTS_ROOT}.${agentId}.entry.${entryId}`
/** Every agent's configuration events: the gateway's admission state needs only these. */
export const ALL_AGENT_CONFIG = `${EVENTS_ROOT}.*.agent`
/** The agent id in an event subject `wm.evt.<agent>...` (its third token). */
export const agentIdOfEventSubject = (subject: string): string => subject.split(".")[2] ?? ""

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
/** Queue group of the gateway's subscriber to `wm.api.*.>` that refuses operations the API does not have. */
export const UNKNOWN_OPERATIONS_QUEUE = "wm-unknown-operations"
/** The agent id is the third token of an API subject. */
export const agentIdOfApiSubject = (subject: string): string => subject.split(".")[2] ?? ""
