import { Schema } from "effect"
import { EntryId, EpochMillis } from "./ids.ts"

/** Who produced an entry. INTERNAL is the agent's own thought; the others are what it heard. */
export const Origin = Schema.Literals(["INTERNAL", "USER", "ADVISOR", "SYSTEM"])
export type Origin = typeof Origin.Type

export const Mood = Schema.Struct({
  valence: Schema.Finite.check(Schema.isBetween({ minimum: -1, maximum: 1 })),
  arousal: Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })),
}).annotate({ description: "valence in [-1, 1], arousal in [0, 1] at the moment of recording" })
export type Mood = typeof Mood.Type

/**
 * Fidelity rungs: 0 raw, 1 extractive key points stored beside the raw,
 * 2 abstractive summary (working carries only the summary), 3 long-term only.
 * Working never holds rung 3.
 */
export const Rung = Schema.Literals([0, 1, 2, 3])
export type Rung = typeof Rung.Type
export const WorkingRung = Schema.Literals([0, 1, 2])
export type WorkingRung = typeof WorkingRung.Type

/** The representations an entry can be serialised in. */
export const RepresentationKind = Schema.Literals(["raw", "keyPoints", "summary"])
export type RepresentationKind = typeof RepresentationKind.Type

export const TokenCount = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

/**
 * Token cost of each representation as the context builder serialises it:
 * the whole rendered line (header included), counted once by whoever
 * produced the representation, in the agent's encoding.
 */
export const RepresentationTokens = Schema.Struct({
  raw: TokenCount,
  keyPoints: Schema.optionalKey(TokenCount),
  summary: Schema.optionalKey(TokenCount),
})
export type RepresentationTokens = typeof RepresentationTokens.Type

export const EmotionalWeight = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })).annotate({
  description: "0..1; a higher weight resists fading",
})

/** An entry in an agent's working tier: every field of the design's WorkingEntry, plus token counts. */
export const WorkingEntry = Schema.Struct({
  id: EntryId,
  timestamp: EpochMillis,
  origin: Origin,
  /** Raw text; null once the entry has faded to rung 2 (the raw text then lives in the substrate). */
  content: Schema.NullOr(Schema.String),
  correlationId: Schema.NullOr(Schema.String),
  tags: Schema.Array(Schema.String),
  moodSnapshot: Schema.NullOr(Mood),
  rung: WorkingRung,
  /** Times the entry was served in a built context (read events). */
  referenceCount: Schema.Int,
  /** Times the agent reported using the entry in a step (reference events). */
  citationCount: Schema.Int,
  emotionalWeight: EmotionalWeight,
  keyPoints: Schema.NullOr(Schema.String),
  summary: Schema.NullOr(Schema.String),
  tokens: RepresentationTokens,
  /** Stream sequence of the last event on this entry's subject (the concurrency guard for rung changes). */
  lastEventSeq: Schema.Int,
  /** The agent's entry counter when fade tracking of this entry began (recorded, or promoted from a cue). */
  ordinal: Schema.Int,
  /** When fade tracking began: the entry's timestamp, or the time of its promotion from a cue. */
  trackedSince: EpochMillis,
  lastReadAt: Schema.NullOr(EpochMillis),
  /** On the agent's clock (its newest entry's timestamp), like every age the fade score measures. */
  lastCitedAt: Schema.NullOr(EpochMillis),
  /** True while the entry is a transient cue rehydrated from long-term for the current step. */
  transient: Schema.Boolean,
})
export type WorkingEntry = typeof WorkingEntry.Type
