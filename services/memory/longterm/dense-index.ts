/**
 * Exact inner-product search over one agent's vectors of one model: a dense
 * Float32 row-major matrix and an int8 copy of it, scanned by SIMD kernels
 * (dot-kernel.ts). The int8 scan bounds every row's float32 score; only the
 * rows those bounds cannot rule out are scored in float32, the best `limit`
 * kept in a bounded heap (see DenseIndex). Exact keeps results those of the
 * full float32 scan, and nothing has to be built at start beyond the two
 * matrices.
 */
import {
  type BoundsFunction,
  dotKernel,
  int8BoundsKernel,
  type ScoresFunction,
  type WasmMemory,
  wasmMemory,
} from "./dot-kernel.ts"

/** A bounded min-heap of (score, row): the worst held hit on top; ties go to the lower entry id. */
class BestRows {
  readonly scores: Float64Array
  readonly rows: Int32Array
  size = 0
  readonly #k: number
  readonly #ids: ReadonlyArray<string>
  constructor(k: number, ids: ReadonlyArray<string>) {
    this.#k = k
    this.#ids = ids
    this.scores = new Float64Array(k)
    this.rows = new Int32Array(k)
  }
  #worse(a: number, ar: number, b: number, br: number): boolean {
    return a < b || (a === b && this.#ids[ar]! > this.#ids[br]!)
  }
  get full(): boolean {
    return this.size === this.#k
  }
  get floor(): number {
    return this.full ? this.scores[0]! : Number.NEGATIVE_INFINITY
  }
  offer(score: number, row: number): void {
    const { scores, rows } = this
    let i: number
    if (this.size < this.#k) {
      i = this.size++
      while (i > 0) {
        const parent = (i - 1) >> 1
        if (!this.#worse(score, row, scores[parent]!, rows[parent]!)) break
        scores[i] = scores[parent]!
        rows[i] = rows[parent]!
        i = parent
      }
    } else {
      if (!this.#worse(scores[0]!, rows[0]!, score, row)) return
      i = 0
      const n = this.size
      for (;;) {
        const l = 2 * i + 1
        if (l >= n) break
        const r = l + 1
        const c = r < n && this.#worse(scores[r]!, rows[r]!, scores[l]!, rows[l]!) ? r : l
        if (!this.#worse(scores[c]!, rows[c]!, score, row)) break
        scores[i] = scores[c]!
        rows[i] = rows[c]!
        i = c
      }
    }
    scores[i] = score
    rows[i] = row
  }
}

export interface DenseHit {
  readonly id: string
  readonly score: number
}

const PAGE = 65_536
const INITIAL_ROWS = 1024
/** Largest int8 magnitude used (−128 is not, so that a row and its negation quantise alike). */
const INT8_MAX = 127
/** Largest int16 magnitude of the quantised query. */
const INT16_MAX = 32_767
/** Rescoring the candidates one row at a time beats the full float32 scan below this share of the rows. */
const RESCORE_SHARE = 1 / 8

/** A float32 not below `x` (a few units above it): bounds stored in float32 stay bounds. */
const float32AtLeast = (x: number): number => Math.fround(x * (1 + 2 ** -20))

/**
 * A min-heap of the `k` largest lower bounds seen so far: once full, its
 * smallest is a score that at least `k` rows reach.
 */
class LargestBounds {
  readonly #values: Float64Array
  size = 0
  constructor(k: number) {
    this.#values = new Float64Array(k)
  }
  get floor(): number {
    return this.size === this.#values.length ? this.#values[0]! : Number.NEGATIVE_INFINITY
  }
  offer(value: number): void {
    const values = this.#values
    const k = values.length
    let i: number
    if (this.size < k) {
      i = this.size++
      while (i > 0) {
        const parent = (i - 1) >> 1
        if (values[parent]! <= value) break
        values[i] = values[parent]!
        i = parent
      }
    } else {
      if (!(value > values[0]!)) return
      i = 0
      for (;;) {
        const l = 2 * i + 1
        if (l >= k) break
        const r = l + 1
        const c = r < k && values[r]! < values[l]! ? r : l
        if (values[c]! >= value) break
        values[i] = values[c]!
        i = c
      }
    }
    values[i] = value
  }
}

/**
 * The exact top k comes from two scans. The first reads an int8 copy of
 * every row (a quarter of the bytes): row r is stored as a scale a_r and
 * integers x̂_r with x_r ≈ a_r·x̂_r, the query as b·q̂ in int16, and
 * a_r·b·(q̂·x̂_r) estimates the float32 score f_r. Its error is bounded per row,
 *
 *   |f_r − a_r·b·(q̂·x̂_r)| ≤ ‖q‖·(‖x_r − a_r·x̂_r‖ + γ‖x_r‖) + ‖q − b·q̂‖·max_s a_s‖x̂_s‖
 *
 * (Cauchy–Schwarz on the two quantisation errors, γ the float32 kernel's
 * rounding bound), so each row has an interval holding f_r. Once k accepted
 * rows have intervals above a value τ, a row whose interval ends below τ is
 * strictly worse than k others and cannot be in the top k, ties included.
 * The rest — the candidates — are rescored with the float32 kernel itself,
 * so their scores are those of the full float32 scan, bit for bit.
 */
export class DenseIndex {
  readonly dims: number
  /** Floats per row: dims padded to a multiple of four with zeros, for the four-lane kernel. */
  readonly #stride: number
  /** Bytes per int8 row: dims, zeros, then a_r and the row's error term as float32, a multiple of sixteen. */
  readonly #stride8: number
  /** The largest int16 query magnitude for which no int32 lane of the int8 kernel can overflow. */
  readonly #queryMax: number
  /** γ: |kernel's float32 score − exact inner product| ≤ γ·‖q‖·‖x‖. */
  readonly #rounding: number
  ids: string[] = []
  readonly rowOf = new Map<string, number>()
  #capacity = INITIAL_ROWS
  /** The matrix at offset 0, then scratch space for a query and its scores. */
  readonly #memory: WasmMemory
  readonly #kernel: ScoresFunction | undefined
  #matrix: Float32Array
  /** The int8 rows at offset 0, then scratch space for the int16 query and the rows' bounds. */
  readonly #memory8: WasmMemory | undefined
  readonly #kernel8: BoundsFunction | undefined
  #matrix8: Int8Array
  /** max a_r·‖x̂_r‖ over every row ever set (a bound stays a bound when its row goes). */
  #largestQuantisedNorm = 0
  /** Rows the last search scored in float32: its candidates, or every row when it scanned them all. */
  rescored = 0

  constructor(dims: number) {
    this.dims = dims
    this.#stride = Math.ceil(dims / 4) * 4
    this.#stride8 = Math.ceil((dims + 8) / 16) * 16
    this.#queryMax = Math.min(INT16_MAX, Math.floor((2 ** 31 - 1) / (this.#stride8 * INT8_MAX)))
    // A lane sums stride/4 rounded products, then three adds join the lanes; twice the textbook bound.
    const roundings = this.#stride / 4 + 4
    this.#rounding = 2 * ((roundings * 2 ** -24) / (1 - roundings * 2 ** -24))
    this.#memory = wasmMemory(Math.ceil(this.#bytesFor(INITIAL_ROWS) / PAGE))
    this.#kernel = dotKernel(this.#memory)
    this.#matrix = new Float32Array(this.#memory.buffer, 0, INITIAL_ROWS * this.#stride)
    this.#memory8 = this.#kernel === undefined ? undefined : wasmMemory(Math.ceil(this.#bytes8For(INITIAL_ROWS) / PAGE))
    this.#kernel8 = this.#memory8 === undefined ? undefined : int8BoundsKernel(this.#memory8)
    const rows8 = this.#kernel8 === undefined ? 0 : INITIAL_ROWS
    this.#matrix8 = new Int8Array(this.#memory8?.buffer ?? new ArrayBuffer(0), 0, rows8 * this.#stride8)
  }

  #bytesFor(rows: number): number {
    return (rows * this.#stride + this.#stride + rows) * 4
  }

  #bytes8For(rows: number): number {
    return rows * this.#stride8 + this.#stride8 * 2 + rows * 8
  }

  get size(): number {
    return this.ids.length
  }

  #grow(): void {
    const capacity = this.#capacity * 2
    const missing = this.#bytesFor(capacity) - this.#memory.buffer.byteLength
    if (missing > 0) this.#memory.grow(Math.ceil(missing / PAGE))
    this.#matrix = new Float32Array(this.#memory.buffer, 0, capacity * this.#stride)
    if (this.#memory8 !== undefined && this.#kernel8 !== undefined) {
      const missing8 = this.#bytes8For(capacity) - this.#memory8.buffer.byteLength
      if (missing8 > 0) this.#memory8.grow(Math.ceil(missing8 / PAGE))
      this.#matrix8 = new Int8Array(this.#memory8.buffer, 0, capacity * this.#stride8)
    }
    this.#capacity = capacity
  }

  set(id: string, vector: Float32Array): void {
    let row = this.rowOf.get(id)
    if (row === undefined) {
      row = this.ids.length
      if (row === this.#capacity) this.#grow()
      this.ids.push(id)
      this.rowOf.set(id, row)
    }
    const base = row * this.#stride
    this.#matrix.set(vector.subarray(0, this.dims), base)
    this.#matrix.fill(0, base + Math.min(vector.length, this.dims), base + this.#stride)
    if (this.#kernel8 !== undefined) this.#quantise(row)
  }

  /** The int8 copy of row `row` of the float32 matrix, with its scale and error term. */
  #quantise(row: number): void {
    const m = this.#matrix
    const base = row * this.#stride
    const stride8 = this.#stride8
    const base8 = row * stride8
    let largest = 0
    for (let i = 0; i < this.dims; i++) largest = Math.max(largest, Math.abs(m[base + i]!))
    const scale = Number.isFinite(largest) ? Math.fround(largest / INT8_MAX) : 0
    let residual = 0
    let quantised = 0
    let norm = 0
    this.#matrix8.fill(0, base8, base8 + stride8)
    for (let i = 0; i < this.dims; i++) {
      const x = m[base + i]!
      const xq = scale === 0 ? 0 : Math.max(-INT8_MAX, Math.min(INT8_MAX, Math.round(x / scale)))
      this.#matrix8[base8 + i] = xq
      const e = x - scale * xq
      residual += e * e
      quantised += xq * xq
      norm += x * x
    }
    this.#largestQuantisedNorm = Math.max(this.#largestQuantisedNorm, scale * Math.sqrt(quantised))
    // A row that is not finite has no bound: it is always rescored.
    const error = Number.isFinite(norm)
      ? float32AtLeast(Math.sqrt(residual) + this.#rounding * Math.sqrt(norm))
      : Number.POSITIVE_INFINITY
    const tail = new Float32Array(this.#memory8!.buffer, base8 + stride8 - 8, 2)
    tail[0] = scale
    tail[1] = error
  }

  delete(id: string): void {
    const row = this.rowOf.get(id)
    if (row === undefined) return
    const last = this.ids.length - 1
    const stride = this.#stride
    if (row !== last) {
      const lastId = this.ids[last]!
      this.#matrix.copyWithin(row * stride, last * stride, (last + 1) * stride)
      const stride8 = this.#stride8
      if (this.#kernel8 !== undefined) this.#matrix8.copyWithin(row * stride8, last * stride8, (last + 1) * stride8)
      this.ids[row] = lastId
      this.rowOf.set(lastId, row)
    }
    this.ids.pop()
    this.rowOf.delete(id)
  }

  /** Bytes the index holds for its vectors (both matrices with their unused capacity and their scratch space). */
  get vectorBytes(): number {
    return this.#memory.buffer.byteLength + (this.#memory8?.buffer.byteLength ?? 0)
  }

  /** The query in the float32 scratch space; its byte offset. */
  #stageQuery(q: Float32Array): number {
    const stride = this.#stride
    const queryAt = this.#capacity * stride * 4
    const query = new Float32Array(this.#memory.buffer, queryAt, stride)
    query.fill(0)
    query.set(q.subarray(0, Math.min(q.length, this.dims)))
    return queryAt
  }

  /** Every row's inner product with `q`, in row order. */
  #scores(q: Float32Array): Float32Array {
    const n = this.ids.length
    const stride = this.#stride
    const buffer = this.#memory.buffer
    const queryAt = this.#stageQuery(q)
    const outAt = queryAt + stride * 4
    const out = new Float32Array(buffer, outAt, n)
    if (this.#kernel !== undefined) {
      this.#kernel(0, queryAt, outAt, n, stride * 4)
      return out
    }
    const m = this.#matrix
    const query = new Float32Array(buffer, queryAt, stride)
    for (let r = 0; r < n; r++) {
      let s = 0
      const base = r * stride
      for (let i = 0; i < stride; i++) s += m[base + i]! * query[i]!
      out[r] = s
    }
    return out
  }

  /**
   * The `limit` rows with the highest inner product with `q` among those
   * `accept` lets through (all when absent), best first, ties by id.
   */
  search(q: Float32Array, limit: number, accept?: (id: string) => boolean): DenseHit[] {
    const n = this.ids.length
    if (limit <= 0 || n === 0) return []
    const best = new BestRows(limit, this.ids)
    if (!(this.#kernel8 !== undefined && this.#searchQuantised(q, limit, accept, best))) {
      this.rescored = n
      const scores = this.#scores(q)
      let floor = Number.NEGATIVE_INFINITY
      for (let r = 0; r < n; r++) {
        const score = scores[r]!
        if (score < floor) continue
        if (accept !== undefined && !accept(this.ids[r]!)) continue
        best.offer(score, r)
        floor = best.floor
      }
    }
    const out: DenseHit[] = []
    for (let i = 0; i < best.size; i++) out.push({ id: this.ids[best.rows[i]!]!, score: best.scores[i]! })
    return out.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
  }

  /**
   * The int8 scan, then the candidates rescored in float32 into `best`; false
   * (and `best` untouched) when too many rows stay candidates for that to
   * beat the full float32 scan.
   */
  #searchQuantised(
    q: Float32Array,
    limit: number,
    accept: ((id: string) => boolean) | undefined,
    best: BestRows,
  ): boolean {
    const n = this.ids.length
    const memory8 = this.#memory8!
    const stride8 = this.#stride8
    const query8At = this.#capacity * stride8
    const boundsAt = query8At + stride8 * 2
    const query8 = new Int16Array(memory8.buffer, query8At, stride8)
    const dims = Math.min(q.length, this.dims)
    let largest = 0
    let norm = 0
    for (let i = 0; i < dims; i++) {
      largest = Math.max(largest, Math.abs(q[i]!))
      norm += q[i]! * q[i]!
    }
    if (!Number.isFinite(norm)) return false
    const queryScale = largest / this.#queryMax
    let queryError = 0
    query8.fill(0)
    if (queryScale > 0)
      for (let i = 0; i < dims; i++) {
        const qq = Math.max(-this.#queryMax, Math.min(this.#queryMax, Math.round(q[i]! / queryScale)))
        query8[i] = qq
        const e = q[i]! - queryScale * qq
        queryError += e * e
      }
    // Rounded up a little: the bounds must not be lowered by the float64 arithmetic that forms them.
    const queryNorm = Math.sqrt(norm) * (1 + 2 ** -40)
    const slack = Math.sqrt(queryError) * (1 + 2 ** -40) * this.#largestQuantisedNorm * (1 + 2 ** -40)
    this.#kernel8!(0, query8At, boundsAt, n, stride8, queryScale, queryNorm, slack)
    const bounds = new Float32Array(memory8.buffer, boundsAt, 2 * n)

    // Candidates: accepted rows whose upper bound reaches the k-th largest lower bound so far (which only rises).
    const lower = new LargestBounds(limit)
    const candidates: number[] = []
    let floor = Number.NEGATIVE_INFINITY
    const most = Math.max(limit, Math.floor(n * RESCORE_SHARE))
    for (let r = 0; r < n; r++) {
      if (bounds[2 * r]! < floor) continue
      if (accept !== undefined && !accept(this.ids[r]!)) continue
      candidates.push(r)
      if (candidates.length > most) {
        // Those the floor has risen past since are dropped; too many left, and the full scan is cheaper.
        let kept = 0
        for (const c of candidates) if (!(bounds[2 * c]! < floor)) candidates[kept++] = c
        candidates.length = kept
        if (kept > most / 2) return false
      }
      // Not offered when it cannot raise the floor (NaN included: a row with no bound).
      const low = bounds[2 * r + 1]!
      if (low > floor) {
        lower.offer(low)
        floor = lower.floor
      }
    }

    const kernel = this.#kernel!
    const stride = this.#stride
    const queryAt = this.#stageQuery(q)
    const outAt = queryAt + stride * 4
    const out = new Float32Array(this.#memory.buffer, outAt, 1)
    let bestFloor = Number.NEGATIVE_INFINITY
    this.rescored = 0
    for (let i = 0; i < candidates.length; i++) {
      const r = candidates[i]!
      if (bounds[2 * r]! < floor) continue
      this.rescored++
      kernel(r * stride * 4, queryAt, outAt, 1, stride * 4)
      const score = out[0]!
      if (score < bestFloor) continue
      best.offer(score, r)
      bestFloor = best.floor
    }
    return true
  }
}
