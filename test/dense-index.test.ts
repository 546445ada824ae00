import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { DenseIndex } from "../services/memory/longterm/dense-index.ts"
import { dotKernel, wasmMemory } from "../services/memory/longterm/dot-kernel.ts"

/** Brute force: every live vector scored, best first, ties by id. */
const bruteForce = (vectors: ReadonlyMap<string, Float32Array>, q: Float32Array, limit: number) =>
  [...vectors]
    .map(([id, v]) => ({ id, score: v.reduce((s, x, i) => s + x * q[i]!, 0) }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
    .slice(0, limit)

// Small integers in eighths: every sum is exact in float32, so scores and ties are comparable exactly.
const vectorOf = (dims: number) =>
  fc
    .array(fc.integer({ min: -8, max: 8 }), { minLength: dims, maxLength: dims })
    .map((xs) => Float32Array.from(xs, (x) => x / 8))

describe("exact dense search", () => {
  it("returns the top k of brute-force scoring, through growth, replacement and deletion", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 13 }).chain((dims) =>
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
