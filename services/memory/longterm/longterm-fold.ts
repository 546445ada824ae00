/**
 * What the long-term projection of one partition asks of its store, event by event, in log order: a
 * demotion upserts the entry's record, a forget removes it (or the whole agent's), anything else only
 * moves the checkpoint. A v2 demotion carries everything its record holds; for a v1 demotion (upcast with
 * `entry: null`) the fold keeps, per entry, what its earlier events told.
 */
import type { RepresentationKind } from "../../../contracts/entry.ts"
import type { DemotedEntry, EventOf, MemoryEvent } from "../../../contracts/events.ts"
import type { LongTermPayload } from "../../../contracts/longterm.ts"
import { decodeVector } from "../../platform/embedding/embedder.ts"
import type { LongTermRecord } from "./store.ts"

/** One write the store is asked for, at the sequence of the event it follows from. */
export type Op = { readonly seq: number } & (
  | { readonly upsert: LongTermRecord; readonly subject: string }
  | { readonly remove: { readonly agentId: string; readonly entryId: string } }
  | { readonly removeAgent: string }
  | { readonly checkpointOnly: true }
)

interface EntryFacts {
  agentId: string
  entryId: string
  origin: LongTermPayload["origin"]
  tags: ReadonlyArray<string>
  correlationId: string | null
  moodSnapshot: LongTermPayload["moodSnapshot"]
  emotionalWeight: number
  timestamp: number
  rawTokens: number
  keyPoints: { text: string; tokens: number } | null
  summary: { text: string; tokens: number } | null
  citations: number
}

/** What a v1 demotion (upcast with `entry: null`) left, as far as the entry's earlier events told. */
const demotedEntryOf = (f: EntryFacts | undefined): DemotedEntry | null =>
  f === undefined
    ? null
    : {
        timestamp: f.timestamp,
        origin: f.origin,
        correlationId: f.correlationId,
        tags: f.tags,
        moodSnapshot: f.moodSnapshot,
        emotionalWeight: f.emotionalWeight,
        rawTokens: f.rawTokens,
        keyPoints: f.keyPoints,
        summary: f.summary,
        citationCount: f.citations,
      }

const best = (f: DemotedEntry): { text: string; tokens: number; form: RepresentationKind } =>
  f.summary
    ? { ...f.summary, form: "summary" }
    : f.keyPoints
      ? { ...f.keyPoints, form: "keyPoints" }
      : { text: "", tokens: 0, form: "summary" }

/** The record of a demotion from what the entry left (`left`). */
const payloadOf = (event: EventOf<"EntryDemoted">, left: DemotedEntry): LongTermPayload => {
  const summary = best(left)
  return {
    agentId: event.agentId,
    entryId: event.entryId,
    demotedAt: event.score.now,
    model: event.embedding.model,
    origin: left.origin,
    tags: [...left.tags],
    correlationId: left.correlationId,
    moodSnapshot: left.moodSnapshot,
    emotionalWeight: left.emotionalWeight,
    timestamp: left.timestamp,
    summary: summary.text,
    summaryForm: summary.form,
    summaryTokens: summary.tokens,
    keyPoints: left.keyPoints?.text ?? null,
    keyPointsTokens: left.keyPoints?.tokens ?? null,
    rawTokens: left.rawTokens,
    citationCount: left.citationCount,
  }
}

export const makeLongTermFold = () => {
  const facts = new Map<string, EntryFacts>()
  const keyOf = (agentId: string, entryId: string) => `${agentId}/${entryId}`

  /** The write an event asks for; `problem` says why a demotion could not be recorded. */
  const apply = (event: MemoryEvent, seq: number, subject: string): { readonly op: Op; readonly problem?: string } => {
    switch (event._tag) {
      case "EntryRecorded":
        facts.set(keyOf(event.agentId, event.entryId), {
          agentId: event.agentId,
          entryId: event.entryId,
          origin: event.origin,
          tags: event.tags,
          correlationId: event.correlationId,
          moodSnapshot: event.moodSnapshot,
          emotionalWeight: event.emotionalWeight,
          timestamp: event.timestamp,
          rawTokens: event.tokens,
          keyPoints: null,
          summary: null,
          citations: 0,
        })
        break
      case "RungChanged": {
        const f = facts.get(keyOf(event.agentId, event.entryId))
        if (f) {
          if (event.to === 1) f.keyPoints = { text: event.text, tokens: event.tokens }
          else f.summary = { text: event.text, tokens: event.tokens }
        }
        break
      }
      case "EntriesReferenced":
        for (const id of event.entryIds) {
          const f = facts.get(keyOf(event.agentId, id))
          if (f) f.citations++
        }
        break
      case "EntryForgotten":
        facts.delete(keyOf(event.agentId, event.entryId))
        return { op: { seq, remove: { agentId: event.agentId, entryId: event.entryId } } }
      case "AgentForgotten":
        for (const key of facts.keys()) if (key.startsWith(`${event.agentId}/`)) facts.delete(key)
        return { op: { seq, removeAgent: event.agentId } }
      case "EntryDemoted": {
        const left = event.entry ?? demotedEntryOf(facts.get(keyOf(event.agentId, event.entryId)))
        if (left === null) {
          return {
            op: { seq, checkpointOnly: true },
            problem: `${event.agentId}/${event.entryId} at seq ${seq}: a v1 demotion of an entry recorded before this projection's checkpoint; rebuild the store from the log`,
          }
        }
        // A demotion that carries the entry's facts (every one written since v2) ends the need for them: a
        // promoted cue's next demotion carries them again. Kept, they would grow with the agent's whole
        // history. A v1 log keeps them, as a re-demotion there reads them.
        if (event.entry !== null) facts.delete(keyOf(event.agentId, event.entryId))
        return {
          op: {
            seq,
            subject,
            upsert: { payload: payloadOf(event, left), vector: decodeVector(event.embedding.vector) },
          },
        }
      }
    }
    return { op: { seq, checkpointOnly: true } }
  }

  return {
    apply,
    /** Entries whose facts are kept for their demotion: recorded, not yet demoted or forgotten. */
    trackedEntries: () => facts.size,
  }
}
