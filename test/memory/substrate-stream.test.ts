/**
 * The substrate serves each entry's raw text from the event log itself —
 * the first message on the entry's subject — and writes nothing of its own:
 * no `wm_substrate` bucket, no checkpoint. A fresh, a faded and a long since
 * demoted entry read back alike; an unknown or forgotten one is
 * UnknownEntries; a restarted substrate answers at once. A deployment
 * upgraded from a version that kept the bucket has the forgotten records
 * erased from it, and its stale substrate checkpoint holds no forget up.
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { CHECKPOINT_BUCKET, checkpointKey, LEGACY_SUBSTRATE_BUCKET } from "../../contracts/buckets.ts"
import type { EventOf } from "../../contracts/events.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import { decideForget } from "../../domain/forget.ts"
import type { AgentClient } from "../../sdk/client.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { FILLER_TURNS } from "../support/fillers.ts"
import { appendEvents, readLog } from "../support/log.ts"
import { filesHolding } from "../support/store-files.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const run = promisify(execFile)
const MINUTE = 60_000
const T0 = Date.UTC(2024, 5, 3, 8)
const LEGACY_STREAM = `KV_${LEGACY_SUBSTRATE_BUCKET}`

let system: TestSystem
let admin: NatsConnection
beforeAll(async () => {
  system = await startTestSystem()
  admin = await connect({ servers: system.server.url })
}, 60_000)
afterAll(async () => {
  await admin?.close()
  await system?.stop()
})

const wm = (...args: string[]) =>
  run("node_modules/.bin/node", ["cli/wm.ts", ...args, "--server", system.server.url], { cwd: process.cwd() })

const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error,
  )

/** Whether the legacy bucket's stream exists, and how many messages it holds. */
const legacyMessages = async (): Promise<number | null> =>
  (await jetstreamManager(admin)).streams.info(LEGACY_STREAM).then(
    (info) => info.state.messages,
    () => null,
  )

const recordedEvent = async (entryId: string) =>
  (await readLog(system.server.url)).find((s) => s.event._tag === "EntryRecorded" && s.event.entryId === entryId) as
    | { seq: number; event: EventOf<"EntryRecorded"> }
    | undefined

const entryOf = async (agent: AgentClient, entryId: string) =>
  (await agent.view()).entries.find((e) => e.id === entryId)

describe("getRaw from the event log", () => {
  let agent: AgentClient
  const clock = steppingClock(T0, MINUTE)
  beforeAll(async () => {
    agent = system.client.agent("streamed")
    await agent.register({ role: "custom", budget: 200 })
  })

  it("a fresh entry reads back at once, every field as recorded and its seq the EntryRecorded's", async () => {
    const { entryId } = await agent.record({
      origin: "USER",
      content: "The harbour pilot boards at the outer buoy at dawn.",
      tags: ["harbour", "pilot"],
      correlationId: "voyage-7",
      timestamp: clock.next(),
    })
    const raw = await agent.raw(entryId)
    const stored = await recordedEvent(entryId)
    expect(stored).toBeDefined()
    const e = stored!.event
    expect(raw).toEqual({
      agentId: "streamed",
      entryId,
      timestamp: e.timestamp,
      origin: "USER",
      content: "The harbour pilot boards at the outer buoy at dawn.",
      tags: ["harbour", "pilot"],
      correlationId: "voyage-7",
      moodSnapshot: e.moodSnapshot,
      emotionalWeight: e.emotionalWeight,
      tokens: e.tokens,
      seq: stored!.seq,
    })
  })

  it("an entry faded to its summary, and one long since demoted, read back their raw text", async () => {
    const content = "Our vegetable garden finally produced its first ripe courgettes after the long wet spring."
    const { entryId } = await agent.record({ origin: "USER", content, timestamp: clock.next() })
    let fillers = 0
    const more = async () => {
      await agent.record({
        origin: "USER",
        content: FILLER_TURNS[fillers % FILLER_TURNS.length]!,
        timestamp: clock.next(),
      })
      fillers++
    }
    // Faded to its summary (a RungChanged to rung 2 on its subject): working no longer holds the raw text.
    const fadedToSummary = async () =>
      (await readLog(system.server.url)).some(
        (s) => s.event._tag === "RungChanged" && s.event.entryId === entryId && s.event.to === 2,
      )
    while (!(await fadedToSummary())) {
      if (fillers > 60) throw new Error("the entry never faded to its summary")
      await more()
      await eventually("a fade pass", fadedToSummary, 1_000).catch(() => undefined)
    }
    // The view read waits for the log position of the fade; by then the entry is at rung 2, or already demoted.
    agent.lastSeq = Math.max(agent.lastSeq, ...(await readLog(system.server.url)).map((s) => s.seq))
    const faded = await entryOf(agent, entryId)
    if (faded !== undefined) expect(faded).toMatchObject({ rung: 2, content: null })
    expect((await agent.raw(entryId)).content).toBe(content)

    // Demoted, then buried under many later events.
    await eventually("the entry to demote", async () => {
      if ((await entryOf(agent, entryId)) === undefined) return true
      await more()
      return false
    })
    for (let i = 0; i < 30; i++) await more()
    expect(
      (await readLog(system.server.url)).some((s) => s.event._tag === "EntryDemoted" && s.event.entryId === entryId),
    ).toBe(true)
    const raw = await agent.raw(entryId)
    expect(raw.content).toBe(content)
    expect(raw.seq).toBe((await recordedEvent(entryId))!.seq)
  })

  it("an entry never recorded is UnknownEntries; one past the log's end is NotCaughtUp", async () => {
    expect(await failureOf(agent.raw("e-never-recorded"))).toMatchObject({
      _tag: "UnknownEntries",
      entryIds: ["e-never-recorded"],
    })
    const end = (await (await jetstreamManager(admin)).streams.info("WM_EVENTS")).state.last_seq
    expect(
      await failureOf(system.client.call("streamed", "getRaw", { entryId: "e-never-recorded", afterSeq: end + 1000 })),
    ).toMatchObject({ _tag: "NotCaughtUp", afterSeq: end + 1000, appliedSeq: end })
  })

  it("another agent's entry id is unknown to this agent", async () => {
    const other = system.client.agent("streamed-other")
    await other.register({ role: "main" })
    const { entryId } = await other.record({ origin: "USER", content: "Only the other agent knows this." })
    expect(await failureOf(agent.raw(entryId))).toMatchObject({ _tag: "UnknownEntries" })
    expect((await other.raw(entryId)).content).toBe("Only the other agent knows this.")
  })

  it("a forgotten entry is gone", async () => {
    const { entryId } = await agent.record({ origin: "USER", content: "The spare key is under the third flowerpot." })
    expect((await agent.raw(entryId)).content).toContain("third flowerpot")
    await wm("forget", "--agent", "streamed", "--entry", entryId)
    expect(await failureOf(agent.raw(entryId))).toMatchObject({ _tag: "UnknownEntries", entryIds: [entryId] })
  })

  it("nothing is copied: no wm_substrate bucket, no substrate checkpoint", async () => {
    expect((await readLog(system.server.url)).filter((s) => s.event._tag === "EntryRecorded").length).toBeGreaterThan(
      10,
    )
    expect(await legacyMessages()).toBeNull()
    const checkpoints = await new Kvm(admin).open(CHECKPOINT_BUCKET)
    expect(await checkpoints.get(checkpointKey("substrate"))).toBeNull()
  })

  it("a restarted substrate answers at once for entries recorded while it was down", async () => {
    const before = await agent.record({ origin: "USER", content: "The lighthouse keeper logs the wind at six." })
    await system.restartServices()
    // The first request after the restart, with no wait for any catch-up.
    expect((await agent.raw(before.entryId)).content).toBe("The lighthouse keeper logs the wind at six.")
  })
})

describe("a deployment upgraded from a version with the wm_substrate bucket", () => {
  // The forget waits for every projection to confirm (up to its --wait), then the store's bytes are checked: on
  // a machine loaded with other tests each can take far longer than the second they take alone.
  it("forgetting an agent erases its records from the bucket; the stale substrate checkpoint holds nothing up", {
    timeout: 150_000,
  }, async () => {
    const SECRET = "HERON4471BASALT"
    const agent = system.client.agent("upgraded")
    await agent.register({ role: "main" })
    const { entryId } = await agent.record({ origin: "USER", content: `The vault code is ${SECRET}.` })
    const stored = (await recordedEvent(entryId))!
    // What the version before left: the record in its bucket, and its checkpoint, which no longer moves.
    const kv = await new Kvm(admin).create(LEGACY_SUBSTRATE_BUCKET, { history: 1 })
    await kv.create(`upgraded.${entryId}`, JSON.stringify({ ...stored.event, seq: stored.seq }))
    await kv.create("kept.e-1", JSON.stringify({ content: "another agent's record" }))
    const checkpoints = await new Kvm(admin).open(CHECKPOINT_BUCKET)
    await checkpoints.put(checkpointKey("substrate"), "1")
    expect(await legacyMessages()).toBe(2)

    const report = JSON.parse((await wm("forget", "--agent", "upgraded", "--wait", "60", "--json")).stdout) as {
      complete: boolean
      pending: string[]
      confirmed: string[]
      erasedSubstrateRecords: number
    }
    expect(report).toMatchObject({ complete: true, pending: [] })
    // Erased by this command, or first by the eraser that runs beside the substrate: the record is gone either way.
    expect([0, 1]).toContain(report.erasedSubstrateRecords)
    expect(report.confirmed).not.toContain("substrate")
    expect(await legacyMessages()).toBe(1)
    expect((await kv.get("kept.e-1"))?.string()).toContain("another agent's record")
    await eventually(
      "no store file to hold it",
      () => filesHolding([system.server.storeDir], SECRET).length === 0,
      60_000,
    )
  })

  it("the eraser beside the substrate erases it too, for a tombstone no command finished", async () => {
    const SECRET = "EGRET9082SHALE"
    const agent = system.client.agent("upgraded-2")
    await agent.register({ role: "main" })
    const { entryId } = await agent.record({ origin: "USER", content: `The boathouse code is ${SECRET}.` })
    const kv = await new Kvm(admin).open(LEGACY_SUBSTRATE_BUCKET)
    await kv.create(`upgraded-2.${entryId}`, JSON.stringify({ content: `The boathouse code is ${SECRET}.` }))
    // Only the tombstone is stored, as a command cut off right after it leaves it: the eraser finds it and finishes.
    let view: AgentView | undefined
    for (const s of await readLog(system.server.url))
      if (s.event.agentId === "upgraded-2") view = evolve(view, s.event, s)
    const decision = decideForget(
      view,
      { entryId },
      {
        eventId: "upgraded-2:forget",
        agentId: "upgraded-2",
        at: Date.now(),
        causationId: "operator:forget",
        correlationId: null,
      },
    )
    if (!decision.ok) throw new Error(decision.error.message)
    await appendEvents(system.server.url, [decision.event])
    await eventually(
      "the eraser to finish the forget",
      () => filesHolding([system.server.storeDir], SECRET).length === 0,
    )
    expect(await kv.get(`upgraded-2.${entryId}`).then((e) => e?.operation ?? null)).not.toBe("PUT")
  })
})
