/**
 * The vectors of working entries, for the dense half of merged retrieval. A
 * working entry's vector is made once, from the text it was recorded with (kept
 * in `WorkingTexts`), so fading never makes it again and a restart makes the
 * same one. Entries are embedded in the background lane as they are recorded
 * (those of one turn of the event loop in one call), after a partition is
 * taken (a few agents per turn), and when a query finds some without a vector;
 * a query never waits for a sentence model's inference: until its vector is
 * made an entry ranks by its words. Demoted or forgotten entries leave.
 */
import { HashMap } from "effect"
import type { WorkingEntry } from "../../../contracts/entry.ts"
import { type AgentView, fullestText } from "../../../domain/agent-view.ts"
import type { Embedder } from "../../platform/embedding/embedder.ts"
import type { WorkingTexts } from "./working-texts.ts"

/** The most working entries one query asks to embed; the rest of a backlog goes to the background lane. */
const QUERY_EMBED_LIMIT = 16
/** Agents of partitions just taken whose vectors are offered to the background lane per turn of the event loop. */
const WARM_AGENTS_PER_TURN = 32

const keyOf = (agentId: string, entryId: string) => `${agentId}/${entryId}`
const agentOfKey = (key: string) => key.slice(0, key.indexOf("/"))

export class WorkingVectors {
  readonly #vectors = new Map<string, Float32Array>()
  /** Entries being embedded now; a demotion or forget removes its key, so the vector is not kept when it lands. */
  readonly #embedding = new Set<string>()
  readonly #recordedSince = new Map<string, WorkingEntry[]>()
  readonly #toWarm: Array<[string, (agentId: string) => AgentView | undefined]> = []
  readonly #embedder: Embedder
  readonly #texts: WorkingTexts

  constructor(embedder: Embedder, texts: WorkingTexts) {
    this.#embedder = embedder
    this.#texts = texts
  }

  /** What a working entry's vector is made from: the text it was recorded with, else (a cue promoted) its fullest form. */
  #textOf(agentId: string, entry: WorkingEntry): string {
    return this.#texts.get(agentId, entry.id) ?? entry.content ?? fullestText(entry)
  }

  /**
   * Embeds `entries` in `lane`, keeping each vector unless its entry left meanwhile. An entry another call
   * is embedding already keeps that call's mark (the pool embeds its text once, for both).
   */
  #embed(agentId: string, entries: ReadonlyArray<WorkingEntry>, lane: "query" | "background"): void {
    const marked = entries.map((e) => keyOf(agentId, e.id)).filter((key) => !this.#embedding.has(key))
    for (const key of marked) this.#embedding.add(key)
    void this.#embedder
      .embed(
        entries.map((e) => this.#textOf(agentId, e)),
        { priority: lane },
      )
      .then(
        (embedded) => {
          entries.forEach((e, i) => {
            const key = keyOf(agentId, e.id)
            if (this.#embedding.has(key)) this.#vectors.set(key, embedded[i]!)
          })
        },
        // Refused (the lane is full): the next query that misses them offers them again.
        () => undefined,
      )
      .finally(() => {
        for (const key of marked) this.#embedding.delete(key)
      })
  }

  /** Offers entries without a vector, and not being embedded, to the background lane. */
  #embedLater(agentId: string, entries: ReadonlyArray<WorkingEntry>): void {
    const todo = entries.filter(
      (e) => !this.#embedding.has(keyOf(agentId, e.id)) && !this.#vectors.has(keyOf(agentId, e.id)),
    )
    if (todo.length > 0) this.#embed(agentId, todo, "background")
  }

  /** An entry just recorded: embedded with the others recorded in this turn of the event loop. */
  recorded(agentId: string, entry: WorkingEntry): void {
    const waiting = this.#recordedSince.get(agentId)
    if (waiting !== undefined) return void waiting.push(entry)
    this.#recordedSince.set(agentId, [entry])
    if (this.#recordedSince.size === 1)
      setImmediate(() => {
        for (const [agent, recorded] of this.#recordedSince) this.#embedLater(agent, recorded)
        this.#recordedSince.clear()
      })
  }

  /** The agents of a partition just taken: their entries are embedded in the background, a few agents at a time. */
  warm(agents: Iterable<string>, viewOf: (agentId: string) => AgentView | undefined): void {
    const pumping = this.#toWarm.length > 0
    for (const agentId of agents) this.#toWarm.push([agentId, viewOf])
    if (!pumping && this.#toWarm.length > 0) setImmediate(this.#warmSome)
  }

  readonly #warmSome = (): void => {
    for (const [agentId, viewOf] of this.#toWarm.splice(0, WARM_AGENTS_PER_TURN)) {
      const view = viewOf(agentId)
      if (view !== undefined) this.#embedLater(agentId, [...HashMap.values(view.entries)])
    }
    if (this.#toWarm.length > 0) setImmediate(this.#warmSome)
  }

  /**
   * The vectors of `entries` for a query, in order; null for one without a vector yet. The newest entries
   * without one are asked for in one call (a sentence model pays its per-call cost once), the rest offered to
   * the background lane. An embedder in this thread has answered by the next turn of the event loop; a
   * sentence model in a worker is not waited for, so a step never waits behind the inference of what it
   * recorded a moment before.
   */
  async forQuery(agentId: string, entries: ReadonlyArray<WorkingEntry>): Promise<ReadonlyArray<Float32Array | null>> {
    const known = () => entries.map((e) => this.#vectors.get(keyOf(agentId, e.id)) ?? null)
    const missing = entries.filter((e) => !this.#vectors.has(keyOf(agentId, e.id)))
    if (missing.length === 0) return known()
    const now = [...missing].sort((a, b) => b.ordinal - a.ordinal).slice(0, QUERY_EMBED_LIMIT)
    if (missing.length > now.length)
      this.#embedLater(
        agentId,
        missing.filter((e) => !now.includes(e)),
      )
    this.#embed(agentId, now, "query")
    await new Promise<void>((resolve) => setImmediate(resolve))
    return known()
  }

  /** The entry left working (demoted, forgotten): its vector goes, and one being made is not kept. */
  left(agentId: string, entryId: string): void {
    this.#vectors.delete(keyOf(agentId, entryId))
    this.#embedding.delete(keyOf(agentId, entryId))
  }

  dropAgents(agents: ReadonlyArray<string>): void {
    const gone = new Set(agents)
    for (const agentId of agents) this.#recordedSince.delete(agentId)
    for (let i = this.#toWarm.length - 1; i >= 0; i--) if (gone.has(this.#toWarm[i]![0])) this.#toWarm.splice(i, 1)
    for (const key of this.#vectors.keys()) if (gone.has(agentOfKey(key))) this.#vectors.delete(key)
    for (const key of this.#embedding) if (gone.has(agentOfKey(key))) this.#embedding.delete(key)
  }

  /** Entries being embedded now, and agents still to be offered to the background lane. */
  inBackground(): number {
    return this.#embedding.size + this.#toWarm.length
  }
}
