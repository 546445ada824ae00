/**
 * What the fade service keeps per working entry beside the view: the raw text (working drops it at
 * rung 2, but a demotion embeds it) and what a demotion records that the view no longer holds (the key
 * points it dropped, the citations of an earlier life). Both are kept for working entries only, so they
 * are bounded by the working tier, not by the agent's history: a demotion carries the entry's facts
 * (v2), and a cue of it promoted back reads them from its subject when it demotes again (`earlierLife`).
 *
 * A partition's snapshot carries them per agent:
 *   { raw: [[entryId, text], …], histories: [[entryId, { keyPoints, earlierCitations, earlierLife? }], …] }
 */
import { HashMap, Option } from "effect"
import type { MemoryEvent } from "../../contracts/events.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { type EntryHistory, NO_HISTORY } from "../../domain/fade-decide.ts"
import { type KeptState, keptState } from "../platform/partitions/partitioned-views.ts"
import { fieldReaders } from "../platform/partitions/snapshot-fields.ts"

export type KeptHistory = EntryHistory & { readonly earlierLife?: true }

/** Change it with the encoding: snapshots of another format are rebuilt from the log. */
export const KEPT_TEXTS_FORMAT = "fade-texts-1"

export interface AgentTexts {
  readonly raw: ReadonlyArray<readonly [string, string]>
  readonly histories: ReadonlyArray<readonly [string, KeptHistory]>
}

const {
  fail,
  array: arrayOf,
  string: stringOf,
  number: numberOf,
} = fieldReaders((field, reason) => `fade texts: ${field} ${reason}`)

const decodeHistory = (value: unknown): KeptHistory => {
  if (value === null || typeof value !== "object") return fail("history", "not an object")
  const h = value as Record<string, unknown>
  const kp = h.keyPoints as Record<string, unknown> | null | undefined
  const keyPoints =
    kp === null || kp === undefined
      ? null
      : { text: stringOf(kp.text, "history key points"), tokens: numberOf(kp.tokens, "history key point tokens") }
  const earlierCitations = numberOf(h.earlierCitations, "history citations")
  return h.earlierLife === true ? { keyPoints, earlierCitations, earlierLife: true } : { keyPoints, earlierCitations }
}

export const decodeAgentTexts = (value: unknown): AgentTexts => {
  if (value === null || typeof value !== "object") return fail("state", "not an object")
  const state = value as Record<string, unknown>
  return {
    raw: arrayOf(state.raw, "raw").map((pair) => {
      const [id, text] = arrayOf(pair, "raw text")
      return [stringOf(id, "raw id"), stringOf(text, "raw text")] as const
    }),
    histories: arrayOf(state.histories, "histories").map((pair) => {
      const [id, history] = arrayOf(pair, "history")
      return [stringOf(id, "history id"), decodeHistory(history)] as const
    }),
  }
}

export class KeptTexts {
  readonly #raw = new Map<string, Map<string, string>>()
  readonly #histories = new Map<string, Map<string, KeptHistory>>()

  static #of<V>(maps: Map<string, Map<string, V>>, agentId: string): Map<string, V> {
    let map = maps.get(agentId)
    if (map === undefined) {
      map = new Map()
      maps.set(agentId, map)
    }
    return map
  }

  /** What an event changes; `before` and `after` are the agent's view around it (`after` undefined: removed). */
  apply(event: MemoryEvent, before: AgentView | undefined, after: AgentView | undefined): void {
    this.#keepHistory(event, before)
    if (after === undefined) {
      if (event._tag === "AgentForgotten") this.forgetAgent(event.agentId)
    } else if (event._tag === "EntryRecorded") KeptTexts.#of(this.#raw, event.agentId).set(event.entryId, event.content)
    else if (event._tag === "CuePromoted" && event.recalled.form === "raw")
      KeptTexts.#of(this.#raw, event.agentId).set(event.entryId, event.recalled.text)
    else if (event._tag === "EntryDemoted" || event._tag === "EntryForgotten")
      this.#raw.get(event.agentId)?.delete(event.entryId)
  }

  #keepHistory(event: MemoryEvent, before: AgentView | undefined): void {
    if (
      event._tag !== "RungChanged" &&
      event._tag !== "EntryDemoted" &&
      event._tag !== "EntryForgotten" &&
      event._tag !== "CuePromoted"
    )
      return
    const agentHistories = KeptTexts.#of(this.#histories, event.agentId)
    const history = agentHistories.get(event.entryId) ?? NO_HISTORY
    if (event._tag === "EntryForgotten") agentHistories.delete(event.entryId)
    // Back in working: a v1 demotion's history stays; otherwise the earlier life is read when it is needed.
    else if (event._tag === "CuePromoted")
      agentHistories.set(event.entryId, agentHistories.get(event.entryId) ?? { ...NO_HISTORY, earlierLife: true })
    else if (event._tag === "RungChanged") {
      if (event.to === 1)
        agentHistories.set(event.entryId, { ...history, keyPoints: { text: event.text, tokens: event.tokens } })
    } else if (event.entry !== null) agentHistories.delete(event.entryId)
    else {
      // A v1 demotion carries nothing: what the entry's next life needs is kept from here.
      const working =
        before === undefined ? undefined : Option.getOrUndefined(HashMap.get(before.entries, event.entryId))
      agentHistories.set(event.entryId, {
        ...history,
        earlierCitations: history.earlierCitations + (working?.citationCount ?? 0),
      })
    }
  }

  rawText(agentId: string, entryId: string): string | undefined {
    return this.#raw.get(agentId)?.get(entryId)
  }

  history(agentId: string, entryId: string): KeptHistory | undefined {
    return this.#histories.get(agentId)?.get(entryId)
  }

  forgetAgent(agentId: string): void {
    this.#raw.delete(agentId)
    this.#histories.delete(agentId)
  }

  /** Entries whose history is kept. */
  trackedHistories(): number {
    let n = 0
    for (const m of this.#histories.values()) n += m.size
    return n
  }

  /** The agent's texts, JSON-ready (copies). */
  take(agentId: string): AgentTexts {
    return { raw: [...(this.#raw.get(agentId) ?? [])], histories: [...(this.#histories.get(agentId) ?? [])] }
  }

  restore(agentId: string, texts: AgentTexts): void {
    this.#raw.set(agentId, new Map(texts.raw))
    this.#histories.set(agentId, new Map(texts.histories))
  }

  /** For the partitions' snapshots. */
  kept(): KeptState<unknown> {
    return keptState<AgentTexts>({
      format: KEPT_TEXTS_FORMAT,
      decode: decodeAgentTexts,
      take: (agentId) => this.take(agentId),
      restore: (agentId, texts) => this.restore(agentId, texts),
    })
  }
}
