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
 * Block-max bounds (Block-Max MaxScore): each posting list is cut into blocks
 * of BLOCK postings, each with its own largest count and shortest document.
 * The walk looks at the stretch of slots where every term's block stays the
 * same; when the blocks' bounds together cannot beat the k-th score, the
 * whole stretch is skipped, and otherwise a term whose block bound is low, or
 * whose blocks leave a gap there, is not probed for the document.
 */

export interface LexicalHit {
  readonly entryId: string
  readonly score: number
}

const K1 = 1.2
const B = 0.7
const DELTA = 0.5
/** Bounds are compared with room for floating-point rounding, so pruning never drops a document that ties or wins. */
const BOUND_SLACK = 1 + 1e-9

/** Postings per block of block-max bounds. */
const BLOCK = 128
const BLOCK_SHIFT = 7

/**
 * The documents holding one term, by slot ascending, with the term's count in
 * each; block b holds postings [b·BLOCK, (b+1)·BLOCK).
 */
class Postings {
  slots = new Int32Array(4)
  counts = new Int32Array(4)
  length = 0
  /** Upper bounds over the postings (not lowered by removals: they stay bounds). */
  maxCount = 0
  minLength = Number.POSITIVE_INFINITY
  /** The same bounds per block, and each block's last slot. */
  blockMaxCount = new Int32Array(1)
  blockMinLength = new Int32Array(1)
  blockLast = new Int32Array(1)
  blocks = 0

  push(slot: number, count: number, documentLength: number): void {
    if (this.length === this.slots.length) {
      const slots = new Int32Array(this.length * 2)
      slots.set(this.slots)
      this.slots = slots
      const counts = new Int32Array(this.length * 2)
      counts.set(this.counts)
      this.counts = counts
    }
    const block = this.length >> BLOCK_SHIFT
    if ((this.length & (BLOCK - 1)) === 0) {
      if (block === this.blockMaxCount.length) {
        const maxCounts = new Int32Array(block * 2)
        maxCounts.set(this.blockMaxCount)
        this.blockMaxCount = maxCounts
        const minLengths = new Int32Array(block * 2)
        minLengths.set(this.blockMinLength)
        this.blockMinLength = minLengths
        const lasts = new Int32Array(block * 2)
        lasts.set(this.blockLast)
        this.blockLast = lasts
      }
      this.blocks++
      this.blockMaxCount[block] = count
      this.blockMinLength[block] = documentLength
    } else {
      if (count > this.blockMaxCount[block]!) this.blockMaxCount[block] = count
      if (documentLength < this.blockMinLength[block]!) this.blockMinLength[block] = documentLength
    }
    this.blockLast[block] = slot
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
  readonly documentFrequency = new Map<string, number>()
  readonly slotOf = new Map<string, number>()
  /** Entry id by slot; undefined once removed (its postings are skipped until the next compaction). */
  ids: Array<string | undefined> = []
  lengths = new Int32Array(1024)
  totalLength = 0

  add(entryId: string, terms: ReadonlyArray<string>): void {
    const slot = this.ids.length
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
    const dead = this.ids.length - this.slotOf.size
    if (dead > 1024 && dead > this.slotOf.size) this.compact()
  }

  /** Renumbers the live entries in their order, dropping the postings of removed ones. */
  compact(): void {
    const live = this.ids.flatMap((id) => (id === undefined ? [] : [[id, this.termsOf.get(id)!] as const]))
    this.postings.clear()
    this.termsOf.clear()
    this.documentFrequency.clear()
    this.slotOf.clear()
    this.ids = []
    this.totalLength = 0
    for (const [id, terms] of live) this.add(id, terms)
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

/** The first index at or after `from` whose slot is ≥ `slot` (galloping, then binary search). */
const seek = (list: Postings, from: number, slot: number): number => {
  const slots = list.slots
  const n = list.length
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

/** One query term's posting list, weight and bounds, and where the walk is in it. */
interface Cursor {
  readonly list: Postings
  readonly idf: number
  readonly boost: number
  /** What one occurrence of the term in the query can add to a document's sum, at most. */
  readonly single: number
  occurrences: number
  /** The same for all its occurrences. */
  bound: number
  position: number
  /** The first block whose last slot is at or after the walk's document. */
  block: number
  /** The bound of `boundedBlock` over all the term's occurrences. */
  blockBound: number
  boundedBlock: number
}

/**
 * Moves every term's block to the first one ending at or after `slot`, and returns the last slot up to
 * which no term's block changes (the window). A term whose block holds `slot` spans the window and can
 * add at most its block bound; one whose next block starts later holds nothing in it. Fills, by the
 * terms' order of bound, how many span (`spanned`) and their block bounds' sum (`blockPrefix`), as
 * prefixes, and which terms span (`spans`, by cursor).
 */
const openWindow = (
  cursors: ReadonlyArray<Cursor>,
  byBound: ReadonlyArray<number>,
  slot: number,
  averageLength: number,
  spans: Uint8Array,
  spanned: Int32Array,
  blockPrefix: Float64Array,
): number => {
  let end = Number.MAX_SAFE_INTEGER
  for (let e = 0; e < byBound.length; e++) {
    const i = byBound[e]!
    const c = cursors[i]!
    const list = c.list
    const blocks = list.blocks
    const lasts = list.blockLast
    while (c.block < blocks && lasts[c.block]! < slot) c.block++
    spans[i] = 0
    if (c.block < blocks) {
      const first = list.slots[c.block << BLOCK_SHIFT]!
      if (first <= slot) {
        if (c.boundedBlock !== c.block) {
          c.boundedBlock = c.block
          c.blockBound =
            c.boost *
            c.idf *
            saturation(list.blockMaxCount[c.block]!, list.blockMinLength[c.block]!, averageLength) *
            c.occurrences
        }
        spans[i] = 1
        const last = lasts[c.block]!
        if (last < end) end = last
      } else if (first - 1 < end) end = first - 1
    }
    spanned[e + 1] = spanned[e]! + spans[i]!
    blockPrefix[e + 1] = blockPrefix[e]! + (spans[i] === 1 ? c.blockBound : 0)
  }
  return end
}

/** What a document with `count` occurrences of a term and `length` distinct terms gets from one occurrence of it in the query, before idf and boost. */
const saturation = (count: number, length: number, averageLength: number) =>
  DELTA + (count * (K1 + 1)) / (count + K1 * (1 - B + (B * length) / averageLength))

export class LexicalIndex {
  readonly #indexes = new Map<string, AgentIndex>()

  add(agentId: string, entryId: string, terms: ReadonlyArray<string>): void {
    let index = this.#indexes.get(agentId)
    if (index === undefined) {
      index = new AgentIndex()
      this.#indexes.set(agentId, index)
    }
    index.remove(entryId)
    index.add(entryId, terms)
  }

  remove(agentId: string, entryId: string): void {
    this.#indexes.get(agentId)?.remove(entryId)
  }

  dropAgent(agentId: string): void {
    this.#indexes.delete(agentId)
  }

  /** The indexed terms of an entry (empty when it is not indexed). */
  termsOf(agentId: string, entryId: string): ReadonlyArray<string> {
    return this.#indexes.get(agentId)?.termsOf.get(entryId) ?? []
  }

  /** How many of the agent's entries hold `term`, and how many entries there are. */
  documentFrequency(agentId: string, term: string): number {
    return this.#indexes.get(agentId)?.documentFrequency.get(term) ?? 0
  }

  documentCount(agentId: string): number {
    return this.#indexes.get(agentId)?.termsOf.size ?? 0
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
        const idf = Math.log(1 + (documents - df + 0.5) / (df + 0.5))
        const boost = boosts?.get(t) ?? 1
        if (!(boost >= 0)) prunable = false
        const single = boost * idf * saturation(list.maxCount, list.minLength, averageLength)
        c = cursors.length
        cursorOf.set(t, c)
        cursors.push({
          list,
          idf,
          boost,
          single,
          occurrences: 0,
          bound: 0,
          position: 0,
          block: 0,
          blockBound: 0,
          boundedBlock: -1,
        })
      }
      cursors[c]!.occurrences++
      cursors[c]!.bound += cursors[c]!.single
      order.push(c)
    }
    if (cursors.length === 0) return []

    // Terms by bound ascending; `essential` is where the walked terms start.
    const byBound = cursors.map((_, i) => i).sort((a, b) => cursors[a]!.bound - cursors[b]!.bound)
    const prefixBound = new Float64Array(byBound.length + 1)
    for (let i = 0; i < byBound.length; i++) prefixBound[i + 1] = prefixBound[i]! + cursors[byBound[i]!]!.bound
    let essential = 0
    const top = new TopK(limit)
    const contribution = new Float64Array(cursors.length)
    const held = new Uint8Array(cursors.length)
    const ids = index.ids
    const lengths = index.lengths

    const termScore = (c: Cursor, count: number, slot: number) =>
      c.boost * (c.idf * saturation(count, lengths[slot]!, averageLength))

    // The current window's block bounds (see openWindow).
    const spans = new Uint8Array(cursors.length)
    const spanned = new Int32Array(byBound.length + 1)
    const blockPrefix = new Float64Array(byBound.length + 1)
    const n = byBound.length
    // Window by window; in each, the terms from `local` on are walked: those before it cannot, on their
    // block bounds alone, lift a document of the window into the top k (`local` ≥ `essential`, since a
    // block bound is at most the term's bound and at most every term spans). When no term is left to walk,
    // nothing in the window can make the top k (a tie loses: every held document came earlier), and the
    // window is skipped whole.
    let windowStart = 0
    while (windowStart < ids.length) {
      let local = essential
      let windowEnd = Number.MAX_SAFE_INTEGER
      if (prunable) {
        windowEnd = openWindow(cursors, byBound, windowStart, averageLength, spans, spanned, blockPrefix)
        if (top.full) {
          const threshold = top.threshold
          while (local < n && spanned[local + 1]! * blockPrefix[local + 1]! * BOUND_SLACK <= threshold) local++
        }
      }
      for (;;) {
        // Every walked term's next document in the window, and the first of them.
        let slot = Number.MAX_SAFE_INTEGER
        for (let e = local; e < n; e++) {
          const c = cursors[byBound[e]!]!
          if (c.position < c.list.length && c.list.slots[c.position]! < windowStart)
            c.position = seek(c.list, c.position, windowStart)
          if (c.position < c.list.length) {
            const s = c.list.slots[c.position]!
            if (s < slot) slot = s
          }
        }
        if (slot === Number.MAX_SAFE_INTEGER || slot > windowEnd) break
        held.fill(0)
        let matched = 0
        let partial = 0
        for (let e = local; e < n; e++) {
          const i = byBound[e]!
          const c = cursors[i]!
          if (c.position < c.list.length && c.list.slots[c.position] === slot) {
            if (ids[slot] !== undefined) {
              contribution[i] = termScore(c, c.list.counts[c.position]!, slot)
              held[i] = 1
              matched++
              partial += contribution[i]! * c.occurrences
            }
            c.position++
          }
        }
        if (ids[slot] === undefined || matched === 0) continue
        // Probe the other terms, the strongest first, while the document can still make the top k.
        let pruned = false
        for (let e = local - 1; e >= 0; e--) {
          if (
            prunable &&
            top.full &&
            (matched + spanned[e + 1]!) * (partial + blockPrefix[e + 1]!) * BOUND_SLACK <= top.threshold
          ) {
            pruned = true
            break
          }
          const i = byBound[e]!
          // Outside every block of the term: it does not hold the document.
          if (prunable && spans[i] === 0) continue
          const c = cursors[i]!
          c.position = seek(c.list, prunable ? Math.max(c.position, c.block << BLOCK_SHIFT) : c.position, slot)
          if (c.position < c.list.length && c.list.slots[c.position] === slot) {
            contribution[i] = termScore(c, c.list.counts[c.position]!, slot)
            held[i] = 1
            matched++
            partial += contribution[i]! * c.occurrences
          }
        }
        if (pruned) continue
        let sum = 0
        for (const i of order) if (held[i] === 1) sum += contribution[i]!
        const score = sum * matched
        if (top.full && score < top.threshold) continue
        top.offer(score, slot)
        // A higher k-th score may let more of the weakest terms go unwalked.
        if (prunable && top.full) {
          const threshold = top.threshold
          while (essential < n && (essential + 1) * prefixBound[essential + 1]! * BOUND_SLACK <= threshold) essential++
          if (local < essential) local = essential
          while (local < n && spanned[local + 1]! * blockPrefix[local + 1]! * BOUND_SLACK <= threshold) local++
        }
      }
      if (windowEnd >= ids.length - 1) break
      windowStart = windowEnd + 1
    }
    return top.sorted().map((h) => ({ entryId: ids[h.slot]!, score: h.score }))
  }
}
