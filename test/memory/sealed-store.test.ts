/**
 * The long-term store seen through the content keys: a search and a lookup return each record with its texts
 * opened, in the store's order, whether the reading process has the records' keys in memory already or must
 * ask the key store for them; a record whose key is destroyed is not returned. The store is the embedded one,
 * the keys a real key bucket on a real nats-server, written by one process and read by another.
 */
import type { NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import type { LongTermPayload } from "../../contracts/longterm.ts"
import type { Tombstone } from "../../domain/forget.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { makeEmbeddedStore } from "../../services/memory/longterm/embedded-store.ts"
import { SEALED_TEXT, sealedLongTermStore } from "../../services/memory/longterm/sealed-store.ts"
import type { LongTermStoreShape } from "../../services/memory/longterm/store.ts"
import { destroyContentKeys } from "../../services/platform/keys/destroy-keys.ts"
import { processKeyStore, WRITER } from "../support/key-stores.ts"

const MODEL = "test-model"
let server: NatsServerProcess
const connections: NatsConnection[] = []

beforeAll(async () => {
  server = await startNatsServer()
})

afterAll(async () => {
  for (const nc of connections) await nc.close()
  await server?.stop()
})

/** A process's content keys, none of them in its memory at first. */
const keysOf = async (process: string) => {
  const { nc, store } = await processKeyStore(server.url, process)
  connections.push(nc)
  return { nc, keys: store }
}

const payload = (agentId: string, i: number): LongTermPayload => ({
  agentId,
  entryId: `e${i}`,
  origin: "USER",
  tags: [],
  correlationId: null,
  moodSnapshot: null,
  emotionalWeight: 0,
  timestamp: 1_000 + i,
  demotedAt: 2_000 + i,
  summary: `summary of entry ${i}`,
  summaryForm: "summary",
  summaryTokens: 5,
  keyPoints: i % 2 === 0 ? `key points of entry ${i}` : null,
  keyPointsTokens: i % 2 === 0 ? 6 : null,
  rawTokens: 40,
  citationCount: 0,
  model: MODEL,
})

/** Entry i's vector points further from the query the larger i is. */
const vectorOf = (i: number) => Float32Array.from([1, i / 10, 0, 0])
const QUERY = Float32Array.from([1, 0, 0, 0])

/** What forgetting entry `entryId` of `agentId` leaves for the key store to destroy. */
const entryForgotten = (agentId: string, entryId: string, eventId: string): Tombstone => ({
  _tag: "EntryForgotten",
  v: 1,
  eventId,
  agentId,
  entryId,
  at: Date.now(),
  causationId: null,
  correlationId: null,
})

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const texts = (payloads: ReadonlyArray<LongTermPayload>) =>
  payloads.map((p) => ({ entryId: p.entryId, summary: p.summary, keyPoints: p.keyPoints }))

/** `count` records of the agent stored sealed in an embedded store, each under its own key, as the writer makes them. */
const sealedRecords = async (agentId: string, count: number) => {
  const inner: LongTermStoreShape = makeEmbeddedStore()
  const writer = await keysOf(WRITER)
  const written = Array.from({ length: count }, (_, i) => payload(agentId, i))
  // The writer makes each entry's key, as recording the entry does, and stores the records sealed.
  for (const p of written) await writer.keys.forWrite({ agentId, entryId: p.entryId }, true)
  await run(
    sealedLongTermStore(inner, writer.keys).upsert(written.map((p, i) => ({ payload: p, vector: vectorOf(i) }))),
  )
  return { inner, written }
}

it("opens what a search and a lookup return, with the keys in memory or not, and leaves out a record whose key is destroyed", async () => {
  const agentId = "sealed-reader"
  const { inner, written } = await sealedRecords(agentId, 12)
  const stored = await run(inner.get(agentId, ["e0"]))
  expect(stored[0]!.summary.startsWith(SEALED_TEXT)).toBe(true)

  // Another process: none of these keys is in its memory at first.
  const reader = await keysOf("reader")
  const store = sealedLongTermStore(inner, reader.keys)
  // In the order, and with the scores, the store itself answers.
  const found = await run(inner.searchDense(agentId, MODEL, QUERY, 12))
  const textOf = new Map(texts(written).map((t) => [t.entryId, t]))
  const expected = found.map((h) => textOf.get(h.payload.entryId)!)
  expect(expected).toHaveLength(12)
  const firstSearch = await run(store.searchDense(agentId, MODEL, QUERY, 12))
  expect(texts(firstSearch.map((h) => h.payload))).toEqual(expected)
  expect(firstSearch.map((h) => h.score)).toEqual(found.map((h) => h.score))
  // Written out (a log line, an answer), a record carries its texts opened and every other field as stored.
  const { payload: e0 } = firstSearch.find((h) => h.payload.entryId === "e0")!
  expect(JSON.parse(JSON.stringify(e0))).toEqual({ ...written[0], summary: "summary of entry 0" })
  // Now every key is in memory.
  expect(texts((await run(store.searchDense(agentId, MODEL, QUERY, 12))).map((h) => h.payload))).toEqual(expected)
  const ids = ["e7", "e2", "e11"]
  expect(texts(await run(store.get(agentId, ids)))).toEqual(ids.map((id) => textOf.get(id)))

  // e3 is forgotten: its key destroyed in the store and dropped from the reader's memory.
  await destroyContentKeys(reader.nc, entryForgotten(agentId, "e3", "forget-e3"))
  reader.keys.evict(agentId, "e3")
  const withoutE3 = expected.filter((e) => e.entryId !== "e3")
  expect(texts((await run(store.searchDense(agentId, MODEL, QUERY, 12))).map((h) => h.payload))).toEqual(withoutE3)
  expect(texts(await run(store.get(agentId, ["e2", "e3", "e4"])))).toEqual([textOf.get("e2"), textOf.get("e4")])
})

it("leaves out a record whose key is destroyed after the reader's memory let the key go for room", async () => {
  const agentId = "sealed-small-reader"
  const { inner, written } = await sealedRecords(agentId, 8)
  // A process that keeps four keys in memory: e0's is read, then let go for room as six others are read.
  const { nc, store: keys } = await processKeyStore(server.url, "small-reader", { cachedKeys: 4 })
  connections.push(nc)
  const store = sealedLongTermStore(inner, keys)
  expect(texts(await run(store.get(agentId, ["e0"])))).toEqual(texts([written[0]!]))
  expect(texts(await run(store.get(agentId, ["e0"])))).toEqual(texts([written[0]!]))
  for (let i = 1; i <= 6; i++) await keys.forRead({ agentId, entryId: `e${i}` })
  expect(keys.cached({ agentId, entryId: "e0" })).toBeUndefined()

  await destroyContentKeys(nc, entryForgotten(agentId, "e0", "forget-small-e0"))
  keys.evict(agentId, "e0")
  expect(await run(store.get(agentId, ["e0", "e1"]))).toEqual(
    expect.not.arrayContaining([expect.objectContaining({ entryId: "e0" })]),
  )
  const found = (await run(store.searchDense(agentId, MODEL, QUERY, 8))).map((h) => h.payload.entryId)
  expect(found).not.toContain("e0")
  expect(found).toContain("e1")
})
