/**
 * What every decider returns, and the one envelope every event carries.
 * Services stamp (ids, times, causation) and append; the event itself is
 * always built here, from the stamp, by a pure decider.
 */
import type {
  AgentAlreadyRegistered,
  AgentNotFound,
  InvalidState,
  UnknownEntries,
  ValidationError,
} from "../contracts/errors.ts"

/** Envelope values fixed by the service that handles the request. */
export interface Stamp {
  readonly eventId: string
  readonly agentId: string
  readonly at: number
  readonly causationId: string | null
  readonly correlationId: string | null
}

/** The schema version deciders write. */
export const CURRENT_EVENT_VERSION = 1 as const

export const envelope = (stamp: Stamp) => ({ v: CURRENT_EVENT_VERSION, ...stamp })

export type DecisionError = ValidationError | AgentNotFound | AgentAlreadyRegistered | InvalidState | UnknownEntries
export type Decision<E> =
  | { readonly ok: true; readonly event: E }
  | { readonly ok: false; readonly error: DecisionError }

export const accept = <E>(event: E): Decision<E> => ({ ok: true, event })
export const refuse = <E>(error: DecisionError): Decision<E> => ({ ok: false, error })
