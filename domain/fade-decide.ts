/**
 * The fade decider: a planned move (fade-plan.ts) and the representation
 * the fade service made for it — key points, a summary, or an embedding —
 * become the event that records the decision. Pure: the text, the
 * embedding and the stamp come in; token counts are taken here with the
 * deterministic tokenizer.
 *
 * A demotion carries what the entry leaves for its long-term record
 * (`DemotedEntry`), so the long-term projection can resume from a
 * checkpoint anywhere in the log and still build the record.
 */
import { HashMap, Option } from "effect"
import { InvalidState } from "../contracts/errors.ts"
import { type DemotedEntry, EVENT_VERSIONS, type EventOf } from "../contracts/events.ts"
import type { Embedding, Producer } from "../contracts/fade.ts"
import type { AgentView } from "./agent-view.ts"
import { accept, type Decision, envelope, refuse, type Stamp } from "./decision.ts"
import type { FadeMove } from "./fade-plan.ts"
import { blockTokens } from "./render.ts"

/** What the fade service made for the move: by rung, computed once and recorded. */
export type MadeRepresentation =
  | { readonly to: 1; readonly keyPoints: string }
  | { readonly to: 2; readonly summary: string; readonly producer: Producer }
  | { readonly to: 3; readonly embedding: Embedding }

/**
 * What outlives working for an entry across its lives in working (a cue
 * promoted back is a new life): the key points it had (working drops them
 * at rung 2; the record keeps them) and the citations of its earlier lives.
 */
export interface EntryHistory {
  readonly keyPoints: { readonly text: string; readonly tokens: number } | null
  readonly earlierCitations: number
}

export const NO_HISTORY: EntryHistory = { keyPoints: null, earlierCitations: 0 }

export const EXTRACTIVE_PRODUCER: Producer = {
  kind: "extractive",
  model: "extractive-sentences-v1",
  fallbackReason: null,
  attempts: 1,
}

export type FadeEvent = EventOf<"RungChanged"> | EventOf<"EntryDemoted">

export const decideFadeMove = (
  view: AgentView,
  move: FadeMove,
  made: MadeRepresentation,
  stamp: Stamp,
  history: EntryHistory = NO_HISTORY,
): Decision<FadeEvent> => {
  const entry = Option.getOrUndefined(HashMap.get(view.entries, move.entryId))
  if (entry === undefined)
    return refuse(new InvalidState({ field: "entryId", reason: `${move.entryId} is not in working` }))
  if (entry.transient)
    return refuse(new InvalidState({ field: "entryId", reason: `${move.entryId} is a transient cue; cues never fade` }))
  if (entry.rung !== move.from)
    return refuse(
      new InvalidState({ field: "from", reason: `${move.entryId} is at rung ${entry.rung}, not ${move.from}` }),
    )
  if (made.to !== move.to)
    return refuse(
      new InvalidState({
        field: "to",
        reason: `the move goes to rung ${move.to}, the representation is for ${made.to}`,
      }),
    )
  const encoding = view.config.encoding
  const common = { ...envelope(stamp), entryId: entry.id, from: move.from, score: move.score }
  switch (made.to) {
    case 1:
      return accept({
        _tag: "RungChanged",
        ...common,
        to: 1,
        text: made.keyPoints,
        tokens: blockTokens(entry, "keyPoints", made.keyPoints, encoding),
        producer: EXTRACTIVE_PRODUCER,
      })
    case 2:
      return accept({
        _tag: "RungChanged",
        ...common,
        to: 2,
        text: made.summary,
        tokens: blockTokens(entry, "summary", made.summary, encoding),
        producer: made.producer,
      })
    case 3: {
      const keyPoints =
        entry.keyPoints !== null && entry.tokens.keyPoints !== undefined
          ? { text: entry.keyPoints, tokens: entry.tokens.keyPoints }
          : history.keyPoints
      const left: DemotedEntry = {
        timestamp: entry.timestamp,
        origin: entry.origin,
        correlationId: entry.correlationId,
        tags: entry.tags,
        moodSnapshot: entry.moodSnapshot,
        emotionalWeight: entry.emotionalWeight,
        rawTokens: entry.tokens.raw,
        keyPoints,
        summary:
          entry.summary !== null && entry.tokens.summary !== undefined
            ? { text: entry.summary, tokens: entry.tokens.summary }
            : null,
        citationCount: history.earlierCitations + entry.citationCount,
      }
      return accept({
        _tag: "EntryDemoted",
        ...common,
        v: EVENT_VERSIONS.EntryDemoted,
        embedding: made.embedding,
        entry: left,
      })
    }
  }
}
