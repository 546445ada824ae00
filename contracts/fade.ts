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
  /** The threshold the total crossed. */
  threshold: Schema.Finite,
  /** Working usage / budget when the decision was taken. */
  usage: Schema.Finite,
})
export type FadeScore = typeof FadeScore.Type

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
