/**
 * The long-term projection's writer: a store that fails for a while loses
 * nothing — every write is retried until it is stored, and only then does
 * the projection count it (and move any checkpoint) past it.
 */

import { readFileSync } from "node:fs"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, expect, it, vi } from "vitest"
import { CHECKPOINT_BUCKET, checkpointKey } from "../../contracts/buckets.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import {
  DEAD_LETTER_STREAM,
  deadLetterSubject,
  EVENTS_STREAM,
  entrySubject,
  upgradeLegacySubject,
} from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { makeEmbeddedStore } from "../../services/memory/longterm/embedded-store.ts"
import { LongTerm, type LongTermShape } from "../../services/memory/longterm/longterm.ts"
import { LongTermStore, LongTermStoreError, type LongTermStoreShape } from "../../services/memory/longterm/store.ts"
import { foundation } from "../../services/system.ts"
import { settingsFor } from "../faults/support/services.ts"
import { readFixture, V1_EXPECTED, V1_LOG } from "../fixtures/v1-log.ts"
import { eventually } from "../support/eventually.ts"

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

it("a record the store refuses as it is is dead-lettered with the store's reason; the rest are stored and waits end", async () => {
  vi.spyOn(console, "error").mockImplementation(() => {})
  const expected = (JSON.parse(readFileSync(V1_EXPECTED, "utf8")) as { longTerm: Array<{ entryId: string }> }).longTerm
  const victim = expected[Math.floor(expected.length / 2)]!.entryId
  const inner = makeEmbeddedStore()
  let refusals = 0
  const refusing: LongTermStoreShape = {
    ...inner,
    upsert: (records) =>
      Effect.suspend(() => {
        if (!records.some((r) => r.payload.entryId === victim)) return inner.upsert(records)
        refusals++
        return Effect.fail(new LongTermStoreError({ reason: "vector of size 3, collection has 256", refused: true }))
      }),
  }
  const runtime = ManagedRuntime.make(
    LongTerm.everyPartition({ durable: false }).pipe(
      Layer.provide(
        Layer.merge(Layer.succeed(LongTermStore, refusing), foundation(settingsFor(server.url)("wm-memory-refusing"))),
      ),
    ) as Layer.Layer<LongTerm, unknown>,
  )
  try {
    const longTerm = await runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>)
    const last = (await jetstreamManager(nc).then((m) => m.streams.info(EVENTS_STREAM))).state.last_seq
    await runtime.runPromise(longTerm.waitFor(last, "20 seconds"))
    expect(refusals).toBeGreaterThan(0)
    expect(await Effect.runPromise(inner.list({}))).toEqual(expected.filter((r) => r.entryId !== victim))
    const jsm = await jetstreamManager(nc)
    const letter = await jsm.streams.getMessage(DEAD_LETTER_STREAM, {
      last_by_subj: deadLetterSubject(`longterm-${inner.name}`),
    })
    const body = letter!.json<{ seq: number; subject: string; reason: string; payload: string }>()
    expect(body.reason).toBe("the store refused the record: vector of size 3, collection has 256")
    expect(body.subject).toContain(`.entry.${victim}`)
    expect(JSON.parse(body.payload)).toMatchObject({ entryId: victim })
  } finally {
    await runtime.dispose()
    vi.restoreAllMocks()
  }
})

it("a checkpoint the bucket did not take is written again once it can be, though no later event comes", async () => {
  vi.spyOn(console, "error").mockImplementation(() => {})
  // A shared store without checkpoints of its own (as Qdrant): the projection keeps them in the bucket.
  const shared: LongTermStoreShape = { ...makeEmbeddedStore(), name: "bucket-checkpointed", shared: true }
  const runtime = ManagedRuntime.make(
    LongTerm.everyPartition({ durable: true }).pipe(
      Layer.provide(
        Layer.merge(Layer.succeed(LongTermStore, shared), foundation(settingsFor(server.url)("wm-memory"))),
      ),
    ) as Layer.Layer<LongTerm, unknown>,
  )
  const checkpointOf = async (partition: number) => {
    const entry = await (await new Kvm(nc).open(CHECKPOINT_BUCKET)).get(
      checkpointKey(`longterm-bucket-checkpointed.p${partition}`),
    )
    return entry === null ? 0 : Number(entry.string())
  }
  try {
    const longTerm = await runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>)
    const js = jetstream(nc)
    const agent = "checkpointed"
    const first = (await js.publish(entrySubject(agent, "e1"), "not an event")).seq
    await runtime.runPromise(longTerm.waitFor(first))
    await eventually("the first checkpoint", async () => (await checkpointOf(partitionOf(agent))) >= first)

    // The bucket is gone while the next record is stored: its checkpoint cannot be written.
    const jsm = await jetstreamManager(nc)
    await jsm.streams.delete(`KV_${CHECKPOINT_BUCKET}`)
    const second = (await js.publish(entrySubject(agent, "e2"), "not an event either")).seq
    await runtime.runPromise(longTerm.waitFor(second))
    await new Promise((r) => setTimeout(r, 1_500))
    await new Kvm(nc).create(CHECKPOINT_BUCKET)
    // Nothing more is published: the writer, idle, writes the checkpoint again by itself.
    await eventually("the checkpoint written again", async () => (await checkpointOf(partitionOf(agent))) >= second)
  } finally {
    await runtime.dispose()
    vi.restoreAllMocks()
  }
})
