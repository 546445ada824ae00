/**
 * Long-term records: what an entry leaves behind when it demotes out of
 * working. The record holds the embedding (in the event), the lexical terms
 * of the raw text, and this payload; the raw text itself stays in the
 * substrate.
 */
import { Schema } from "effect"
import { EmotionalWeight, Mood, Origin, RepresentationKind, TokenCount } from "./entry.ts"
import { AgentId, EntryId, EpochMillis } from "./ids.ts"

export const LongTermPayload = Schema.Struct({
  agentId: AgentId,
  entryId: EntryId,
  origin: Origin,
  tags: Schema.Array(Schema.String),
  correlationId: Schema.NullOr(Schema.String),
  moodSnapshot: Schema.NullOr(Mood),
  emotionalWeight: EmotionalWeight,
  timestamp: EpochMillis,
  /** The agent's clock when the entry left working. */
  demotedAt: EpochMillis,
  /** The best summary working had: the abstractive summary, else the key points. */
  summary: Schema.String,
  summaryForm: RepresentationKind,
  summaryTokens: TokenCount,
  keyPoints: Schema.NullOr(Schema.String),
  keyPointsTokens: Schema.NullOr(TokenCount),
  rawTokens: TokenCount,
  citationCount: Schema.Int,
  /** The embedding model of the record's vector. */
  model: Schema.String,
})
export type LongTermPayload = typeof LongTermPayload.Type

export const RecordFilter = Schema.Struct({
  origins: Schema.optionalKey(Schema.Array(Origin)),
  /** Records carrying any of these tags. */
  tags: Schema.optionalKey(Schema.Array(Schema.String)),
  correlationId: Schema.optionalKey(Schema.String),
  /** Entry timestamps from (inclusive) and to (exclusive), epoch ms. */
  from: Schema.optionalKey(EpochMillis),
  to: Schema.optionalKey(EpochMillis),
})
export type RecordFilter = typeof RecordFilter.Type

export const matchesFilter = (
  r: {
    readonly origin: string
    readonly tags: ReadonlyArray<string>
    readonly correlationId: string | null
    readonly timestamp: number
  },
  f: RecordFilter | undefined,
): boolean =>
  f === undefined ||
  ((f.origins === undefined || f.origins.includes(r.origin as never)) &&
    (f.tags === undefined || f.tags.some((t) => r.tags.includes(t))) &&
    (f.correlationId === undefined || r.correlationId === f.correlationId) &&
    (f.from === undefined || r.timestamp >= f.from) &&
    (f.to === undefined || r.timestamp < f.to))

/**
 * What a long-term store still keeps below its API once a forget has deleted its records, by the prefix
 * of its projection's name (`longterm-<store name>`), the first that matches; a store not named here keeps
 * nothing (the embedded stores overwrite the bytes). SECURITY.md says why.
 */
export const RETAINED_AFTER_DELETE: ReadonlyArray<{ readonly projectionPrefix: string; readonly keeps: string }> = [
  {
    // A collection per agent (WM_QDRANT_COLLECTIONS=per-agent).
    projectionPrefix: "longterm-qdrant-agents-",
    keeps:
      "Qdrant deletes softly: an entry's deleted points keep their payloads and vectors in the agent's collection's segment files until the vacuum optimizer rewrites their segment, and in its write-ahead log until about 1–2 MB of the agent's later writes; an agent's forget deletes its collections, whose directories Qdrant unlinks without overwriting",
  },
  {
    projectionPrefix: "longterm-qdrant-",
    keeps:
      "Qdrant deletes softly: the deleted points' payloads and vectors stay in its segment files until the vacuum optimizer rewrites their segment, and in its write-ahead log until about 1–2 MB of later writes",
  },
]
