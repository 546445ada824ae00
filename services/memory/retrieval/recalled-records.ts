/**
 * The substrate records of the entries recalls read, kept so an entry recalled step after step is read from
 * the log once: the most recently read, up to a total length of text. A record never changes once recorded;
 * a forgotten entry's record, and every record of an agent forgotten or no longer in this replica's
 * partitions, is let go as the views let the agent or entry go, and a read that a forget overtook is not kept.
 */
import { Effect } from "effect"
import type { SubstrateReaderShape, SubstrateRecord } from "../../platform/substrate-reader.ts"

/** About 16 MB of text: the records of several thousand recalled entries of ordinary length. */
const KEPT_CHARS = 16_000_000

export class RecalledRecords {
  /** Every kept record by agent and entry, least recently read first. */
  readonly #order = new Map<string, SubstrateRecord>()
  readonly #byAgent = new Map<string, Set<string>>()
  /** Forgets and agents let go so far: a read that started before one is not kept (they are rare). */
  #forgets = 0
  #chars = 0
  readonly #maxChars: number

  constructor(maxChars = KEPT_CHARS) {
    this.#maxChars = maxChars
  }

  /** Reads through `substrate`, answering from what is kept when it can. */
  reader(substrate: SubstrateReaderShape): SubstrateReaderShape {
    return {
      get: (agentId, entryId) =>
        Effect.suspend(() => {
          const kept = this.#take(agentId, entryId)
          if (kept !== undefined) return Effect.succeed(kept)
          const forgets = this.#forgets
          return Effect.map(substrate.get(agentId, entryId), (record) => {
            if (record !== null && this.#forgets === forgets) this.#keep(record)
            return record
          })
        }),
    }
  }

  get size(): number {
    return this.#order.size
  }

  forgetEntry(agentId: string, entryId: string): void {
    this.#forgets++
    this.#remove(keyOf(agentId, entryId))
  }

  dropAgent(agentId: string): void {
    this.#forgets++
    for (const key of this.#byAgent.get(agentId) ?? []) this.#remove(key)
    this.#byAgent.delete(agentId)
  }

  #take(agentId: string, entryId: string): SubstrateRecord | undefined {
    const key = keyOf(agentId, entryId)
    const record = this.#order.get(key)
    if (record === undefined) return undefined
    // Read again: the most recent.
    this.#order.delete(key)
    this.#order.set(key, record)
    return record
  }

  #keep(record: SubstrateRecord): void {
    if (record.content.length > this.#maxChars) return
    const key = keyOf(record.agentId, record.entryId)
    this.#remove(key)
    this.#order.set(key, record)
    let keys = this.#byAgent.get(record.agentId)
    if (keys === undefined) {
      keys = new Set()
      this.#byAgent.set(record.agentId, keys)
    }
    keys.add(key)
    this.#chars += record.content.length
    for (const [oldest] of this.#order) {
      if (this.#chars <= this.#maxChars) break
      this.#remove(oldest)
    }
  }

  #remove(key: string): void {
    const record = this.#order.get(key)
    if (record === undefined) return
    this.#order.delete(key)
    this.#chars -= record.content.length
    const keys = this.#byAgent.get(record.agentId)
    keys?.delete(key)
    if (keys?.size === 0) this.#byAgent.delete(record.agentId)
  }
}

const keyOf = (agentId: string, entryId: string) => `${agentId}\u0000${entryId}`
