/**
 * Poison events in the middle of real traffic: garbage bytes, an invalid
 * schema version, a field of the wrong type, an unknown event type (and a
 * few more shapes of broken record) on the subjects of live agents. Every
 * projection — gateway, working, fade — dead-letters each of them on
 * `wm.dlq.<projection>` with the reason, applies everything else, and the
 * services keep serving.
 *
 * A record of a newer schema version than the services read is not poison
 * but a rolling upgrade: it is never skipped. Every projection stops just
 * before it, loudly, reads past it are refused, and a service started on
 * that log refuses to start.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { NotCaughtUp } from "../../contracts/errors.ts"
import {
  agentConfigSubject,
  agentStepSubject,
  DEAD_LETTER_STREAM,
  deadLetterSubject,
  entrySubject,
} from "../../contracts/subjects.ts"
import type { NatsServerProcess } from "../../infra/nats-server.ts"
import type { WorkingMemoryClient } from "../../sdk/client.ts"
import type { FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import type { GatewayShape } from "../../services/gateway/gateway.ts"
import type { DeadLetter } from "../../services/platform/log/projection.ts"
import type { WorkingShape } from "../../services/working/working.ts"
import { eventually } from "../support/eventually.ts"
import { entryRecordCounts, readRecords, rebuildViews, sleep, snapshotOf, waitQuiet } from "./support/audit.ts"
import { callUntilAnswered, contentFor, newStats, pool } from "./support/driver.ts"
import { recordFigures } from "./support/figures.ts"
import { type CoreSystem, startCoreSystem, startInProcess, workingLayer } from "./support/services.ts"

const AGENTS = ["px-0", "px-1", "px-2", "px-3"]
const RECORDS = 400
const PROJECTIONS = ["gateway", "working", "fade"] as const

let server: NatsServerProcess
let client: WorkingMemoryClient
let nc: NatsConnection
let working: WorkingShape
let gateway: GatewayShape
let fade: FadeWorkerShape

let system: CoreSystem
beforeAll(async () => {
  system = await startCoreSystem()
  ;({ server, working, gateway, fade, client, nc } = system)
})
afterAll(() => system?.stop())

interface Poison {
  readonly kind: string
  readonly subject: string
  readonly data: Uint8Array
  readonly reason: RegExp
}

const text = (s: string) => new TextEncoder().encode(s)
const envelope = (agentId: string, n: number) => ({
  v: 1,
  eventId: `poison-${n}`,
  agentId,
  at: 1,
  causationId: null,
  correlationId: null,
})

/** The n-th poison record, cycling through every kind, on the subjects of live agents. */
const poisonFor = (n: number): Poison => {
  const agentId = AGENTS[n % AGENTS.length]!
  const step = agentStepSubject(agentId)
  const entry = entrySubject(agentId, `poison-${n}`)
  switch (n % 8) {
    case 0:
      return {
        kind: "garbage bytes",
        subject: step,
        data: Uint8Array.from({ length: 64 }, (_, i) => (i * 37 + n) % 256),
        reason: /^not JSON/,
      }
    case 1:
      return {
        kind: "invalid version",
        subject: step,
        data: text(JSON.stringify({ _tag: "StepStarted", ...envelope(agentId, n), v: 0, stepId: "s", focus: null })),
        reason: /^v: unsupported schema version 0 of StepStarted/,
      }
    case 2:
      return {
        kind: "field of the wrong type",
        subject: entry,
        data: text(
          JSON.stringify({
            _tag: "EntryRecorded",
            ...envelope(agentId, n),
            entryId: `poison-${n}`,
            timestamp: "yesterday",
            origin: "USER",
            content: "c",
            tags: [],
            moodSnapshot: null,
            emotionalWeight: 0,
            tokens: 3,
          }),
        ),
        reason: /^timestamp: /,
      }
    case 3:
      return {
        kind: "unknown _tag",
        subject: step,
        data: text(JSON.stringify({ _tag: "Teleported", ...envelope(agentId, n) })),
        reason: /^_tag: unknown event type "Teleported"/,
      }
    case 4:
      return { kind: "empty payload", subject: step, data: new Uint8Array(0), reason: /^not JSON/ }
    case 5:
      return {
        kind: "JSON that is not an object",
        subject: step,
        data: text(`[1,2,${n}]`),
        reason: /^_tag: unknown event type undefined|^not a JSON object/,
      }
    case 6:
      return {
        kind: "missing field",
        subject: step,
        data: text(
          JSON.stringify({ _tag: "EntriesRead", ...envelope(agentId, n), stepId: null, budget: 100, tokens: 1 }),
        ),
        reason: /^served: /,
      }
    default:
      return {
        kind: "truncated JSON",
        subject: step,
        data: text(`{"_tag":"StepEnded","v":1,"eventId":"poison-${n}","agentId":"${agentId}"`),
        reason: /^not JSON/,
      }
  }
}

const deadLetters = async (projection: string, on: NatsConnection = nc): Promise<DeadLetter[]> => {
  const subject = deadLetterSubject(projection)
  const jsm = await jetstreamManager(on)
  const info = await jsm.streams.info(DEAD_LETTER_STREAM, { subjects_filter: subject })
  const count = info.state.subjects?.[subject] ?? 0
  const out: DeadLetter[] = []
  if (count === 0) return out
  const consumer = await jetstream(on).consumers.get(DEAD_LETTER_STREAM, { filter_subjects: subject })
  const messages = await consumer.consume()
  for await (const m of messages) {
    out.push(m.json<DeadLetter>())
    if (m.info.pending === 0) break
  }
  await messages.close()
  return out
}

it("a burst of poison mixed into real traffic is dead-lettered by every projection, which all keep going", async () => {
  for (const id of AGENTS) await client.agent(id).register({ role: "custom", budget: 2_000 })
  const stats = newStats()
  const js = jetstream(nc)
  const poisonSeqs = new Map<number, Poison>()
  const POISON = 64
  let acked = 0
  const started = Date.now()
  const records = pool(
    Array.from({ length: RECORDS }, (_, i) => i),
    8,
    async (i) => {
      const agentId = AGENTS[i % AGENTS.length]!
      const r = await callUntilAnswered(
        client,
        agentId,
        "recordEntry",
        { requestId: `px-${i}`, origin: "USER", content: contentFor(i) },
        stats,
      )
      if (r !== undefined) acked++
    },
  )
  const poison = (async () => {
    for (let n = 0; n < POISON; n++) {
      const p = poisonFor(n)
      poisonSeqs.set((await js.publish(p.subject, p.data)).seq, p)
      await sleep(n % 8 === 7 ? 20 : 1)
    }
  })()
  await Promise.all([records, poison])
  const ingestMillis = Date.now() - started

  // Every projection reaches the end of the log: nothing stalled on a poison record.
  const last = await waitQuiet(server.url, () => [working.appliedSeq(), gateway.appliedSeq()])
  const log = await readRecords(server.url)
  const undecodable = log.filter((r) => r.event === undefined).map((r) => r.seq)
  expect(undecodable.sort((a, b) => a - b)).toEqual([...poisonSeqs.keys()].sort((a, b) => a - b))
  const rebuilt = rebuildViews(log, last)

  const byProjection: Record<string, { deadLetters: number; reasonsMatched: number }> = {}
  for (const projection of PROJECTIONS) {
    const letters = await eventually(`${POISON} dead letters on ${deadLetterSubject(projection)}`, async () => {
      const found = await deadLetters(projection)
      return found.length >= POISON ? found : undefined
    })
    expect(letters.length, projection).toBe(POISON)
    let matched = 0
    for (const letter of letters) {
      const p = poisonSeqs.get(letter.seq)
      expect(p, `${projection} dead-lettered seq ${letter.seq}, not a poison record`).toBeDefined()
      expect(letter.projection).toBe(projection)
      expect(letter.subject).toBe(p!.subject)
      expect(letter.reason, `${projection}: ${p!.kind}`).toMatch(p!.reason)
      matched++
    }
    byProjection[projection] = { deadLetters: letters.length, reasonsMatched: matched }
  }

  // Every real entry was applied once, by every projection.
  expect(stats.failures).toEqual([])
  expect(acked).toBe(RECORDS)
  const counts = entryRecordCounts(log)
  expect([...counts.values()].filter((n) => n === 1).length).toBe(RECORDS)
  expect(counts.size).toBe(RECORDS)
  for (const id of AGENTS) {
    const expected = rebuilt.get(id)!
    expect(expected.entryCount).toBe(RECORDS / AGENTS.length)
    expect(snapshotOf(working.view(id))).toEqual(snapshotOf(expected))
    expect(snapshotOf(gateway.view(id))).toEqual(snapshotOf(expected))
    await eventually(`fade view of ${id}`, () => (fade.view(id)?.lastSeq === expected.lastSeq ? true : undefined))
    expect(snapshotOf(fade.view(id))).toEqual(snapshotOf(expected))
  }

  // And every service keeps serving the poisoned agents.
  const agent = client.agent("px-0")
  expect((await agent.retuneBudget(2_500)).budget).toBe(2_500)
  const fresh = await agent.record({ origin: "USER", content: "after the burst" })
  const { stepId } = await agent.beginStep()
  const built = await agent.buildContext({ stepId })
  expect(built.items.some((i) => i.entryId === fresh.entryId)).toBe(true)
  await agent.reference(stepId, [fresh.entryId])
  await agent.endStep(stepId)
  expect((await agent.view()).entries.find((e) => e.id === fresh.entryId)?.citationCount).toBe(1)

  // Garbage on the subject of an entry still in working: fading that entry is not blocked by it.
  const victim = [
    ...(await eventually("an entry of px-2 still in working", () => {
      const view = fade.view("px-2")
      return view === undefined ? undefined : view.entries
    })),
  ]
    .map(([, e]) => e)
    .sort((a, b) => a.ordinal - b.ordinal)[0]!
  const garbage = await js.publish(entrySubject("px-2", victim.id), text("\u0000 not an event"))
  const conflictsBefore = fade.stats().conflicts
  for (let i = 0; i < 40; i++)
    await client.agent("px-2").record({ origin: "USER", content: `Pressure ${i}: ${contentFor(i)}` })
  const end = await waitQuiet(server.url, () => [working.appliedSeq(), gateway.appliedSeq()])
  const finalLog = await readRecords(server.url)
  const victimMoved = finalLog.some(
    (r) =>
      r.seq > garbage.seq &&
      (r.event?._tag === "RungChanged" || r.event?._tag === "EntryDemoted") &&
      r.event.entryId === victim.id,
  )
  expect(victimMoved, `the entry ${victim.id} kept fading after garbage on its subject`).toBe(true)
  expect(fade.stats().conflicts - conflictsBefore).toBe(0)
  const finalViews = rebuildViews(finalLog, end)
  for (const id of AGENTS) {
    const expected = finalViews.get(id)!
    expect(snapshotOf(working.view(id))).toEqual(snapshotOf(expected))
    expect(snapshotOf(gateway.view(id))).toEqual(snapshotOf(expected))
    await eventually(`fade view of ${id}`, () => (fade.view(id)?.lastSeq === expected.lastSeq ? true : undefined))
    expect(snapshotOf(fade.view(id))).toEqual(snapshotOf(expected))
  }

  recordFigures("poison", {
    realRecordsSent: RECORDS,
    realRecordsAcknowledged: acked,
    realEntriesInLog: counts.size,
    duplicates: [...counts.values()].filter((n) => n > 1).length,
    poisonPublished: POISON,
    poisonKinds: [...new Set([...poisonSeqs.values()].map((p) => p.kind))],
    deadLetters: byProjection,
    logLastSeq: last,
    ingestMillis,
    viewsEqualRebuild: true,
    servingAfter: { retune: true, record: true, build: true, reference: true },
    entrySubjectPoison: {
      entry: victim.id,
      fadedAfter: victimMoved,
      fadeConflicts: fade.stats().conflicts - conflictsBefore,
    },
  })
})

it("a record of a newer schema version stops every projection just before it, loudly; nothing skips it", async () => {
  const future = await startCoreSystem()
  try {
    const agent = future.client.agent("fv-0")
    await agent.register({ role: "custom", budget: 2_000 })
    for (let i = 0; i < 3; i++) await agent.record({ origin: "USER", content: contentFor(i) })
    const before = await agent.view()
    // A replica of a newer release appended a BudgetChanged of version 2 (a rolling upgrade).
    const newer = await jetstream(future.nc).publish(
      agentConfigSubject("fv-0"),
      text(
        JSON.stringify({
          _tag: "BudgetChanged",
          ...envelope("fv-0", 1),
          v: 2,
          reason: "retune",
          baseBudget: 3_000,
          budget: 3_000,
          source: "v2",
        }),
      ),
    )
    const shapes = { gateway: future.gateway, working: future.working }
    for (const [name, shape] of Object.entries(shapes)) {
      const halt = await eventually(`${name} to stop at the newer record`, () => shape.halted() ?? undefined)
      expect(halt.seq, name).toBe(newer.seq)
      expect(halt.error._tag).toBe("FutureEventVersion")
      expect(halt.error).toMatchObject({ eventType: "BudgetChanged", version: 2, understood: 1 })
      // Not applied, not skipped, not dead-lettered: the position stays just before it (a partitioned
      // projection's idle partitions are known complete up to there within a tracker period).
      await eventually(`${name} at the position before it`, () =>
        shape.appliedSeq() >= newer.seq - 1 ? true : undefined,
      )
      expect(shape.appliedSeq(), name).toBe(newer.seq - 1)
      expect(
        (await deadLetters(name, future.nc)).some((l) => l.seq === newer.seq),
        name,
      ).toBe(false)
    }
    await eventually("the fade worker to stop at the newer record", () =>
      future.fade.view("fv-0")?.lastSeq === newer.seq - 1 ? true : undefined,
    )
    expect(future.fade.view("fv-0")!.budgetInForce).toBe(before.budget)
    // The working service refuses a read that needs the newer record, at once, naming where it stopped.
    const refused = await future.client.call("fv-0", "getView", { afterSeq: newer.seq }).then(
      () => null,
      (error: unknown) => error,
    )
    expect(refused).toBeInstanceOf(NotCaughtUp)
    expect(refused).toMatchObject({ afterSeq: newer.seq, appliedSeq: newer.seq - 1 })
    // A working service started on this log does not start: it cannot read the log to its end. (The running
    // replica stops first: it holds every partition's lease, and a replica that takes none has nothing to read.)
    await future.services.stop()
    const started = await startInProcess(workingLayer(future.server.url)).then(
      async (p) => {
        await p.stop()
        return "started"
      },
      (error: unknown) => String(error),
    )
    expect(started).toMatch(/FutureEventVersion|schema version 2 of BudgetChanged/)
    recordFigures("future-version", {
      newerRecordSeq: newer.seq,
      stoppedAt: Object.fromEntries(Object.entries(shapes).map(([name, shape]) => [name, shape.appliedSeq()])),
      deadLettered: 0,
      readPastItRefused: true,
      freshServiceRefusedToStart: started !== "started",
    })
  } finally {
    await future.stop()
  }
})
