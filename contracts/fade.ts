import { Schema } from "effect"

/**
 * A fade score and its parts, recorded with every rung decision so an audit
 * can answer "why did this fade?". Each part is its signed contribution to
 * the total: positive parts push the entry down, negative parts hold it up.
 */
export const FadeScoreParts = Schema.Struct({
  age: Schema.Finite,
  frequency: Schema.Finite,
  emotion: Schema.Finite,
  focus: Schema.Finite,
  pressure: Schema.Finite,
})
export type FadeScoreParts = typeof FadeScoreParts.Type

export const FadeScore = Schema.Struct({
  total: Schema.Finite,
  parts: FadeScoreParts,
  /**
   * threshold: the total crossed the rung's threshold. pressure: working was
   * above τ and this entry had the highest total of those still movable.
   */
  trigger: Schema.Literals(["threshold", "pressure"]),
  /** The threshold the total was compared with (for pressure, the rung's threshold is not required). */
  threshold: Schema.Finite,
  /** Working usage / budget when the decision was taken. */
  usage: Schema.Finite,
  /** τ in force for the agent and its task kind. */
  tau: Schema.Finite,
  /** The agent's clock the age was measured against. */
  now: Schema.Int,
})
export type FadeScore = typeof FadeScore.Type

const Share = Schema.Finite.check(Schema.isBetween({ minimum: 0.05, maximum: 1 }))

/** Per-agent fade settings, given at registration: the usage threshold τ, overall and per task kind. */
export const FadeSettings = Schema.Struct({
  tau: Schema.optionalKey(Share),
  tauByTaskKind: Schema.optionalKey(Schema.Record(Schema.String, Share)),
})
export type FadeSettings = typeof FadeSettings.Type

/** Who produced a representation, and whether it is a fallback. */
export const Producer = Schema.Struct({
  kind: Schema.Literals(["extractive", "offline", "remote"]),
  model: Schema.String,
  /** Why the configured remote provider was not used, when it was not. */
  fallbackReason: Schema.NullOr(Schema.String),
  attempts: Schema.Int,
})
export type Producer = typeof Producer.Type

export const Embedding = Schema.Struct({
  model: Schema.String,
  dims: Schema.Int,
  /** Little-endian float32 values, base64. */
  vector: Schema.String,
  producer: Producer,
})
export type Embedding = typeof Embedding.Type
