import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { DenseIndex } from "../../services/memory/longterm/dense-index.ts"
import { dotKernel, int8BoundsKernel, wasmMemory } from "../../services/memory/longterm/dot-kernel.ts"

/** Brute force: every live vector scored, best first, ties by id. */
const bruteForce = (vectors: ReadonlyMap<string, Float32Array>, q: Float32Array, limit: number) =>
  [...vectors]
    .map(([id, v]) => ({ id, score: v.reduce((s, x, i) => s + x * q[i]!, 0) }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
    .slice(0, limit)

/**
 * Brute force as the float32 kernel scores: every live vector's inner product
 * with `q` computed by the kernel itself (the index's results are those
 * scores, bit for bit), best first, ties by id.
 */
const float32BruteForce = (
  vectors: ReadonlyMap<string, Float32Array>,
  dims: number,
  q: Float32Array,
  limit: number,
  accept: (id: string) => boolean = () => true,
) => {
  const stride = Math.ceil(dims / 4) * 4
  const live = [...vectors].filter(([id]) => accept(id))
  const bytes = (live.length * stride + stride + live.length) * 4
  const memory = wasmMemory(Math.max(1, Math.ceil(bytes / 65_536)))
  const matrix = new Float32Array(memory.buffer)
  live.forEach(([, v], row) => {
    matrix.set(v.subarray(0, dims), row * stride)
  })
  const queryAt = live.length * stride
  matrix.set(q.subarray(0, dims), queryAt)
  dotKernel(memory)!(0, queryAt * 4, (queryAt + stride) * 4, live.length, stride * 4)
  const scores = new Float32Array(memory.buffer, (queryAt + stride) * 4, live.length)
  return live
    .map(([id], row) => ({ id, score: scores[row]! }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
    .slice(0, limit)
}

/** Sets, replaces and deletes as `ops` say, in the index and in a map of what is live. */
const apply = (
  dims: number,
  ops: ReadonlyArray<{ readonly id: number; readonly vector: Float32Array | null }>,
): { index: DenseIndex; live: Map<string, Float32Array> } => {
  const index = new DenseIndex(dims)
  const live = new Map<string, Float32Array>()
  for (const op of ops) {
    const id = `r${op.id}`
    if (op.vector === null) {
      index.delete(id)
      live.delete(id)
    } else {
      index.set(id, op.vector)
      live.set(id, op.vector)
    }
  }
  return { index, live }
}

const everyThird = (id: string) => Number(id.slice(1)) % 3 !== 0

// Small integers in eighths: every sum is exact in float32, so scores and ties are comparable exactly.
const vectorOf = (dims: number) =>
  fc
    .array(fc.integer({ min: -8, max: 8 }), { minLength: dims, maxLength: dims })
    .map((xs) => Float32Array.from(xs, (x) => x / 8))

describe("exact dense search", () => {
  it("returns the top k of brute-force scoring, through growth, replacement and deletion", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }).chain((dims) =>
          fc.record({
            dims: fc.constant(dims),
            ops: fc.array(
              fc.oneof(
                fc.record({ id: fc.nat(3000), vector: vectorOf(dims) }),
                fc.record({ id: fc.nat(3000), vector: fc.constant(null) }),
              ),
              { minLength: 1500, maxLength: 4000 },
            ),
            query: vectorOf(dims),
            limit: fc.integer({ min: 1, max: 60 }),
          }),
        ),
        ({ dims, ops, query, limit }) => {
          const index = new DenseIndex(dims)
          const live = new Map<string, Float32Array>()
          for (const op of ops) {
            const id = `r${op.id}`
            if (op.vector === null) {
              index.delete(id)
              live.delete(id)
            } else {
              index.set(id, op.vector)
              live.set(id, op.vector)
            }
          }
          expect(index.size).toBe(live.size)
          expect(index.search(query, limit)).toEqual(bruteForce(live, query, limit))
          const accept = (id: string) => Number(id.slice(1)) % 3 !== 0
          const accepted = new Map([...live].filter(([id]) => accept(id)))
          expect(index.search(query, limit, accept)).toEqual(bruteForce(accepted, query, limit))
        },
      ),
      { numRuns: 60 },
    )
  })

  it("returns the top k of the float32 scan for random real vectors, through growth, replacement, deletion and filters", () => {
    const real = (dims: number) =>
      fc
        .array(fc.float({ min: Math.fround(-1), max: Math.fround(1), noNaN: true }), {
          minLength: dims,
          maxLength: dims,
        })
        .map((xs) => Float32Array.from(xs))
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 70 }).chain((dims) =>
          fc.record({
            dims: fc.constant(dims),
            ops: fc.array(
              fc.oneof(
                { weight: 4, arbitrary: fc.record({ id: fc.nat(2500), vector: real(dims) }) },
                { weight: 1, arbitrary: fc.record({ id: fc.nat(2500), vector: fc.constant(null) }) },
              ),
              { minLength: 1, maxLength: 3000 },
            ),
            query: real(dims),
            limit: fc.integer({ min: 1, max: 80 }),
          }),
        ),
        ({ dims, ops, query, limit }) => {
          const { index, live } = apply(dims, ops)
          expect(index.search(query, limit)).toEqual(float32BruteForce(live, dims, query, limit))
          expect(index.search(query, limit, everyThird)).toEqual(
            float32BruteForce(live, dims, query, limit, everyThird),
          )
        },
      ),
      { numRuns: 40 },
    )
  })

  it("keeps exact ties and near-ties at the k-th place: duplicates, one-ulp neighbours, scaled and negated copies", () => {
    const nudge = (x: number, ulps: number) => {
      const f = new Float32Array([x])
      const i = new Int32Array(f.buffer)
      i[0]! += ulps
      // Stepping below zero's bit pattern is not a neighbour (it is NaN): keep the value.
      return Number.isFinite(f[0]!) ? f[0]! : x
    }
    fc.assert(
      fc.property(
        fc.record({
          dims: fc.integer({ min: 1, max: 40 }),
          base: fc.array(fc.float({ min: Math.fround(-1), max: Math.fround(1), noNaN: true }), {
            minLength: 40,
            maxLength: 40,
          }),
          rows: fc.array(
            fc.record({
              id: fc.nat(1500),
              kind: fc.constantFrom("copy", "ulp", "twice", "negated", "zero", "other"),
              at: fc.nat(39),
              ulps: fc.integer({ min: -3, max: 3 }),
              other: fc.array(fc.float({ min: Math.fround(-1), max: Math.fround(1), noNaN: true }), {
                minLength: 40,
                maxLength: 40,
              }),
            }),
            { minLength: 1, maxLength: 1500 },
          ),
          deleted: fc.array(fc.nat(1500), { maxLength: 200 }),
          queryKind: fc.constantFrom("base", "ulp", "zero", "other"),
          limit: fc.integer({ min: 1, max: 60 }),
        }),
        ({ dims, base, rows, deleted, queryKind, limit }) => {
          const b = Float32Array.from(base.slice(0, dims))
          const vectorOf = (row: (typeof rows)[number]) => {
            const v = Float32Array.from(b)
            if (row.kind === "ulp") v[row.at % dims] = nudge(v[row.at % dims]!, row.ulps)
            if (row.kind === "twice") for (let i = 0; i < dims; i++) v[i] = 2 * v[i]!
            if (row.kind === "negated") for (let i = 0; i < dims; i++) v[i] = -v[i]!
            if (row.kind === "zero") v.fill(0)
            if (row.kind === "other") v.set(row.other.slice(0, dims))
            return v
          }
          const ops = [
            ...rows.map((row) => ({ id: row.id, vector: vectorOf(row) })),
            ...deleted.map((id) => ({ id, vector: null })),
          ]
          const { index, live } = apply(dims, ops)
          const query = Float32Array.from(b)
          if (queryKind === "ulp") query[0] = nudge(query[0]!, 1)
          if (queryKind === "zero") query.fill(0)
          if (queryKind === "other") query.set(rows[0]!.other.slice(0, dims))
          expect(index.search(query, limit)).toEqual(float32BruteForce(live, dims, query, limit))
          expect(index.search(query, limit, everyThird)).toEqual(
            float32BruteForce(live, dims, query, limit, everyThird),
          )
        },
      ),
      { numRuns: 60 },
    )
  })

  it("keeps the ties that float32 rounding makes among rows the int8 copy holds exactly", () => {
    // Integer rows with a coordinate at 127 and an integer query with one at 32,767 quantise without
    // error: the int8 scan sees the exact inner products. Blocks of four coordinates [a, b, a, b] against
    // [p, q, −p, −q] cancel exactly, but the kernel's four lanes sum them apart (lanes 0 and 1 up to
    // ~10⁸, lanes 2 and 3 down), so the float32 score of a near row, exactly x (its coordinate 1, where
    // the query is 1), is x rounded by several units: float32 reorders and ties rows whose exact products
    // differ. Only the rounding term of the bound keeps the rows whose exact product is lower but whose
    // float32 score is not. Far rows (coordinate 0 at zero, exactly −127·32,767 + x) are pruned.
    fc.assert(
      fc.property(
        fc.record({
          blocks: fc.integer({ min: 1, max: 24 }),
          pairs: fc.array(fc.tuple(fc.integer({ min: 0, max: 127 }), fc.integer({ min: 0, max: 32_767 })), {
            minLength: 48,
            maxLength: 48,
          }),
          near: fc.array(fc.record({ id: fc.nat(199), x: fc.integer({ min: -100, max: 100 }) }), {
            minLength: 1,
            maxLength: 300,
          }),
          far: fc.integer({ min: 0, max: 3000 }),
          limit: fc.integer({ min: 1, max: 40 }),
        }),
        ({ blocks, pairs, near, far, limit }) => {
          const dims = 4 * (blocks + 1)
          const query = new Float32Array(dims)
          const row = new Float32Array(dims)
          query.set([32_767, 1, -32_767, 0])
          row.set([127, 0, 127, 0])
          for (let b = 1; b <= blocks; b++) {
            const [a, p] = pairs[2 * b - 2]!
            const [c, q] = pairs[2 * b - 1]!
            row.set([a, c, a, c], 4 * b)
            query.set([p, q, -p, -q], 4 * b)
          }
          const ops = [
            ...Array.from({ length: far }, (_, i) => {
              const v = Float32Array.from(row)
              v[0] = 0
              v[1] = (i % 201) - 100
              return { id: 1000 + i, vector: v }
            }),
            ...near.map(({ id, x }) => {
              const v = Float32Array.from(row)
              v[1] = x
              return { id, vector: v }
            }),
          ]
          const { index, live } = apply(dims, ops)
          expect(index.search(query, limit)).toEqual(float32BruteForce(live, dims, query, limit))
          expect(index.search(query, limit, everyThird)).toEqual(
            float32BruteForce(live, dims, query, limit, everyThird),
          )
        },
      ),
      { numRuns: 100 },
    )
  })

  it("keeps a row that its int8 copy underrates by the whole of its quantisation error", () => {
    // A = x̂ + e quantises to x̂ (scale 1) with e along the query: the int8 scan sees A as B = x̂, and A's
    // true lead over B is ‖q‖·‖e‖, the bound exactly (Cauchy–Schwarz holds with equality). C = x̂ + one
    // unit where q is 0.1 lies between B and A, inside the bound but above half of it.
    const a = Float32Array.from([127, 5.4, -6.9, 3.1])
    const b = Float32Array.from([127, 5, -7, 3])
    const c = Float32Array.from([127, 5, -6, 3])
    const query = Float32Array.from([0, 0.4, 0.1, 0.1])
    const far = Array.from({ length: 300 }, (_, i) => Float32Array.from([-127, -(i % 100), 0, 0]))
    for (const [first, second, third] of [
      [a, b, c],
      [c, b, a],
      [b, c, a],
    ] as const) {
      const live = new Map<string, Float32Array>()
      for (const [i, v] of far.entries()) live.set(`r${100 + i}`, v)
      live.set("r1", first)
      live.set("r2", second)
      live.set("r4", third)
      const index = new DenseIndex(4)
      for (const [id, v] of live) index.set(id, v)
      expect(index.search(query, 1)).toEqual(float32BruteForce(live, 4, query, 1))
      expect(index.search(query, 2)).toEqual(float32BruteForce(live, 4, query, 2))
    }
  })

  it("keeps a row that the int16 query underrates by its quantisation error", () => {
    // The query's 0.49 quantises to 0 (scale 1, from its 32,767): the scan sees A = B + 127 units there
    // as B, though A leads B by 62; C leads B by 20 in both, so only the query's error term keeps A.
    const a = Float32Array.from([127, 127, 0, 0])
    const b = Float32Array.from([127, 0, 0, 0])
    const c = Float32Array.from([127, 0, 1, 0])
    const query = Float32Array.from([32_767, 0.49, 20, 0])
    const live = new Map<string, Float32Array>([
      ["r1", a],
      ["r2", b],
      ["r4", c],
    ])
    for (let i = 0; i < 300; i++) live.set(`r${100 + i}`, Float32Array.from([-127, 0, -(i % 100), 0]))
    const index = new DenseIndex(4)
    for (const [id, v] of live) index.set(id, v)
    expect(index.search(query, 1)).toEqual(float32BruteForce(live, 4, query, 1))
    expect(index.search(query, 2)).toEqual(float32BruteForce(live, 4, query, 2))
  })

  it("stays exact at wide vectors of extreme values, where the int16 query is narrowed so that no sum overflows", () => {
    for (const dims of [600, 1536]) {
      const live = new Map<string, Float32Array>()
      const index = new DenseIndex(dims)
      for (let r = 0; r < 300; r++) {
        // ±1 everywhere: every int8 product at its largest, mostly of one sign.
        const v = Float32Array.from({ length: dims }, (_, i) => ((i * 7 + r) % 11 < (r % 11) + 1 ? -1 : 1))
        index.set(`r${r}`, v)
        live.set(`r${r}`, v)
      }
      const query = new Float32Array(dims).fill(1)
      expect(index.search(query, 20)).toEqual(float32BruteForce(live, dims, query, 20))
      query[3] = -1
      expect(index.search(query, 20)).toEqual(float32BruteForce(live, dims, query, 20))
    }
  })

  it("scores few rows in float32 once the int8 scan has bounded the rest", () => {
    // 20k random unit-length rows: the bounds leave a small share of them to rescore.
    const dims = 100
    let seed = 7
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
      return seed / 2 ** 31 - 0.5
    }
    const unit = () => {
      const v = Float32Array.from({ length: dims }, random)
      const norm = Math.hypot(...v)
      return v.map((x) => x / norm)
    }
    const index = new DenseIndex(dims)
    const live = new Map<string, Float32Array>()
    for (let r = 0; r < 20_000; r++) {
      const v = unit()
      index.set(`r${r}`, v)
      live.set(`r${r}`, v)
    }
    const query = unit()
    expect(index.search(query, 50)).toEqual(float32BruteForce(live, dims, query, 50))
    expect(index.rescored).toBeGreaterThanOrEqual(50)
    expect(index.rescored).toBeLessThan(20_000 / 8)
  })

  it("bounds each row's float32 score with the int8 kernel on this runtime", () => {
    const memory = wasmMemory(1)
    const bounds = int8BoundsKernel(memory)
    expect(bounds).toBeDefined()
    // Two rows of 16 bytes: eight int8s, zeros, then the row's scale and error term as float32.
    const bytes = new Int8Array(memory.buffer)
    const floats = new Float32Array(memory.buffer)
    bytes.set([1, 2, 3, 4, 5, 6, 7, 8], 0)
    floats.set([0.5, 0.25], 2)
    bytes.set([-1, 0, 0, 0, 0, 0, 0, 127], 16)
    floats.set([2, 0], 6)
    new Int16Array(memory.buffer, 64, 16).set([1, 1, 1, 1, 1, 1, 1, 1])
    bounds!(0, 64, 128, 2, 16, 0.5, 2, 0.125)
    // Row 0: 36 · 0.5 · 0.5 = 9 ± (0.25 · 2 + 0.125); row 1: 126 · 2 · 0.5 = 126 ± 0.125 (then rounded outwards).
    const [upper0, lower0, upper1, lower1] = new Float32Array(memory.buffer, 128, 4)
    expect(upper0).toBeGreaterThanOrEqual(9.625)
    expect(upper0).toBeCloseTo(9.625, 5)
    expect(lower0).toBeLessThanOrEqual(8.375)
    expect(lower0).toBeCloseTo(8.375, 5)
    expect(upper1).toBeGreaterThanOrEqual(126.125)
    expect(lower1).toBeLessThanOrEqual(125.875)
  })

  it("scans with the SIMD kernel on this runtime, which computes each row's inner product", () => {
    const memory = wasmMemory(1)
    const scores = dotKernel(memory)
    expect(scores).toBeDefined()
    const f = new Float32Array(memory.buffer)
    f.set([1, 2, 3, 4, 5, 6, 7, 8, 0.5, -1, 0, 2, 0, 0, 0, 0], 0) // two rows of stride 8
    f.set([1, 1, 1, 1, 1, 1, 1, 1], 16) // the query
    scores!(0, 64, 128, 2, 32)
    expect([f[32], f[33]]).toEqual([36, 1.5])
  })
})
