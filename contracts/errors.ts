/**
 * Typed errors returned by the API. Each is a Schema.TaggedError, so inside
 * services they are caught by tag, and on the wire they travel as their JSON
 * encoding ({ "_tag": ..., fields }).
 */
import { Schema } from "effect"

export const FieldIssue = Schema.Struct({ field: Schema.String, reason: Schema.String })
export type FieldIssue = typeof FieldIssue.Type

/** The request is malformed. `field` names the first offending field; `issues` lists all of them. */
export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", {
  field: Schema.String,
  reason: Schema.String,
  issues: Schema.Array(FieldIssue),
}) {
  static one(field: string, reason: string): ValidationError {
    return new ValidationError({ field, reason, issues: [{ field, reason }] })
  }
  override get message(): string {
    return this.issues.map((i) => `${i.field}: ${i.reason}`).join("; ")
  }
}

export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()("AgentNotFound", {
  agentId: Schema.String,
}) {
  override get message(): string {
    return `agent '${this.agentId}' is not registered`
  }
}

export class AgentAlreadyRegistered extends Schema.TaggedError<AgentAlreadyRegistered>()("AgentAlreadyRegistered", {
  agentId: Schema.String,
}) {
  override get message(): string {
    return `agent '${this.agentId}' is already registered`
  }
}

/** The request is well formed but the agent's state does not allow it (no open step, not in hyperfocus...). */
export class InvalidState extends Schema.TaggedError<InvalidState>()("InvalidState", {
  field: Schema.String,
  reason: Schema.String,
}) {
  override get message(): string {
    return `${this.field}: ${this.reason}`
  }
}

export class UnknownEntries extends Schema.TaggedError<UnknownEntries>()("UnknownEntries", {
  entryIds: Schema.Array(Schema.String),
}) {
  override get message(): string {
    return `unknown entries: ${this.entryIds.join(", ")}`
  }
}

/**
 * The request id was already used for a different request: another
 * operation, or the same operation with a different body. Nothing was
 * written; the first request stands.
 */
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()("IdempotencyConflict", {
  field: Schema.String,
  reason: Schema.String,
}) {
  override get message(): string {
    return `${this.field}: ${this.reason}`
  }
}

/** A read asked to see writes up to `afterSeq`, and the projection did not get there in time. */
export class NotCaughtUp extends Schema.TaggedError<NotCaughtUp>()("NotCaughtUp", {
  afterSeq: Schema.Int,
  appliedSeq: Schema.Int,
}) {
  override get message(): string {
    return `the view has applied events up to ${this.appliedSeq}, not yet ${this.afterSeq}`
  }
}

/** The event log could not take the write; nothing was stored. Safe to retry with the same requestId. */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  reason: Schema.String,
}) {
  override get message(): string {
    return `unavailable: ${this.reason}`
  }
}

/**
 * The event log has reached a storage limit (the stream's bytes or messages, or the server's JetStream
 * store): nothing was stored, and a retry cannot succeed until an operator frees or adds space.
 * `limit` says which, as the server reported it.
 */
export class StorageFull extends Schema.TaggedError<StorageFull>()("StorageFull", {
  limit: Schema.String,
}) {
  override get message(): string {
    return `storage full: ${this.limit}; nothing was stored`
  }
}

/**
 * A batch holds more entries than the gateway takes in one request (WM_MAX_BATCH_ENTRIES): nothing was
 * stored. Send it again split into batches of at most `limit`.
 */
export class BatchTooLarge extends Schema.TaggedError<BatchTooLarge>()("BatchTooLarge", {
  field: Schema.String,
  size: Schema.Int,
  limit: Schema.Int,
}) {
  override get message(): string {
    return `${this.field}: ${this.size} entries; a batch takes at most ${this.limit}; nothing was stored`
  }
}

/**
 * Background work of the agent's partition has fallen behind the log: the `projection` (working, fade,
 * memory) is `lag` events of the partition behind, above the gateway's `limit` (WM_MAX_PROJECTION_LAG).
 * Nothing was stored; retry the same request (the same request ids) after `retryAfterMs`.
 */
export class Overloaded extends Schema.TaggedError<Overloaded>()("Overloaded", {
  projection: Schema.String,
  partition: Schema.Int,
  lag: Schema.Int,
  limit: Schema.Int,
  retryAfterMs: Schema.Int,
}) {
  override get message(): string {
    return `overloaded: the ${this.projection} projection of partition ${this.partition} is ${this.lag} events behind (the limit is ${this.limit}); nothing was stored; retry after ${this.retryAfterMs} ms`
  }
}

export const ApiError = Schema.Union([
  ValidationError,
  AgentNotFound,
  AgentAlreadyRegistered,
  InvalidState,
  UnknownEntries,
  IdempotencyConflict,
  NotCaughtUp,
  Unavailable,
  StorageFull,
  BatchTooLarge,
  Overloaded,
])
export type ApiError = typeof ApiError.Type
