/**
 * The behaviour every `LongTermStore` adapter owes the long-term projection
 * and retrieval: exact cosine ranking, idempotent upserts, removal, the
 * record filter, agent isolation, thread listing across agents, and models
 * of different dimensions side by side.
 *
 * `makeStore` is called once per test and should return an empty store.
 */
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { Origin } from "../../contracts/entry.ts"
import type { LongTermPayload, RecordFilter } from "../../contracts/longterm.ts"
import type { LongTermRecord, LongTermStoreShape } from "../../services/memory/longterm/store.ts"

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)

/** A fresh id for this test, so adapters sharing a backend never see another test's records. */
const fresh = (label: string) => `${label}-${randomBytes(4).toString("hex")}`

const normalised = (values: ReadonlyArray<number>): Float32Array => {
  const norm = Math.sqrt(values.reduce((s, x) => s + x * x, 0))
  return Float32Array.from(values, (x) => x / norm)
}

const cosine = (a: Float32Array, b: Float32Array): number => {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!
    na += a[i]! * a[i]!
    nb += b[i]! * b[i]!
  }
  return dot / Math.sqrt(na * nb)
}

/** Deterministic pseudo-random numbers in [-1, 1). */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1
}

const MODEL_8 = "contract/model-8d"
const MODEL_3 = "contract/model-3d@v1"

interface Overrides {
  readonly origin?: Origin
  readonly tags?: ReadonlyArray<string>
  readonly correlationId?: string | null
  readonly timestamp?: number
  readonly summary?: string
  readonly model?: string
}

const payload = (agentId: string, entryId: string, o: Overrides = {}): LongTermPayload => {
  const timestamp = o.timestamp ?? 1_700_000_000_000
  return {
    agentId,
    entryId,
    origin: o.origin ?? "USER",
    tags: o.tags ?? [],
    correlationId: o.correlationId === undefined ? null : o.correlationId,
    moodSnapshot: { valence: 0.25, arousal: 0.5 },
    emotionalWeight: 0.375,
    timestamp,
    demotedAt: timestamp + 60_000,
    summary: o.summary ?? `summary of ${entryId}`,
    summaryForm: "summary",
    summaryTokens: 4,
    keyPoints: "- a key point",
    keyPointsTokens: 3,
    rawTokens: 42,
    citationCount: 1,
    model: o.model ?? MODEL_8,
  }
}

const record = (agentId: string, entryId: string, vector: Float32Array, o: Overrides = {}): LongTermRecord => ({
  payload: payload(agentId, entryId, o),
  vector,
})

/** A unit vector at `angle` in the plane of the first two axes. */
const planar = (angle: number, dims = 8): Float32Array => {
  const v = new Float32Array(dims)
  v[0] = Math.cos(angle)
  v[1] = Math.sin(angle)
  return v
}

const entryIds = (payloads: ReadonlyArray<LongTermPayload>) => payloads.map((p) => p.entryId)

export const describeLongTermStoreContract = (name: string, makeStore: () => Promise<LongTermStoreShape>): void => {
  describe(`LongTermStore contract: ${name}`, () => {
    it("ranks by exact cosine similarity, best first, up to the limit", async () => {
      const store = await makeStore()
      const agent = fresh("rank")
      const random = seeded(7)
      const records = Array.from({ length: 24 }, (_, i) =>
        record(agent, `e${String(i).padStart(2, "0")}`, normalised(Array.from({ length: 8 }, random)), {
          timestamp: 1_000 + i,
        }),
      )
      await run(store.upsert(records))

      for (const query of [
        normalised(Array.from({ length: 8 }, random)),
        normalised(Array.from({ length: 8 }, random)),
      ]) {
        const expected = records
          .map((r) => ({ id: r.payload.entryId, score: cosine(query, r.vector) }))
          .sort((a, b) => b.score - a.score)
        // the fixture leaves no near-ties, so the order is unambiguous
        for (let i = 1; i < 11; i++) expect(expected[i - 1]!.score - expected[i]!.score).toBeGreaterThan(1e-4)

        const hits = await run(store.searchDense(agent, MODEL_8, query, 10))
        expect(hits.map((h) => h.payload.entryId)).toEqual(expected.slice(0, 10).map((e) => e.id))
        hits.forEach((h, i) => {
          expect(h.score).toBeCloseTo(expected[i]!.score, 4)
        })

        const top3 = await run(store.searchDense(agent, MODEL_8, query, 3))
        expect(top3.map((h) => h.payload.entryId)).toEqual(expected.slice(0, 3).map((e) => e.id))
      }

      // a vector equal to a record's finds it first, with similarity 1
      const target = records[5]!
      const [first] = await run(store.searchDense(agent, MODEL_8, target.vector, 1))
      expect(first?.payload).toEqual(target.payload)
      expect(first?.score).toBeCloseTo(1, 4)
    })

    it("ranks records in the order of their angle to the query", async () => {
      const store = await makeStore()
      const agent = fresh("angles")
      const angles = [0.9, 0.1, 2.5, 0.5, 1.6, 3.0, 0.3]
      await run(store.upsert(angles.map((a, i) => record(agent, `a${i}`, planar(a)))))
      const hits = await run(store.searchDense(agent, MODEL_8, planar(0), 10))
      // by angle from the query: 0.1, 0.3, 0.5, 0.9, 1.6, 2.5, 3.0
      expect(hits.map((h) => h.payload.entryId)).toEqual(["a1", "a6", "a3", "a0", "a4", "a2", "a5"])
      expect(hits.map((h) => h.score)).toEqual(
        [0.1, 0.3, 0.5, 0.9, 1.6, 2.5, 3.0].map((a) => expect.closeTo(Math.cos(a), 4)),
      )
    })

    it("upserts idempotently: the same record twice is one record", async () => {
      const store = await makeStore()
      const agent = fresh("idem")
      const r = record(agent, "e1", planar(0.2), { tags: ["t"], correlationId: "c" })
      const other = record(agent, "e2", planar(1.2))
      await run(store.upsert([r, other]))
      const before = await run(store.list({ agentId: agent }))
      expect(before).toEqual([r.payload, other.payload])

      await run(store.upsert([r]))
      await run(store.upsert([r, r]))
      expect(await run(store.list({ agentId: agent }))).toEqual(before)
      const hits = await run(store.searchDense(agent, MODEL_8, planar(0.2), 10))
      expect(hits.map((h) => h.payload.entryId)).toEqual(["e1", "e2"])
    })

    it("gets records by entry id, of one agent only, ignoring ids it does not hold", async () => {
      const store = await makeStore()
      const agent = fresh("get")
      const other = fresh("get-other")
      const a = record(agent, "e1", planar(0.1))
      const b = record(agent, "e2", planar(0.3))
      await run(store.upsert([a, b, record(other, "e1", planar(0.5))]))
      const got = await run(store.get(agent, ["e2", "missing", "e1"]))
      expect([...got].sort((x, y) => (x.entryId < y.entryId ? -1 : 1))).toEqual([a.payload, b.payload])
      expect(await run(store.get(agent, []))).toEqual([])
    })

    it("an upsert replaces the payload and the vector of the same entry", async () => {
      const store = await makeStore()
      const agent = fresh("replace")
      await run(store.upsert([record(agent, "e1", planar(0), { tags: ["old"], summary: "first" })]))
      const second = record(agent, "e1", planar(Math.PI / 2), { tags: ["new"], summary: "second" })
      await run(store.upsert([second]))

      expect(await run(store.list({ agentId: agent }))).toEqual([second.payload])
      expect(await run(store.searchDense(agent, MODEL_8, planar(0), 10, { tags: ["old"] }))).toEqual([])
      const hits = await run(store.searchDense(agent, MODEL_8, planar(Math.PI / 2), 10, { tags: ["new"] }))
      expect(hits.map((h) => h.payload.summary)).toEqual(["second"])
      expect(hits[0]!.score).toBeCloseTo(1, 4)
    })

    it("an entry upserted under another model leaves its previous model", async () => {
      const store = await makeStore()
      const agent = fresh("remodel")
      await run(store.upsert([record(agent, "e1", planar(0)), record(agent, "e2", planar(0.5))]))
      const moved = record(agent, "e1", normalised([1, 0, 0]), { model: MODEL_3, summary: "re-embedded" })
      await run(store.upsert([moved]))

      expect(await run(store.list({ agentId: agent }))).toEqual(
        [moved.payload, payload(agent, "e2")].sort((a, b) => (a.entryId < b.entryId ? -1 : 1)),
      )
      expect(entryIds((await run(store.searchDense(agent, MODEL_8, planar(0), 10))).map((h) => h.payload))).toEqual([
        "e2",
      ])
      expect(
        entryIds((await run(store.searchDense(agent, MODEL_3, normalised([1, 0, 0]), 10))).map((h) => h.payload)),
      ).toEqual(["e1"])
      expect([...(await run(store.models(agent)))].sort()).toEqual([MODEL_3, MODEL_8].sort())
    })

    it("removes records by entry id, only the agent's own", async () => {
      const store = await makeStore()
      const agent = fresh("remove")
      const other = fresh("remove-other")
      await run(
        store.upsert([
          record(agent, "e0", planar(0.1), { timestamp: 1 }),
          record(agent, "e1", planar(0.2), { timestamp: 2 }),
          record(agent, "e2", planar(0.3), { timestamp: 3 }),
          record(other, "e1", planar(0.2), { timestamp: 2 }),
        ]),
      )
      await run(store.remove(agent, ["e1", "never-stored"]))
      await run(store.remove(agent, []))

      expect(entryIds(await run(store.list({ agentId: agent })))).toEqual(["e0", "e2"])
      expect((await run(store.searchDense(agent, MODEL_8, planar(0.25), 10))).map((h) => h.payload.entryId)).toEqual([
        "e2",
        "e0",
      ])
      // the other agent's entry with the same id is untouched
      expect(entryIds(await run(store.list({ agentId: other })))).toEqual(["e1"])

      await run(store.remove(agent, ["e0", "e2"]))
      expect(await run(store.list({ agentId: agent }))).toEqual([])
      expect(await run(store.searchDense(agent, MODEL_8, planar(0.2), 10))).toEqual([])
    })

    it("filters by origins, tags (any of), correlation id and time range [from, to)", async () => {
      const store = await makeStore()
      const agent = fresh("filter")
      const c1 = fresh("c1")
      const c2 = fresh("c2")
      await run(
        store.upsert([
          record(agent, "r1", planar(0.1), { origin: "USER", tags: ["x"], correlationId: c1, timestamp: 1_000 }),
          record(agent, "r2", planar(0.2), {
            origin: "INTERNAL",
            tags: ["y", "z"],
            correlationId: c1,
            timestamp: 2_000,
          }),
          record(agent, "r3", planar(0.3), { origin: "ADVISOR", tags: [], correlationId: null, timestamp: 3_000 }),
          record(agent, "r4", planar(0.4), { origin: "SYSTEM", tags: ["x", "z"], correlationId: c2, timestamp: 4_000 }),
          record(agent, "r5", planar(0.5), { origin: "USER", tags: ["w"], correlationId: c2, timestamp: 5_000 }),
        ]),
      )
      const cases: ReadonlyArray<readonly [RecordFilter, ReadonlyArray<string>]> = [
        [{}, ["r1", "r2", "r3", "r4", "r5"]],
        [{ origins: ["USER"] }, ["r1", "r5"]],
        [{ origins: ["USER", "SYSTEM"] }, ["r1", "r4", "r5"]],
        [{ origins: [] }, []],
        [{ tags: ["z"] }, ["r2", "r4"]],
        [{ tags: ["x", "w"] }, ["r1", "r4", "r5"]],
        [{ tags: ["absent"] }, []],
        [{ tags: [] }, []],
        [{ correlationId: c1 }, ["r1", "r2"]],
        [{ correlationId: "absent" }, []],
        [{ from: 2_000 }, ["r2", "r3", "r4", "r5"]],
        [{ to: 3_000 }, ["r1", "r2"]],
        [{ from: 2_000, to: 4_000 }, ["r2", "r3"]],
        [{ from: 2_000, to: 2_000 }, []],
        [{ origins: ["USER"], tags: ["x"] }, ["r1"]],
        [{ tags: ["z"], correlationId: c2, from: 4_000, to: 4_001 }, ["r4"]],
      ]
      for (const [filter, expected] of cases) {
        expect(entryIds(await run(store.list({ agentId: agent, ...filter }))), JSON.stringify(filter)).toEqual(expected)
        const hits = await run(store.searchDense(agent, MODEL_8, planar(0), 100, filter))
        // nearest first: r1 (0.1 rad) ... r5 (0.5 rad), so the filtered order is the same
        expect(
          hits.map((h) => h.payload.entryId),
          JSON.stringify(filter),
        ).toEqual(expected)
      }
    })

    it("isolates agents: a query for one agent never returns another's records", async () => {
      const store = await makeStore()
      const a = fresh("agent-a")
      const b = fresh("agent-b")
      // same entry ids, same vectors, same tags
      await run(
        store.upsert([
          record(a, "e0", planar(0.1), { tags: ["shared"] }),
          record(a, "e1", planar(0.2), { tags: ["shared"] }),
          record(b, "e0", planar(0.1), { tags: ["shared"] }),
          record(b, "e1", planar(0.2), { tags: ["shared"] }),
          record(b, "e2", planar(0.0), { tags: ["shared"] }),
        ]),
      )
      for (const filter of [undefined, { tags: ["shared"] }]) {
        const hits = await run(store.searchDense(a, MODEL_8, planar(0), 10, filter))
        expect(hits.map((h) => [h.payload.agentId, h.payload.entryId])).toEqual([
          [a, "e0"],
          [a, "e1"],
        ])
      }
      expect((await run(store.list({ agentId: a }))).every((p) => p.agentId === a)).toBe(true)
      expect(await run(store.list({ agentId: a }))).toHaveLength(2)
      expect(await run(store.list({ agentId: b }))).toHaveLength(3)
      expect(await run(store.searchDense(fresh("nobody"), MODEL_8, planar(0), 10))).toEqual([])
      expect(await run(store.list({ agentId: fresh("nobody") }))).toEqual([])
    })

    it("lists a thread across agents by correlation id, in time order", async () => {
      const store = await makeStore()
      const thread = fresh("thread")
      const a = fresh("thread-a")
      const b = fresh("thread-b")
      const c = fresh("thread-c")
      await run(
        store.upsert([
          record(a, "a-late", planar(0.1), { correlationId: thread, timestamp: 3_000 }),
          record(a, "a-early", planar(0.2), { correlationId: thread, timestamp: 1_000 }),
          record(b, "m1", planar(0.3), { correlationId: thread, timestamp: 2_000 }),
          record(b, "b-elsewhere", planar(0.4), { correlationId: fresh("other"), timestamp: 2_000 }),
          record(c, "m0", normalised([0, 1, 0]), { correlationId: thread, timestamp: 2_000, model: MODEL_3 }),
          record(c, "c-none", planar(0.5), { timestamp: 500 }),
        ]),
      )
      const listed = await run(store.list({ correlationId: thread }))
      expect(listed.map((p) => [p.agentId, p.entryId])).toEqual([
        [a, "a-early"],
        [c, "m0"],
        [b, "m1"],
        [a, "a-late"],
      ])
      expect(entryIds(await run(store.list({ correlationId: thread, agentId: a })))).toEqual(["a-early", "a-late"])
      expect(entryIds(await run(store.list({ correlationId: thread, from: 2_000, to: 3_000 })))).toEqual(["m0", "m1"])
    })

    it("lists the models present for an agent", async () => {
      const store = await makeStore()
      const a = fresh("models-a")
      const b = fresh("models-b")
      expect(await run(store.models(a))).toEqual([])
      await run(store.upsert([record(a, "e0", planar(0.1)), record(b, "e0", planar(0.1))]))
      expect(await run(store.models(a))).toEqual([MODEL_8])
      await run(store.upsert([record(a, "e1", normalised([1, 2, 3]), { model: MODEL_3 })]))
      expect([...(await run(store.models(a)))].sort()).toEqual([MODEL_3, MODEL_8].sort())
      expect(await run(store.models(b))).toEqual([MODEL_8])
      expect(await run(store.models(fresh("models-none")))).toEqual([])
    })

    it("keeps records of two models with different dimensions side by side", async () => {
      const store = await makeStore()
      const agent = fresh("dims")
      await run(
        store.upsert([
          record(agent, "big-near", planar(0.1), { timestamp: 1 }),
          record(agent, "small-far", normalised([0, 0, 1]), { model: MODEL_3, timestamp: 2 }),
          record(agent, "big-far", planar(1.4), { timestamp: 3 }),
          record(agent, "small-near", normalised([1, 0.1, 0]), { model: MODEL_3, timestamp: 4 }),
        ]),
      )
      const big = await run(store.searchDense(agent, MODEL_8, planar(0), 10))
      expect(big.map((h) => h.payload.entryId)).toEqual(["big-near", "big-far"])
      expect(big.every((h) => h.payload.model === MODEL_8)).toBe(true)
      const small = await run(store.searchDense(agent, MODEL_3, normalised([1, 0, 0]), 10))
      expect(small.map((h) => h.payload.entryId)).toEqual(["small-near", "small-far"])
      expect(small[0]!.score).toBeCloseTo(cosine(normalised([1, 0, 0]), normalised([1, 0.1, 0])), 4)
      expect(await run(store.searchDense(agent, "contract/absent-model", planar(0), 10))).toEqual([])
      expect(entryIds(await run(store.list({ agentId: agent })))).toEqual([
        "big-near",
        "small-far",
        "big-far",
        "small-near",
      ])
    })
  })
}
