/**
 * Old logs always replay. `test/fixtures/v1-log.jsonl` is a log written by
 * the first schema version of every event (registrations, records, steps,
 * reads, references, fading to rungs 1 and 2 and out of working, cues
 * promoted and dropped, a forget tombstone); `v1-log.expected.json` is what
 * the live services held at its end. Replayed into a fresh stream through
 * the one decoder and the production reducers, it gives the same working
 * views and the same long-term records.
 */
import { readFileSync } from "node:fs"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { jetstream } from "@nats-io/jetstream"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startNatsServer, type NatsServerProcess } from "../infra/nats-server.ts"
import { embeddedStoreLayer } from "../services/longterm/embedded-store.ts"
import { LongTerm, type LongTermShape } from "../services/longterm/longterm.ts"
import { LongTermStore, type LongTermStoreShape } from "../services/longterm/store.ts"
import { foundation } from "../services/system.ts"
import { readRecords, rebuildViews } from "./faults/support/audit.ts"
import { settingsFor } from "./faults/support/services.ts"
import { comparableView, readFixture, V1_EXPECTED, V1_LOG } from "./fixtures/v1-log.ts"

let server: NatsServerProcess
let nc: NatsConnection
let runtime: ManagedRuntime.ManagedRuntime<LongTerm | LongTermStore, unknown>
let lastSeq = 0
const expected = JSON.parse(readFileSync(V1_EXPECTED, "utf8")) as { views: Record<string, unknown>; longTerm: unknown[] }

beforeAll(async () => {
  server = await startNatsServer()
  const store = embeddedStoreLayer
  runtime = ManagedRuntime.make(
    Layer.merge(LongTerm.layer({ durable: false }).pipe(Layer.provide(Layer.merge(store, foundation(settingsFor(server.url)("wm-memory"))))), store) as Layer.Layer<
      LongTerm | LongTermStore,
      unknown
    >,
  )
  await runtime.runPromise(Effect.void)
  nc = await connect({ servers: server.url })
  const js = jetstream(nc)
  for (const record of readFixture(V1_LOG)) lastSeq = (await js.publish(record.subject, JSON.stringify(record.data))).seq
})
afterAll(async () => {
  await nc?.close()
  await runtime?.dispose()
  await server?.stop()
})

describe("a v1 log", () => {
  it("decodes, every record of it", async () => {
    const records = await readRecords(server.url)
    expect(records).toHaveLength(lastSeq)
    expect(records.filter((r) => r.event === undefined).map((r) => r.seq)).toEqual([])
  })

  it("folds into the working views the live services held", async () => {
    const views = rebuildViews(await readRecords(server.url))
    for (const [agentId, view] of Object.entries(expected.views)) expect(comparableView(views.get(agentId)!), agentId).toEqual(view)
  })

  it("projects into the long-term records the live store held", async () => {
    const longTerm = (await runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>))
    await runtime.runPromise(longTerm.waitFor(lastSeq))
    const store = await runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
    const records = await Effect.runPromise(store.list({}))
    expect(records.length).toBeGreaterThan(0)
    expect(records).toEqual(expected.longTerm)
  })
})
