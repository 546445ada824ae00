import { Schema } from "effect"

/**
 * Identifiers that appear as NATS subject tokens must not contain `.`, `*`,
 * `>` or whitespace; this pattern keeps them safe in subjects, KV keys and
 * file names alike.
 */
const SUBJECT_TOKEN = /^[A-Za-z0-9_-]{1,64}$/u
const subjectToken = (what: string) =>
  Schema.String.check(Schema.isPattern(SUBJECT_TOKEN)).annotate({
    description: `${what}: 1-64 characters of A-Z, a-z, 0-9, '_' or '-'`,
  })

export const AgentId = subjectToken("agent id")
export const EntryId = subjectToken("entry id")
export const StepId = subjectToken("step id")
/** Idempotency key of a request: a retry with the same key is stored and applied once. */
export const RequestId = subjectToken("request id")

export const EventId = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)).annotate({
  description: "unique event id, used as the Nats-Msg-Id of its publish",
})

/** Milliseconds since the Unix epoch (UTC). */
export const EpochMillis = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 8_640_000_000_000_000 })).annotate({
  description: "milliseconds since 1970-01-01T00:00:00Z",
})

export const isSubjectToken = (value: string): boolean => SUBJECT_TOKEN.test(value)
