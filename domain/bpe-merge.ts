/**
 * Byte-pair merging in O(n log n): the same merges, in the same order, as
 * tiktoken's reference algorithm (always the pair of lowest rank, the
 * leftmost on a tie), with the candidate pairs in a binary heap and the parts
 * in a linked list. The reference rescans every pair after each merge, which
 * is quadratic in the length of one pre-token: 64 KiB of one repeated letter
 * is a single pre-token and took seconds. The result is identical (checked
 * against the reference by a property test).
 *
 * Every part is a token at every moment (a single byte, or a merge of two
 * tokens), and the rank of a pair is the id of the token it merges into, so
 * the merge works on token ids alone and never looks at bytes again.
 */

/** The token two adjacent tokens merge into, undefined when they do not. */
export type PairToken = (left: number, right: number) => number | undefined

const NONE = -1

/**
 * A binary min-heap of (rank, start) pairs, ordered by rank then start,
 * in two typed arrays (entries are never removed but by `pop`).
 */
class PairHeap {
  readonly rank: Int32Array
  readonly start: Int32Array
  size = 0
  constructor(capacity: number) {
    this.rank = new Int32Array(capacity)
    this.start = new Int32Array(capacity)
  }
  push(rank: number, start: number): void {
    const ranks = this.rank
    const starts = this.start
    let k = this.size++
    while (k > 0) {
      const parent = (k - 1) >> 1
      const pr = ranks[parent]!
      if (pr < rank || (pr === rank && starts[parent]! < start)) break
      ranks[k] = pr
      starts[k] = starts[parent]!
      k = parent
    }
    ranks[k] = rank
    starts[k] = start
  }
  /** Removes the top entry (read it from rank[0], start[0] first). */
  pop(): void {
    const ranks = this.rank
    const starts = this.start
    const size = --this.size
    if (size === 0) return
    const rank = ranks[size]!
    const start = starts[size]!
    let k = 0
    for (;;) {
      let child = 2 * k + 1
      if (child >= size) break
      const right = child + 1
      if (
        right < size &&
        (ranks[right]! < ranks[child]! || (ranks[right] === ranks[child] && starts[right]! < starts[child]!))
      )
        child = right
      const cr = ranks[child]!
      if (rank < cr || (rank === cr && start < starts[child]!)) break
      ranks[k] = cr
      starts[k] = starts[child]!
      k = child
    }
    ranks[k] = rank
    starts[k] = start
  }
}

/** The token ids of one pre-token, given as the token id of each of its bytes. */
export const mergeTokens = (byteTokens: ArrayLike<number>, pairToken: PairToken): number[] => {
  const n = byteTokens.length
  if (n <= 1) return Array.from(byteTokens)
  const token = Int32Array.from(byteTokens)
  // Parts are linked in order; part i starts at byte i; n means "no part".
  const next = new Int32Array(n)
  const prev = new Int32Array(n)
  const pair = new Int32Array(n) // the token part i forms with the part after it, or NONE
  const alive = new Uint8Array(n).fill(1)
  // Lazy deletion: an entry is stale once its part died or the part's pair changed. Each merge
  // pushes at most two entries, so 3n slots always suffice.
  const heap = new PairHeap(3 * n)
  for (let i = 0; i < n; i++) {
    next[i] = i + 1
    prev[i] = i - 1
  }
  for (let i = 0; i < n - 1; i++) {
    const p = pairToken(token[i]!, token[i + 1]!) ?? NONE
    pair[i] = p
    if (p !== NONE) heap.push(p, i)
  }
  pair[n - 1] = NONE

  while (heap.size > 0) {
    const rank = heap.rank[0]!
    const i = heap.start[0]!
    heap.pop()
    if (alive[i] === 0 || pair[i] !== rank) continue
    // Part i absorbs the part after it and becomes the merged token.
    const j = next[i]!
    alive[j] = 0
    token[i] = rank
    const after = next[j]!
    next[i] = after
    if (after < n) {
      prev[after] = i
      const p = pairToken(rank, token[after]!) ?? NONE
      pair[i] = p
      if (p !== NONE) heap.push(p, i)
    } else pair[i] = NONE
    const before = prev[i]!
    if (before >= 0) {
      const p = pairToken(token[before]!, rank) ?? NONE
      pair[before] = p
      if (p !== NONE) heap.push(p, before)
    }
  }

  const out: number[] = []
  for (let i = 0; i < n; i = next[i]!) out.push(token[i]!)
  return out
}
