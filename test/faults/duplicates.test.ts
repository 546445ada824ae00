/**
 * Redelivery and duplicates. Every stored event is published again, first
 * with its own id (JetStream's dedupe must drop it), then with another id,
 * as a duplicate that slipped past dedupe would be stored. The second copy
 * must change nothing in any view (working, gateway, fade), and every
 * service must keep serving: budgets, records, steps and fading still work.
 */
import { jetstream } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventSubject } from "../../contracts/subjects.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import type { NatsServerProcess } from "../../infra/nats-server.ts"
import type { WorkingMemoryClient } from "../../sdk/client.ts"
import type { FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import type { GatewayShape } from "../../services/gateway/gateway.ts"
import type { WorkingShape } from "../../services/working/working.ts"
import { eventually } from "../support/eventually.ts"
import { entryRecordCounts, readRecords, rebuildViews, snapshotOf, streamLastSeq, waitQuiet } from "./support/audit.ts"
import { recordFigures } from "./support/figures.ts"
import { type CoreSystem, type InProcess, startCoreSystem } from "./support/services.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 6, 1, 9)
const AGENTS = ["dup-a", "dup-b"]

let server: NatsServerProcess
let services: InProcess<unknown>
let client: WorkingMemoryClient
let nc: NatsConnection
let working: WorkingShape
let gateway: GatewayShape
let fade: FadeWorkerShape

let system: CoreSystem
beforeAll(async () => {
  system = await startCoreSystem()
  ;({ server, services, working, gateway, fade, client, nc } = system)
})
afterAll(() => system?.stop())

/** Evaluates until nothing moves any more. */
const settle = async (agentId: string) => {
  for (let i = 0; i < 50; i++) {
    const run = await services.runtime.runPromise(fade.evaluate(agentId))
    if (run.applied === 0 && run.conflicts === 0) return
  }
  throw new Error(`${agentId} did not settle`)
}

/** What a view remembers, without the log positions it was folded at. */
const memoryOf = (view: AgentView | undefined) => {
  const snapshot = snapshotOf(view)
  if (snapshot === undefined) return undefined
  const { lastSeq: _lastSeq, ...rest } = snapshot
  const strip = <E extends { lastEventSeq: number }>(e: E) => ({ ...e, lastEventSeq: 0 })
  return { ...rest, entries: rest.entries.map(strip), cues: rest.cues.map(strip) }
}

const views = () => ({
  working: (id: string) => working.view(id),
  gateway: (id: string) => gateway.view(id),
  fade: (id: string) => fade.view(id),
})

const applied = () => [working.appliedSeq(), gateway.appliedSeq()]

/** Waits until every projection has applied the log to its end, then compares each live view with the rebuild. */
const settledAndRebuilt = async () => {
  const last = await waitQuiet(server.url, applied)
  const records = await readRecords(server.url)
  const rebuilt = rebuildViews(records, last)
  for (const id of AGENTS) {
    const expected = rebuilt.get(id)!
    // The fade worker has no global position: wait until it folded this agent's last event.
    await eventually(`fade view of ${id} at ${expected.lastSeq}`, () =>
      fade.view(id)?.lastSeq === expected.lastSeq ? true : undefined,
    )
    for (const [name, get] of Object.entries(views())) {
      expect(snapshotOf(get(id)), `${name} view of ${id} equals the rebuild at ${last}`).toEqual(snapshotOf(expected))
    }
  }
  return { last, records, rebuilt }
}

const activity = async (agentId: string) => {
  const agent = client.agent(agentId)
  await agent.register({ role: "custom", budget: 600 })
  const ids: string[] = []
  for (let i = 0; i < 30; i++) {
    const r = await agent.record({
      requestId: `${agentId}-r${i}`,
      origin: i % 3 === 0 ? "INTERNAL" : "USER",
      content: `Item ${i}: the vendor confirmed delivery window ${i}. Keep the receipt for the audit.`,
      timestamp: T0 + i * 10 * MINUTE,
      tags: i % 4 === 0 ? ["important"] : [],
      emotionalWeight: (i % 5) / 5,
    })
    ids.push(r.entryId)
    if (i % 10 === 9) {
      const { stepId } = await agent.beginStep({ requestId: `${agentId}-s${i}`, focus: { task: `batch ${i}` } })
      const built = await client.call(agentId, "buildContext", {
        stepId,
        requestId: `${agentId}-b${i}`,
        afterSeq: agent.lastSeq,
      })
      const used = built.items.slice(-2).map((item) => item.entryId)
      if (used.length > 0) await agent.reference(stepId, used)
      await agent.endStep(stepId)
      await settle(agentId)
    }
  }
  await agent.retuneBudget(700)
  await agent.enterHyperfocus()
  await agent.buildContext()
  await agent.exitHyperfocus()
  await agent.setFocus({ focus: { task: "close the quarter" }, taskKind: "planning" })
  await settle(agentId)
  return ids
}

describe("duplicates", () => {
  it("change nothing the second time, whether deduplicated by id or slipped past it", async () => {
    for (const id of AGENTS) await activity(id)
    const before = await settledAndRebuilt()
    const memoryBefore = new Map(AGENTS.map((id) => [id, memoryOf(before.rebuilt.get(id))]))
    const originals = before.records.filter((r) => r.event !== undefined && AGENTS.includes(r.event.agentId))
    const byTag = new Map<string, number>()
    for (const r of originals) byTag.set(r.event!._tag, (byTag.get(r.event!._tag) ?? 0) + 1)
    expect(byTag.get("RungChanged") ?? 0, "the fade worker moved entries before the duplicates").toBeGreaterThan(0)
    expect(byTag.get("EntryDemoted") ?? 0).toBeGreaterThan(0)
    expect(byTag.get("EntriesRead") ?? 0).toBeGreaterThan(0)
    expect(byTag.get("EntriesReferenced") ?? 0).toBeGreaterThan(0)

    // 1. The same events again with their own ids: JetStream stores none of them.
    const js = jetstream(nc)
    let sameIdStored = 0
    let sameIdDuplicate = 0
    for (const r of originals) {
      const ack = await js.publish(r.subject, r.data, { msgID: r.event!.eventId })
      if (ack.duplicate) sameIdDuplicate++
      else sameIdStored++
    }
    // ...and the same requests again through the API, with their request ids.
    const again = await client.agent("dup-a").record({
      requestId: "dup-a-r3",
      origin: "INTERNAL",
      content: "Item 3: the vendor confirmed delivery window 3. Keep the receipt for the audit.",
      timestamp: T0 + 30 * MINUTE,
      emotionalWeight: 0.6,
    })
    // A retry repeats its request: the step the build was for (its step id is the begin's request id).
    const rebuild = await client.call("dup-a", "buildContext", { requestId: "dup-a-b9", stepId: "dup-a-s9" })
    expect(sameIdStored).toBe(0)
    expect(sameIdDuplicate).toBe(originals.length)
    expect(again.duplicate).toBe(true)
    expect(again.entryId).toBe("dup-a-r3")
    expect(rebuild.seq).toBe(before.records.find((r) => r.event?.eventId === "dup-a:buildContext:dup-a-b9")?.seq)
    expect(await streamLastSeq(server.url)).toBe(before.last)

    // 2. Every event again under another id: stored, in log order, after everything else.
    let redelivered = 0
    for (const r of originals) {
      const ack = await js.publish(eventSubject(r.event!), r.data, { msgID: `${r.event!.eventId}#redelivered` })
      if (!ack.duplicate) redelivered++
    }
    expect(redelivered).toBe(originals.length)
    const after = await settledAndRebuilt()
    expect(after.last).toBe(before.last + originals.length)
    const counts = entryRecordCounts(after.records)
    for (const id of AGENTS) {
      const entriesInLog = [...counts].filter(([k]) => k.startsWith(`${id}/`))
      expect(entriesInLog.length).toBe(30)
      expect(
        entriesInLog.every(([, n]) => n === 2),
        "each entry's record is in the log twice now",
      ).toBe(true)
      for (const [name, get] of Object.entries(views())) {
        const view = get(id)!
        expect(view.entryCount, `${name} ${id} entry count`).toBe(30)
        expect(memoryOf(view), `${name} view of ${id} is unchanged by the duplicates`).toEqual(memoryBefore.get(id))
      }
    }

    // 3. Every service keeps serving on the same agents.
    const agent = client.agent("dup-a")
    const retuned = await agent.retuneBudget(650)
    expect(retuned.budget).toBe(650)
    const fresh: string[] = []
    for (let i = 0; i < 12; i++) {
      fresh.push(
        (
          await agent.record({
            origin: "USER",
            content: `Fresh remark ${i} about the quarterly close and its many details.`,
            timestamp: T0 + (400 + i) * 10 * MINUTE,
          })
        ).entryId,
      )
    }
    const { stepId } = await agent.beginStep()
    await agent.buildContext({ stepId })
    await agent.reference(stepId, [fresh[0]!])
    await agent.endStep(stepId)
    const conflictsBefore = fade.stats().conflicts
    await settle("dup-a")
    const final = await settledAndRebuilt()
    const fadeMovesAfter = final.records.filter(
      (r) => r.seq > after.last && (r.event?._tag === "RungChanged" || r.event?._tag === "EntryDemoted"),
    ).length
    expect(fadeMovesAfter, "fading still moves entries after the duplicates").toBeGreaterThan(0)
    expect(fade.stats().conflicts - conflictsBefore, "no fade decision refused for a stale position").toBe(0)
    expect(final.rebuilt.get("dup-a")!.entryCount).toBe(42)

    recordFigures("duplicates", {
      eventsInLog: before.last,
      republishedSameId: originals.length,
      storedSameId: sameIdStored,
      duplicateAcks: sameIdDuplicate,
      republishedOtherId: redelivered,
      eventsByType: Object.fromEntries(byTag),
      entriesBefore: AGENTS.map((id) => before.rebuilt.get(id)!.entryCount),
      entriesAfter: AGENTS.map((id) => after.rebuilt.get(id)!.entryCount),
      viewsEqualBeforeAfter: true,
      viewsEqualRebuild: true,
      fadeMovesAfterDuplicates: fadeMovesAfter,
      fadeConflictsAfterDuplicates: fade.stats().conflicts - conflictsBefore,
    })
  })
})
