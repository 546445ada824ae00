/**
 * One lexical index per agent over every entry it ever recorded, working or
 * long-term (BM25+ over the raw text's terms). One index for both tiers keeps
 * their lexical scores on one scale. It is an in-memory projection, rebuilt
 * from the log at start.
 *
 * Scoring is MiniSearch's BM25+ (k 1.2, b 0.7, δ 0.5; a document's length is
 * its number of distinct terms; the sum over query terms is multiplied by how
 * many distinct query terms the document holds), which ranking was tuned on.
 * A search returns the top k without scoring every match: document-at-a-time
 * MaxScore over posting lists in insertion order. Each term has an upper bound
 * on what it can add to a score; once k documents are held, the terms whose
 * bounds together cannot lift a document past the k-th score are no longer
 * walked, only probed for the documents the other terms bring.
 *
 * Beside each entry's terms it keeps where the entry's sentences lie among them (domain/text-layout.ts),
 * worked out when the entry is indexed: a recall cuts a long entry for its focus from them without
 * segmenting it again. An entry restored from a snapshot has none; its layout is made when it is cut.
 */

import type { PreparedText, TextLayout } from "../../../domain/text-layout.ts"

export interface LexicalHit {
  readonly entryId: string
  readonly score: number
}

const K1 = 1.2
const B = 0.7
/** Below this a boost's products with scores may fall out of the normal range, and bounds would round wrongly. */
const TINY_BOOST = 1e-280
const DELTA = 0.5
/** Bounds are compared with room for floating-point rounding, so pruning never drops a document that ties or wins. */
const BOUND_SLACK = 1 + 1e-9

/** The documents holding one term, by slot ascending, with the term's count in each. */
class Postings {
  slots = new Int32Array(4)
  counts = new Int32Array(4)
  length = 0
  /** Upper bounds over the postings (not lowered by removals: they stay bounds). */
  maxCount = 0
  minLength = Number.POSITIVE_INFINITY

  push(slot: number, count: number, documentLength: number): void {
    if (this.length === this.slots.length) {
      const slots = new Int32Array(this.length * 2)
      slots.set(this.slots)
      this.slots = slots
      const counts = new Int32Array(this.length * 2)
      counts.set(this.counts)
      this.counts = counts
    }
    this.slots[this.length] = slot
    this.counts[this.length] = count
    this.length++
    if (count > this.maxCount) this.maxCount = count
    if (documentLength < this.minLength) this.minLength = documentLength
  }
}

/** One agent's index, with each entry's terms and each term's document frequency (for query expansion). */
class AgentIndex {
  readonly postings = new Map<string, Postings>()
  readonly termsOf = new Map<string, ReadonlyArray<string>>()
  /** The layouts of the entries indexed with one (those of more than one sentence or clause). */
  readonly layouts = new Map<string, TextLayout>()
  readonly documentFrequency = new Map<string, number>()
  readonly slotOf = new Map<string, number>()
  /** Entry id by slot; undefined once removed (its postings are skipped until the next compaction). */
  ids: Array<string | undefined> = []
  lengths = new Int32Array(1024)
  totalLength = 0

  add(entryId: string, terms: ReadonlyArray<string>, layout?: TextLayout | null): void {
    const slot = this.ids.length
    if (layout) this.layouts.set(entryId, layout)
    const counts = new Map<string, number>()
    for (const t of terms) counts.set(t, (counts.get(t) ?? 0) + 1)
    this.ids.push(entryId)
    if (slot === this.lengths.length) {
      const grown = new Int32Array(slot * 2)
      grown.set(this.lengths)
      this.lengths = grown
    }
    this.lengths[slot] = counts.size
    this.totalLength += counts.size
    this.slotOf.set(entryId, slot)
    this.termsOf.set(entryId, terms)
    for (const [t, count] of counts) {
      let list = this.postings.get(t)
      if (list === undefined) {
        list = new Postings()
        this.postings.set(t, list)
      }
      list.push(slot, count, counts.size)
      this.documentFrequency.set(t, (this.documentFrequency.get(t) ?? 0) + 1)
    }
  }

  remove(entryId: string): void {
    const slot = this.slotOf.get(entryId)
    if (slot === undefined) return
    for (const t of new Set(this.termsOf.get(entryId) ?? [])) {
      const df = (this.documentFrequency.get(t) ?? 1) - 1
      if (df > 0) this.documentFrequency.set(t, df)
      else {
        this.documentFrequency.delete(t)
        this.postings.delete(t)
      }
    }
    this.ids[slot] = undefined
    this.totalLength -= this.lengths[slot]!
    this.slotOf.delete(entryId)
    this.termsOf.delete(entryId)
    this.layouts.delete(entryId)
    const dead = this.ids.length - this.slotOf.size
    if (dead > 1024 && dead > this.slotOf.size) this.compact()
  }

  /** Renumbers the live entries in their order, dropping the postings of removed ones. */
  compact(): void {
    const live = this.ids.flatMap((id) =>
      id === undefined ? [] : [[id, this.termsOf.get(id)!, this.layouts.get(id)] as const],
    )
    this.postings.clear()
    this.termsOf.clear()
    this.layouts.clear()
    this.documentFrequency.clear()
    this.slotOf.clear()
    this.ids = []
    this.totalLength = 0
    for (const [id, terms, layout] of live) this.add(id, terms, layout)
  }
}

/** A bounded min-heap of (score, slot): the worst held hit is on top; a later slot loses a tie. */
class TopK {
  readonly scores: Float64Array
  readonly slots: Int32Array
  size = 0
  readonly k: number
  constructor(k: number) {
    this.k = k
    this.scores = new Float64Array(k)
    this.slots = new Int32Array(k)
  }
  /** Whether (a, as) ranks below (b, bs). */
  static #worse(a: number, as: number, b: number, bs: number): boolean {
    return a < b || (a === b && as > bs)
  }
  get full(): boolean {
    return this.size === this.k
  }
  get threshold(): number {
    return this.full ? this.scores[0]! : 0
  }
  offer(score: number, slot: number): void {
    const { scores, slots } = this
    if (this.size < this.k) {
      let i = this.size++
      while (i > 0) {
        const parent = (i - 1) >> 1
        if (!TopK.#worse(score, slot, scores[parent]!, slots[parent]!)) break
        scores[i] = scores[parent]!
        slots[i] = slots[parent]!
        i = parent
      }
      scores[i] = score
      slots[i] = slot
      return
    }
    if (!TopK.#worse(scores[0]!, slots[0]!, score, slot)) return
    let i = 0
    const n = this.size
    for (;;) {
      const l = 2 * i + 1
      if (l >= n) break
      const r = l + 1
      const c = r < n && TopK.#worse(scores[r]!, slots[r]!, scores[l]!, slots[l]!) ? r : l
      if (!TopK.#worse(scores[c]!, slots[c]!, score, slot)) break
      scores[i] = scores[c]!
      slots[i] = slots[c]!
      i = c
    }
    scores[i] = score
    slots[i] = slot
  }
  /** Held hits, best first. */
  sorted(): Array<{ score: number; slot: number }> {
    const out: Array<{ score: number; slot: number }> = []
    for (let i = 0; i < this.size; i++) out.push({ score: this.scores[i]!, slot: this.slots[i]! })
    return out.sort((a, b) => b.score - a.score || a.slot - b.slot)
  }
}

/** The first index at or after `from` of `slots` (its first `n`) holding a slot ≥ `slot` (galloping, then binary search). */
const seek = (slots: Int32Array, n: number, from: number, slot: number): number => {
  if (from >= n || slots[from]! >= slot) return from
  let step = 1
  let lo = from
  let hi = from + 1
  while (hi < n && slots[hi]! < slot) {
    lo = hi
    step *= 2
    hi = from + step
  }
  if (hi > n) hi = n
  // slots[lo] < slot; slots[hi] ≥ slot or hi = n
  while (lo + 1 < hi) {
    const mid = (lo + hi) >> 1
    if (slots[mid]! < slot) lo = mid
    else hi = mid
  }
  return hi
}

/** One query term's posting list, weight and bound. */
interface Cursor {
  readonly list: Postings
  readonly idf: number
  readonly boost: number
  /** What one occurrence of the term in the query can add to a document's sum, at most. */
  readonly single: number
  occurrences: number
  /** The same for all its occurrences. */
  bound: number
}

/** BM25's weight of a term held by `df` of `documents` entries: the rarer, the higher, and always above 0. */
const bm25Idf = (documents: number, df: number): number => Math.log(1 + (documents - df + 0.5) / (df + 0.5))

export class LexicalIndex {
  readonly #indexes = new Map<string, AgentIndex>()

  /** Indexes an entry by its terms, with its layout when it has one (domain/text-layout.ts, over these terms). */
  add(agentId: string, entryId: string, terms: ReadonlyArray<string>, layout?: TextLayout | null): void {
    let index = this.#indexes.get(agentId)
    if (index === undefined) {
      index = new AgentIndex()
      this.#indexes.set(agentId, index)
    }
    index.remove(entryId)
    index.add(entryId, terms, layout)
  }

  remove(agentId: string, entryId: string): void {
    this.#indexes.get(agentId)?.remove(entryId)
  }

  dropAgent(agentId: string): void {
    this.#indexes.delete(agentId)
  }

  /** The agent's indexed entries with their terms, in insertion order (adding them in this order rebuilds the index). */
  documentsOf(agentId: string): Array<readonly [string, ReadonlyArray<string>]> {
    const index = this.#indexes.get(agentId)
    if (index === undefined) return []
    return index.ids.flatMap((id) => (id === undefined ? [] : [[id, index.termsOf.get(id)!] as const]))
  }

  /** The indexed terms of an entry (empty when it is not indexed). */
  termsOf(agentId: string, entryId: string): ReadonlyArray<string> {
    return this.#indexes.get(agentId)?.termsOf.get(entryId) ?? []
  }

  /** The entry's layout with the terms it indexes into, when it was indexed with one. */
  preparedText(agentId: string, entryId: string): PreparedText | undefined {
    const index = this.#indexes.get(agentId)
    const layout = index?.layouts.get(entryId)
    return layout === undefined ? undefined : { layout, terms: index!.termsOf.get(entryId)! }
  }

  /** How many of the agent's entries hold `term`, and how many entries there are. */
  documentFrequency(agentId: string, term: string): number {
    return this.#indexes.get(agentId)?.documentFrequency.get(term) ?? 0
  }

  documentCount(agentId: string): number {
    return this.#indexes.get(agentId)?.termsOf.size ?? 0
  }

  /** How much `term` tells the agent's entries apart, as BM25 weighs it: the rarer, the higher (a term no entry holds, the highest). */
  inverseDocumentFrequency(agentId: string, term: string): number {
    return bm25Idf(this.documentCount(agentId), this.documentFrequency(agentId, term))
  }

  /**
   * The `limit` best entries by BM25+ over `terms` (best first, ties by
   * insertion order); a term in `boosts` counts that much (default 1), a term
   * given twice counts twice.
   */
  search(
    agentId: string,
    terms: ReadonlyArray<string>,
    limit: number,
    boosts?: ReadonlyMap<string, number>,
  ): LexicalHit[] {
    const index = this.#indexes.get(agentId)
    const documents = index?.slotOf.size ?? 0
    if (index === undefined || terms.length === 0 || limit <= 0 || documents === 0) return []
    const averageLength = index.totalLength / documents

    // One cursor per distinct term; the sum runs over the query's terms in order, as exhaustive scoring does.
    const cursorOf = new Map<string, number>()
    const cursors: Cursor[] = []
    const order: number[] = []
    let prunable = true
    for (const t of terms) {
      let c = cursorOf.get(t)
      if (c === undefined) {
        const list = index.postings.get(t)
        if (list === undefined) continue
        const df = index.documentFrequency.get(t)!
        const idf = bm25Idf(documents, df)
        const boost = boosts?.get(t) ?? 1
        // Bounds need exact arithmetic: a negative boost, or one so small that its products lose their precision
        // (subnormal), is scored exhaustively.
        if (!(boost >= 0) || (boost > 0 && boost < TINY_BOOST)) prunable = false
        const best =
          DELTA + (list.maxCount * (K1 + 1)) / (list.maxCount + K1 * (1 - B + (B * list.minLength) / averageLength))
        c = cursors.length
        cursorOf.set(t, c)
        cursors.push({ list, idf, boost, single: boost * idf * best, occurrences: 0, bound: 0 })
      }
      cursors[c]!.occurrences++
      cursors[c]!.bound += cursors[c]!.single
      order.push(c)
    }
    if (cursors.length === 0) return []

    // Terms by bound ascending, each one's state in typed arrays at its place e in that order; `essential`
    // is where the walked terms start.
    const byBound = cursors.map((_, i) => i).sort((a, b) => cursors[a]!.bound - cursors[b]!.bound)
    const m = byBound.length
    const placeOf = new Int32Array(m)
    const postingSlots: Int32Array[] = []
    const postingCounts: Int32Array[] = []
    const postingLength = new Int32Array(m)
    const position = new Int32Array(m)
    const idf = new Float64Array(m)
    const boost = new Float64Array(m)
    const occurrences = new Float64Array(m)
    const prefixBound = new Float64Array(m + 1)
    for (let e = 0; e < m; e++) {
      const c = cursors[byBound[e]!]!
      placeOf[byBound[e]!] = e
      postingSlots.push(c.list.slots)
      postingCounts.push(c.list.counts)
      postingLength[e] = c.list.length
      idf[e] = c.idf
      boost[e] = c.boost
      occurrences[e] = c.occurrences
      prefixBound[e + 1] = prefixBound[e]! + c.bound
    }
    // The query's terms in its order, as places: the sum runs in this order, as exhaustive scoring's does.
    const sumOrder = Int32Array.from(order, (i) => placeOf[i]!)
    let essential = 0
    const top = new TopK(limit)
    const contribution = new Float64Array(m)
    // heldBy[e] === document: term e is in the document being scored (no clearing between documents).
    const heldBy = new Int32Array(m).fill(-1)
    let document = 0
    const ids = index.ids
    const lengths = index.lengths

    /** The next document any walked term holds. */
    const nextSlot = () => {
      let slot = Number.MAX_SAFE_INTEGER
      for (let e = essential; e < m; e++) {
        const p = position[e]!
        if (p < postingLength[e]!) {
          const s = postingSlots[e]![p]!
          if (s < slot) slot = s
        }
      }
      return slot
    }
    // The k-th score held, once k are (read here rather than from the heap at every test).
    let full = false
    let kth = 0

    for (let slot = nextSlot(); slot !== Number.MAX_SAFE_INTEGER; document++) {
      const live = ids[slot] !== undefined
      // The length part of BM25's denominator, the same for every term of the document.
      const lengthNorm = live ? K1 * (1 - B + (B * lengths[slot]!) / averageLength) : 0
      let matched = 0
      let partial = 0
      // The walked terms holding this document move past it; the least slot they are at is the next one.
      let next = Number.MAX_SAFE_INTEGER
      for (let e = essential; e < m; e++) {
        let p = position[e]!
        const n = postingLength[e]!
        if (p < n) {
          const slots = postingSlots[e]!
          if (slots[p] === slot) {
            if (live) {
              const count = postingCounts[e]![p]!
              const score = boost[e]! * (idf[e]! * (DELTA + (count * (K1 + 1)) / (count + lengthNorm)))
              contribution[e] = score
              heldBy[e] = document
              matched++
              partial += score * occurrences[e]!
            }
            position[e] = ++p
          }
          if (p < n && slots[p]! < next) next = slots[p]!
        }
      }
      const current = slot
      slot = next
      if (!live || matched === 0) continue
      // Probe the other terms, the strongest first, while the document can still make the top k.
      let pruned = false
      for (let e = essential - 1; e >= 0; e--) {
        if (prunable && full && (matched + e + 1) * (partial + prefixBound[e + 1]!) * BOUND_SLACK <= kth) {
          pruned = true
          break
        }
        const slots = postingSlots[e]!
        const p = seek(slots, postingLength[e]!, position[e]!, current)
        position[e] = p
        if (p < postingLength[e]! && slots[p] === current) {
          const count = postingCounts[e]![p]!
          const score = boost[e]! * (idf[e]! * (DELTA + (count * (K1 + 1)) / (count + lengthNorm)))
          contribution[e] = score
          heldBy[e] = document
          matched++
          partial += score * occurrences[e]!
        }
      }
      if (pruned) continue
      let sum = 0
      for (let j = 0; j < sumOrder.length; j++) {
        const e = sumOrder[j]!
        if (heldBy[e] === document) sum += contribution[e]!
      }
      const score = sum * matched
      if (full && score < kth) continue
      top.offer(score, current)
      full = top.full
      kth = top.threshold
      // A higher k-th score may let more of the weakest terms go unwalked.
      if (prunable && full) {
        const before = essential
        while (essential < m && (essential + 1) * prefixBound[essential + 1]! * BOUND_SLACK <= kth) essential++
        if (essential !== before) slot = nextSlot()
      }
    }
    return top.sorted().map((h) => ({ entryId: ids[h.slot]!, score: h.score }))
  }
}
