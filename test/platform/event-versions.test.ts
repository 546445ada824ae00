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
import { jetstream } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { decodeEvent } from "../../contracts/decode.ts"
import { NotCaughtUp, Unavailable } from "../../contracts/errors.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { agentStepSubject, upgradeLegacySubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { NoResponse, WorkingMemoryClient } from "../../sdk/client.ts"
import { followOwnEvents, type OwnEvent, readOwnEvents } from "../../sdk/own-events.ts"
import { LongTerm, type LongTermShape } from "../../services/memory/longterm/longterm.ts"
import { LongTermStore, type LongTermStoreShape } from "../../services/memory/longterm/store.ts"
import { workingService } from "../../services/system.ts"
import { readRecords, rebuildViews } from "../faults/support/audit.ts"
import { gatewayLayer, gatewayOf, settingsFor, startInProcess } from "../faults/support/services.ts"
import { comparableView, readFixture, V1_EXPECTED, V1_LOG } from "../fixtures/v1-log.ts"
import { eventually } from "../support/eventually.ts"
import { startLongTermAlone } from "../support/longterm.ts"

let server: NatsServerProcess
let nc: NatsConnection
let runtime: ManagedRuntime.ManagedRuntime<LongTerm | LongTermStore, unknown>
let lastSeq = 0
const expected = JSON.parse(readFileSync(V1_EXPECTED, "utf8")) as {
  views: Record<string, unknown>
  longTerm: unknown[]
}

beforeAll(async () => {
  server = await startNatsServer()
  runtime = await startLongTermAlone(server.url)
  nc = await connect({ servers: server.url })
  const js = jetstream(nc)
  for (const record of readFixture(V1_LOG))
    lastSeq = (await js.publish(upgradeLegacySubject(record.subject) ?? record.subject, JSON.stringify(record.data)))
      .seq
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
    for (const [agentId, view] of Object.entries(expected.views))
      expect(comparableView(views.get(agentId)!), agentId).toEqual(view)
  })

  it("projects into the long-term records the live store held", async () => {
    const longTerm = await runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>)
    await runtime.runPromise(longTerm.waitFor(lastSeq))
    const store = await runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
    const records = await Effect.runPromise(store.list({}))
    expect(records.length).toBeGreaterThan(0)
    expect(records).toEqual(expected.longTerm)
  })
})

describe("the decoder", () => {
  const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))
  const v1Demotion = () => {
    const line = readFixture(V1_LOG).find((r) => (r.data as { _tag: string })._tag === "EntryDemoted")!
    return line.data as Record<string, unknown>
  }

  it("upcasts a v1 EntryDemoted to the current version, without the record facts it never carried", () => {
    const stored = v1Demotion()
    expect(stored.v).toBe(1)
    const decoded = decodeEvent(bytes(stored))
    expect(
      decoded.ok && decoded.event._tag === "EntryDemoted" && { v: decoded.event.v, entry: decoded.event.entry },
    ).toEqual({ v: 2, entry: null })
  })

  it("reads the current version as it is", () => {
    const entry = {
      timestamp: 1,
      origin: "USER",
      correlationId: null,
      tags: [],
      moodSnapshot: null,
      emotionalWeight: 0,
      rawTokens: 5,
      keyPoints: null,
      summary: { text: "s", tokens: 2 },
      citationCount: 0,
    }
    const decoded = decodeEvent(bytes({ ...v1Demotion(), v: 2, entry }))
    expect(decoded.ok && decoded.event._tag === "EntryDemoted" && decoded.event.entry).toEqual(entry)
  })

  it("names a newer version than it reads as a FutureEventVersion, not as a broken record", () => {
    const decoded = decodeEvent(bytes({ ...v1Demotion(), v: 3 }))
    expect(decoded.ok).toBe(false)
    if (decoded.ok) return
    expect(decoded.future).toMatchObject({
      _tag: "FutureEventVersion",
      eventType: "EntryDemoted",
      version: 3,
      understood: 2,
    })
    expect(decoded.reason).toMatch(/^v: schema version 3 of EntryDemoted is newer than this code reads \(up to 2\)/)
  })

  it("refuses a version that never existed, naming the field", () => {
    for (const v of [0, -1, 1.5, "1", null]) {
      const decoded = decodeEvent(bytes({ ...v1Demotion(), v }))
      expect(decoded.ok === false && decoded.future === undefined && decoded.reason).toMatch(
        /^v: unsupported schema version/,
      )
    }
  })
})

describe("the SDK's own-events reader", () => {
  it("upcasts old events like the services, and a newer event stops the reader loudly, not skipped", async () => {
    // The mirror is fed by the working service (`view.events`); it must be running before the newer event lands,
    // since a service whose warm-up meets one does not start.
    const working = ManagedRuntime.make(workingService(settingsFor(server.url)("wm-working")))
    const client = await WorkingMemoryClient.connect({ servers: server.url })
    try {
      await working.runPromise(Effect.void)
      const old = await readOwnEvents(client, "fx-planner")
      const demoted = old.filter((e) => e.event._tag === "EntryDemoted")
      expect(demoted.length).toBeGreaterThan(0)
      expect(demoted.every((e) => e.event.v === 2)).toBe(true)

      const js = jetstream(nc)
      const envelope = { eventId: "fut-1", agentId: "fx-critic", at: 1, causationId: null, correlationId: null }
      const newer = await js.publish(
        agentStepSubject("fx-critic"),
        JSON.stringify({ _tag: "StepStarted", v: 9, ...envelope, stepId: "s", focus: null }),
      )
      await js.publish(
        agentStepSubject("fx-critic"),
        JSON.stringify({ _tag: "StepEnded", v: 1, ...envelope, eventId: "fut-2", stepId: "s" }),
      )
      // The service stopped just before the newer event: the reader is refused, it is not handed a history with a hole.
      await expect(readOwnEvents(client, "fx-critic", { fromSeq: newer.seq })).rejects.toBeInstanceOf(NotCaughtUp)

      const live: OwnEvent[] = []
      const refused = await new Promise<unknown>((resolve) => {
        void followOwnEvents(client, "fx-critic", { onEvent: (e) => live.push(e), onError: resolve, waitMs: 200 })
      })
      expect(refused).toBeInstanceOf(NotCaughtUp)
      expect(live.every((e) => e.seq < newer.seq)).toBe(true)
    } finally {
      await client.close()
      await working.dispose()
    }
  })
})

describe("a gateway past an event newer than it reads", () => {
  it("refuses every write for the agents of that partition, naming the upgrade, and decides for the others", async () => {
    // A log of its own: a service whose warm-up meets a newer event does not start, and the other tests start some.
    const own = await startNatsServer()
    const gateway = await startInProcess(gatewayLayer(own.url))
    const client = await WorkingMemoryClient.connect({ servers: own.url, timeoutMs: 2_000, attempts: 1 })
    const owned = await connect({ servers: own.url })
    try {
      const stale = "gw-stale"
      const fresh = ["gw-fresh-0", "gw-fresh-1", "gw-fresh-2"].find((id) => partitionOf(id) !== partitionOf(stale))!
      for (const id of [stale, fresh]) await client.agent(id).register({ role: "main" })
      const envelope = { eventId: "fut-gw", agentId: stale, at: 1, causationId: null, correlationId: null }
      const newer = await jetstream(owned).publish(
        agentStepSubject(stale),
        JSON.stringify({ _tag: "StepStarted", v: 9, ...envelope, stepId: "s", focus: null }),
      )
      const shape = await gatewayOf(gateway)
      await eventually("the gateway to stop at the newer event", () =>
        shape.halted(stale)?.seq === newer.seq ? true : undefined,
      )

      const refused = await client
        .agent(stale)
        .record({ origin: "USER", content: "decided on a stale view" })
        .then(
          () => null,
          (error: unknown) => error,
        )
      // Unavailable is what the SDK retries (an upgraded replica may take the partition); after its attempts it says so.
      expect(refused).toBeInstanceOf(NoResponse)
      const cause = (refused as NoResponse).cause
      expect(cause).toBeInstanceOf(Unavailable)
      expect((cause as Unavailable).reason).toMatch(
        new RegExp(
          `^this gateway stopped before seq ${newer.seq} of the log: StepStarted v9 is newer than it reads .*; upgrade the gateway$`,
        ),
      )
      await expect(client.agent(stale).beginStep({})).rejects.toBeInstanceOf(NoResponse)
      // The other partition is unaffected.
      expect((await client.agent(fresh).record({ origin: "USER", content: "still decided" })).entryId).toBeTypeOf(
        "string",
      )
      const after = (await readRecords(own.url)).filter((r) => r.seq > newer.seq && r.event?.agentId === stale)
      expect(after).toEqual([])
    } finally {
      await owned.close()
      await client.close()
      await gateway.stop()
      await own.stop()
    }
  })
})
