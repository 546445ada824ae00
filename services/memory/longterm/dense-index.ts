/**
 * Exact inner-product search over one agent's vectors of one model: a dense
 * Float32 row-major matrix scanned in full by a SIMD kernel (dot-kernel.ts),
 * the best `limit` rows kept in a bounded heap. At 100k 100-d records a scan
 * is 10 M multiply-adds, a few milliseconds; exact keeps results those of
 * brute force, and nothing has to be built at start beyond the matrix.
 */
import { dotKernel, type ScoresFunction, type WasmMemory, wasmMemory } from "./dot-kernel.ts"

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

export class DenseIndex {
  readonly dims: number
  /** Floats per row: dims padded to a multiple of four with zeros, for the four-lane kernel. */
  readonly #stride: number
  ids: string[] = []
  readonly rowOf = new Map<string, number>()
  #capacity = INITIAL_ROWS
  /** The matrix at offset 0, then scratch space for a query and its scores. */
  readonly #memory: WasmMemory
  readonly #kernel: ScoresFunction | undefined
  #matrix: Float32Array

  constructor(dims: number) {
    this.dims = dims
    this.#stride = Math.ceil(dims / 4) * 4
    this.#memory = wasmMemory(Math.ceil(this.#bytesFor(INITIAL_ROWS) / PAGE))
    this.#kernel = dotKernel(this.#memory)
    this.#matrix = new Float32Array(this.#memory.buffer, 0, INITIAL_ROWS * this.#stride)
  }

  #bytesFor(rows: number): number {
    return (rows * this.#stride + this.#stride + rows) * 4
  }

  get size(): number {
    return this.ids.length
  }

  set(id: string, vector: Float32Array): void {
    let row = this.rowOf.get(id)
    if (row === undefined) {
      row = this.ids.length
      if (row === this.#capacity) {
        const capacity = this.#capacity * 2
        const missing = this.#bytesFor(capacity) - this.#memory.buffer.byteLength
        if (missing > 0) this.#memory.grow(Math.ceil(missing / PAGE))
        this.#capacity = capacity
        this.#matrix = new Float32Array(this.#memory.buffer, 0, capacity * this.#stride)
      }
      this.ids.push(id)
      this.rowOf.set(id, row)
    }
    const base = row * this.#stride
    this.#matrix.set(vector.subarray(0, this.dims), base)
    this.#matrix.fill(0, base + Math.min(vector.length, this.dims), base + this.#stride)
  }

  delete(id: string): void {
    const row = this.rowOf.get(id)
    if (row === undefined) return
    const last = this.ids.length - 1
    const stride = this.#stride
    if (row !== last) {
      const lastId = this.ids[last]!
      this.#matrix.copyWithin(row * stride, last * stride, (last + 1) * stride)
      this.ids[row] = lastId
      this.rowOf.set(lastId, row)
    }
    this.ids.pop()
    this.rowOf.delete(id)
  }

  /** Bytes the index holds for its vectors (the matrix with its unused capacity, and the scratch space). */
  get vectorBytes(): number {
    return this.#memory.buffer.byteLength
  }

  /** Every row's inner product with `q`, in row order. */
  #scores(q: Float32Array): Float32Array {
    const n = this.ids.length
    const stride = this.#stride
    const buffer = this.#memory.buffer
    const queryAt = this.#capacity * stride * 4
    const outAt = queryAt + stride * 4
    const query = new Float32Array(buffer, queryAt, stride)
    query.fill(0)
    query.set(q.subarray(0, Math.min(q.length, this.dims)))
    const out = new Float32Array(buffer, outAt, n)
    if (this.#kernel !== undefined) {
      this.#kernel(0, queryAt, outAt, n, stride * 4)
      return out
    }
    const m = this.#matrix
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
    const scores = this.#scores(q)
    const best = new BestRows(limit, this.ids)
    let floor = Number.NEGATIVE_INFINITY
    for (let r = 0; r < n; r++) {
      const score = scores[r]!
      if (score < floor) continue
      if (accept !== undefined && !accept(this.ids[r]!)) continue
      best.offer(score, r)
      floor = best.floor
    }
    const out: DenseHit[] = []
    for (let i = 0; i < best.size; i++) out.push({ id: this.ids[best.rows[i]!]!, score: best.scores[i]! })
    return out.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
  }
}
