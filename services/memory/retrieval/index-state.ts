/**
 * The memory service's indexes of one agent as its partition's snapshot carries them, so a partition
 * taken from a snapshot replays only the tail instead of every entry the agent ever recorded:
 *
 *   { lexical: [[entryId, "term term …"], …], points: [[entryId, timestamp, correlationId], …],
 *     correlations: [[correlationId, [entryId, …]], …], texts: [[entryId, text], …] }
 *
 * Lexical entries are in insertion order and terms joined by spaces (a term is letters and digits only);
 * adding them back in that order gives the same rankings as replaying the events (ties go by insertion
 * order). The timeline's points and correlation lists are kept in their own orders; `texts` are the
 * working entries' recorded texts, their vectors' source (working-texts.ts).
 */
import type { EventOf, MemoryEvent } from "../../../contracts/events.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import { locatedTerms } from "../../../domain/terms.ts"
import { layoutOf } from "../../../domain/text-layout.ts"
import { type KeptState, keptState } from "../../platform/partitions/partitioned-views.ts"
import { fieldReaders } from "../../platform/partitions/snapshot-fields.ts"
import type { EpisodeIndex, Point, TimelineParts } from "./episodes.ts"
import type { LexicalIndex } from "./lexical-index.ts"
import type { WorkingTexts } from "./working-texts.ts"

/** Change it with the encoding: snapshots of another format are rebuilt from the log. */
export const INDEX_STATE_FORMAT = "memory-indexes-2"

export interface IndexState {
  readonly lexical: ReadonlyArray<readonly [string, ReadonlyArray<string>]>
  readonly timeline: TimelineParts
  readonly texts: ReadonlyArray<readonly [string, string]>
}

/**
 * What an event applied to the agent's view changes in the indexes (`after`: the view after it, undefined
 * once the agent is removed). The service and `wm verify` fold the log with it.
 */
export const indexEvent = (
  lexical: LexicalIndex,
  episodes: EpisodeIndex,
  texts: WorkingTexts,
  event: MemoryEvent,
  after: AgentView | undefined,
): void => {
  texts.apply(event, after)
  if (after === undefined) {
    if (event._tag === "AgentForgotten") {
      lexical.dropAgent(event.agentId)
      episodes.dropAgent(event.agentId)
    }
  } else if (event._tag === "EntryRecorded") indexEntry(lexical, episodes, event)
  else if (event._tag === "EntryForgotten") {
    lexical.remove(event.agentId, event.entryId)
    episodes.remove(event.agentId, event.entryId)
  }
}

const indexEntry = (lexical: LexicalIndex, episodes: EpisodeIndex, event: EventOf<"EntryRecorded">) => {
  const located = locatedTerms(event.content)
  lexical.add(event.agentId, event.entryId, located.terms, layoutOf(event.content, located))
  episodes.add(event.agentId, event.entryId, event.timestamp, event.correlationId)
}

const { fail, array: arrayOf, string: stringOf } = fieldReaders((field, reason) => `memory indexes: ${field} ${reason}`)

export const decodeIndexState = (value: unknown): IndexState => {
  if (value === null || typeof value !== "object") return fail("state", "not an object")
  const state = value as Record<string, unknown>
  const lexical = arrayOf(state.lexical, "lexical").map((pair) => {
    const [id, joined] = arrayOf(pair, "lexical entry")
    const text = stringOf(joined, "lexical terms")
    return [stringOf(id, "lexical id"), text === "" ? [] : text.split(" ")] as const
  })
  const points = arrayOf(state.points, "points").map((p): Point => {
    const [entryId, timestamp, correlationId] = arrayOf(p, "point")
    if (typeof timestamp !== "number" || !Number.isFinite(timestamp)) return fail("point timestamp", "not a number")
    return {
      entryId: stringOf(entryId, "point id"),
      timestamp,
      correlationId: correlationId === null ? null : stringOf(correlationId, "point correlation id"),
    }
  })
  const correlations = arrayOf(state.correlations, "correlations").map((pair) => {
    const [id, ids] = arrayOf(pair, "correlation")
    return [
      stringOf(id, "correlation id"),
      arrayOf(ids, "correlation ids").map((e) => stringOf(e, "entry id")),
    ] as const
  })
  const texts = arrayOf(state.texts, "texts").map((pair) => {
    const [id, text] = arrayOf(pair, "text")
    return [stringOf(id, "text id"), stringOf(text, "text")] as const
  })
  return { lexical, timeline: { points, correlations }, texts }
}

/** The agent's indexes, JSON-ready. */
export const takeIndexState = (lexical: LexicalIndex, episodes: EpisodeIndex, texts: WorkingTexts, agentId: string) => {
  const timeline = episodes.partsOf(agentId)
  return {
    lexical: lexical.documentsOf(agentId).map(([id, t]) => [id, t.join(" ")]),
    points: timeline.points.map((p) => [p.entryId, p.timestamp, p.correlationId]),
    correlations: timeline.correlations,
    texts: texts.of(agentId),
  }
}

export const memoryIndexState = (
  lexical: LexicalIndex,
  episodes: EpisodeIndex,
  texts: WorkingTexts,
): KeptState<unknown> =>
  keptState<IndexState>({
    format: INDEX_STATE_FORMAT,
    decode: decodeIndexState,
    take: (agentId) => takeIndexState(lexical, episodes, texts, agentId),
    restore: (agentId, state) => {
      lexical.dropAgent(agentId)
      for (const [id, t] of state.lexical) lexical.add(agentId, id, t)
      episodes.restore(agentId, state.timeline)
      texts.restore(agentId, state.texts)
    },
  })
