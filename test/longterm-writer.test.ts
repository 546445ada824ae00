/**
 * The long-term projection's writer: a store that fails for a while loses
 * nothing — every write is retried until it is stored, and only then does
 * the projection count it (and move any checkpoint) past it.
 */

import { readFileSync } from "node:fs"
import { jetstream } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, expect, it, vi } from "vitest"
import { upgradeLegacySubject } from "../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../infra/nats-server.ts"
import { makeEmbeddedStore } from "../services/memory/longterm/embedded-store.ts"
import { LongTerm, type LongTermShape } from "../services/memory/longterm/longterm.ts"
import { LongTermStore, LongTermStoreError, type LongTermStoreShape } from "../services/memory/longterm/store.ts"
import { foundation } from "../services/system.ts"
import { settingsFor } from "./faults/support/services.ts"
import { readFixture, V1_EXPECTED, V1_LOG } from "./fixtures/v1-log.ts"

let server: NatsServerProcess
let nc: NatsConnection
beforeAll(async () => {
  server = await startNatsServer()
  nc = await connect({ servers: server.url })
})
afterAll(async () => {
  await nc?.close()
  await server?.stop()
})

it("a store failing its first 12 writes still ends with every record, in log order", async () => {
  vi.spyOn(console, "error").mockImplementation(() => {})
  const inner = makeEmbeddedStore()
  let failures = 0
  const flaky: LongTermStoreShape = {
    ...inner,
    upsert: (records) =>
      Effect.suspend(() =>
        failures < 12 ? Effect.fail(new LongTermStoreError({ reason: `outage ${++failures}` })) : inner.upsert(records),
      ),
    remove: (agentId, ids) =>
      Effect.suspend(() =>
        failures < 12
          ? Effect.fail(new LongTermStoreError({ reason: `outage ${++failures}` }))
          : inner.remove(agentId, ids),
      ),
  }
  const store = Layer.succeed(LongTermStore, flaky)
  const runtime = ManagedRuntime.make(
    LongTerm.everyPartition({ durable: false }).pipe(
      Layer.provide(Layer.merge(store, foundation(settingsFor(server.url)("wm-memory")))),
    ) as Layer.Layer<LongTerm, unknown>,
  )
  try {
    const longTerm = await runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>)
    const js = jetstream(nc)
    let last = 0
    for (const record of readFixture(V1_LOG))
      last = (await js.publish(upgradeLegacySubject(record.subject) ?? record.subject, JSON.stringify(record.data))).seq
    await runtime.runPromise(longTerm.waitFor(last))
    expect(failures).toBe(12)
    const expected = (JSON.parse(readFileSync(V1_EXPECTED, "utf8")) as { longTerm: unknown[] }).longTerm
    expect(await Effect.runPromise(inner.list({}))).toEqual(expected)
  } finally {
    await runtime.dispose()
    vi.restoreAllMocks()
  }
})
