/**
 * Services killed mid-projection while agents keep working: the working
 * service and one fade worker run as their own processes
 * (`node services/<name>/main.ts`) and are SIGKILLed mid-ingest; another
 * fade worker, in this process, is stopped with `runtime.dispose()`. Each
 * is started again, replays the log, and nothing is applied twice: every
 * view equals the rebuild from the log at the same sequence, and reference
 * counts equal the reads and citations stored in the log.
 */

import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { HashMap } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import type { ResponseOf } from "../../contracts/api.ts"
import { LEASE_BUCKET, leaseKey } from "../../contracts/buckets.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { apiSubject } from "../../contracts/subjects.ts"
import { entriesByTime } from "../../domain/agent-view.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import type { GatewayShape } from "../../services/gateway/gateway.ts"
import { loadWordVectors } from "../../services/platform/embedding/offline-embedder.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { eventually } from "../support/eventually.ts"
import {
  asJson,
  countsFromLog,
  duplicateEvents,
  entryRecordCounts,
  readRecords,
  rebuildViews,
  repeatedFadeMoves,
  sleep,
  snapshotOf,
  streamLastSeq,
  teardown,
  waitQuiet,
} from "./support/audit.ts"
import { callUntilAnswered, contentFor, newStats, pool } from "./support/driver.ts"
import { recordFigures } from "./support/figures.ts"
import {
  fadeLayer,
  fadeOf,
  gatewayLayer,
  gatewayOf,
  type InProcess,
  type ServiceProcess,
  startInProcess,
  startServiceProcess,
} from "./support/services.ts"

/** Four agents, each in a partition of its own, so the two fade workers' leases divide them. */
const AGENTS = (() => {
  const picked: string[] = []
  for (let n = 0; picked.length < 4; n++) {
    const id = `sk-${n}`
    if (!picked.some((a) => partitionOf(a) === partitionOf(id))) picked.push(id)
  }
  return picked
})()
/** Short leases, so a killed fade worker's partitions move within seconds. */
const LEASE_TTL_MS = 2_000
const RECORDS = 2_000
const IN_FLIGHT = 16
const STEPS_PER_AGENT = 10
/** Records sent after the fade process restarts, to one of its agents. */
const EXTRA = 40

let server: NatsServerProcess
let gatewayP: InProcess<unknown>
let fadeInProcess: InProcess<unknown>
let workingChild: ServiceProcess
let fadeChild: ServiceProcess
let client: WorkingMemoryClient
let nc: NatsConnection
let gateway: GatewayShape

const childEnv = () => ({ NATS_URL: server.url })
const fadeChildEnv = () => ({
  NATS_URL: server.url,
  WM_FADE_INTERVAL_MS: "3600000",
  WM_LEASE_TTL_MS: String(LEASE_TTL_MS),
  WM_REPLICA_ID: "fade-process",
})
const startFadeInProcess = async () => {
  fadeInProcess = await startInProcess(
    fadeLayer(
      server.url,
      { name: "fade-1" },
      undefined,
      {},
      PartitionSettings.make({ leaseTtlMs: LEASE_TTL_MS, replicaId: "fade-in-process" }),
    ),
  )
  return fadeOf(fadeInProcess)
}
/** The fade worker named in the lease of the agent's partition. */
const fadeOwnerOf = async (agentId: string) => {
  const entry = await (await new Kvm(nc).open(LEASE_BUCKET)).get(leaseKey("fade", partitionOf(agentId)))
  return entry !== null && entry.operation === "PUT" ? entry.json<{ replica: string }>().replica : null
}

/**
 * A fade process serves no API: it prints a line once its models are loaded and the log replayed. Waited
 * for without a guess of how long that takes on this machine (the test's own timeout bounds it).
 */
const fadeReady = (child: ServiceProcess) =>
  eventually(
    "the fade process to be ready",
    () => {
      if (!child.isRunning()) throw new Error(`the fade process exited:\n${child.output().slice(-3_000)}`)
      return /fade worker ready/.test(child.output()) ? true : undefined
    },
    170_000,
    100,
  )

/** Waits until the working service answers (it answers only once warmed up). */
const workingAnswers = () =>
  eventually(
    "the working service to answer",
    async () => {
      const reply = await nc.request(apiSubject(AGENTS[0]!, "view.get"), "{}", { timeout: 1_000 })
      return reply.data.length > 0 ? true : undefined
    },
    60_000,
    50,
  )

beforeAll(async () => {
  // The offline embedder's word-vector file, derived once per machine (as a first `npm start` does), so the fade
  // processes below only load it: the scenario is about kills and restarts, not about a first derivation that takes
  // 10 s on an idle machine and far longer on a loaded one.
  loadWordVectors()
  server = await startNatsServer()
  gatewayP = await startInProcess(gatewayLayer(server.url))
  gateway = await gatewayOf(gatewayP)
  nc = await connect({ servers: server.url })
  workingChild = startServiceProcess("working", childEnv())
  fadeChild = startServiceProcess("fade", fadeChildEnv())
  await startFadeInProcess()
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 3_000 })
  await workingAnswers()
  await fadeReady(fadeChild)
}, 180_000)
afterAll(() =>
  teardown(
    () => client?.close(),
    () => nc?.close(),
    () => workingChild?.stop(),
    () => fadeChild?.stop(),
    () => fadeInProcess?.stop(),
    () => gatewayP?.stop(),
    () => server?.stop(),
  ),
)

it("working and fade killed mid-projection resume, and nothing is applied twice", async () => {
  for (const id of AGENTS) await client.agent(id).register({ role: "custom", budget: 1_500 })
  const stats = newStats()
  let acked = 0
  let extraAcked = 0
  let steps = 0
  const faults: Record<string, { atAcks: number; killedAtSeq: number; recoveredMs: number }> = {}
  const ingestDone = { value: false }
  const extraAgent = { value: "" }

  const faultPlan = (async () => {
    const at = async (acks: number) => {
      while (acked < acks) await sleep(5)
      return { atAcks: acked, killedAtSeq: await streamLastSeq(server.url) }
    }
    // 1. The working service process, SIGKILLed and started again.
    const w = await at(400)
    const pid = workingChild.pid
    await workingChild.kill()
    const wStart = Date.now()
    workingChild = startServiceProcess("working", childEnv())
    expect(workingChild.pid).not.toBe(pid)
    await workingAnswers()
    faults.working = { ...w, recoveredMs: Date.now() - wStart }
    // 2. The in-process fade worker, disposed and built again (its warm-up replays the log).
    const f1 = await at(900)
    await fadeInProcess.stop()
    const f1Start = Date.now()
    await startFadeInProcess()
    faults.fadeInProcess = { ...f1, recoveredMs: Date.now() - f1Start }
    // 3. The fade worker process, SIGKILLed and started again.
    const f0 = await at(1_400)
    await fadeChild.kill()
    const f0Start = Date.now()
    fadeChild = startServiceProcess("fade", fadeChildEnv())
    await fadeReady(fadeChild)
    // Warm, it is back when it holds partitions again (the in-process worker took them over meanwhile and
    // hands some back) and makes a decision for one of their agents. New records on such an agent make sure
    // there is something to decide, however far the ingest has got.
    const pressed = await eventually(
      "the restarted fade process to hold an agent's partition",
      async () => {
        for (const id of AGENTS) if ((await fadeOwnerOf(id)) === "fade-process") return id
        return undefined
      },
      60_000,
      250,
    )
    const pressedFrom = await streamLastSeq(server.url)
    for (let k = 0; k < EXTRA; k++) {
      const r = await callUntilAnswered(
        client,
        pressed,
        "recordEntry",
        { requestId: `sk-x${k}`, origin: "USER", content: contentFor(RECORDS + k) },
        stats,
      )
      if (r !== undefined) extraAcked++
    }
    const firstMove = await eventually(
      "a fade decision from the restarted worker",
      async () => {
        if ((await fadeOwnerOf(pressed)) !== "fade-process") return undefined
        const log = await readRecords(server.url)
        return log.find(
          (r) =>
            r.seq > pressedFrom &&
            (r.event?._tag === "RungChanged" || r.event?._tag === "EntryDemoted") &&
            r.event.agentId === pressed,
        )?.seq
      },
      60_000,
      250,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\nfade process output:\n${fadeChild.output().slice(-3_000)}`)
    })
    extraAgent.value = pressed
    faults.fadeProcess = { ...f0, recoveredMs: Date.now() - f0Start }
    return firstMove
  })()

  const reasoners = AGENTS.map(async (agentId) => {
    // One agent's reasoning loop: steps with a context build and references, between the records.
    for (let s = 0; s < STEPS_PER_AGENT; s++) {
      await sleep(150)
      const begun = await callUntilAnswered(
        client,
        agentId,
        "beginStep",
        { requestId: `${agentId}-step-${s}`, stepId: `${agentId}-step-${s}` },
        stats,
      )
      if (begun === undefined) return
      const built = await callUntilAnswered(
        client,
        agentId,
        "buildContext",
        { requestId: `${agentId}-build-${s}`, stepId: begun.stepId, afterSeq: begun.seq },
        stats,
      )
      const used = (built?.items ?? [])
        .filter((i) => !i.cue)
        .slice(-2)
        .map((i) => i.entryId)
      if (used.length > 0)
        await callUntilAnswered(
          client,
          agentId,
          "referenceEntries",
          { requestId: `${agentId}-ref-${s}`, stepId: begun.stepId, entryIds: used },
          stats,
        )
      const ended = await callUntilAnswered(
        client,
        agentId,
        "endStep",
        { requestId: `${agentId}-end-${s}`, stepId: begun.stepId },
        stats,
      )
      if (ended !== undefined) steps++
      if (ingestDone.value && s >= STEPS_PER_AGENT / 2) break
    }
  })
  const started = Date.now()
  await pool(
    Array.from({ length: RECORDS }, (_, i) => i),
    IN_FLIGHT,
    async (i) => {
      const agentId = AGENTS[i % AGENTS.length]!
      const r = await callUntilAnswered(
        client,
        agentId,
        "recordEntry",
        { requestId: `sk-r${i}`, origin: "USER", content: contentFor(i) },
        stats,
      )
      if (r !== undefined) acked++
    },
  )
  ingestDone.value = true
  const ingestMillis = Date.now() - started
  await Promise.all(reasoners)
  const firstMoveAfterRestart = await faultPlan

  const fade1 = await fadeOf(fadeInProcess)
  const last = await waitQuiet(server.url, () => [gateway.appliedSeq()], {
    quietMs: 2_500,
    timeoutMs: 90_000,
  })
  const log = await readRecords(server.url)
  const rebuilt = rebuildViews(log, last)
  const counts = entryRecordCounts(log)

  expect(stats.failures).toEqual([])
  expect(acked).toBe(RECORDS)
  expect(extraAcked).toBe(EXTRA)
  expect(counts.size).toBe(RECORDS + EXTRA)
  expect([...counts.values()].every((n) => n === 1)).toBe(true)
  expect(duplicateEvents(log)).toBe(0)
  expect(repeatedFadeMoves(log)).toBe(0)
  expect(steps).toBeGreaterThanOrEqual(AGENTS.length * (STEPS_PER_AGENT / 2))

  let entriesCompared = 0
  let fadeOneAgents = 0
  let referenceCounts = 0
  let citations = 0
  for (const id of AGENTS) {
    const expected = rebuilt.get(id)!
    expect(expected.entryCount).toBe(RECORDS / AGENTS.length + (id === extraAgent.value ? EXTRA : 0))
    // The restarted working process, through the API, at the same sequence.
    const live = (await client.call(id, "getView", { afterSeq: last })) as ResponseOf<"getView">
    expect(live.appliedSeq).toBe(last)
    const expectedEntries = asJson(entriesByTime(HashMap.values(expected.entries)))
    expect(live.entries, `working process view of ${id}`).toEqual(expectedEntries)
    expect(live.usage).toBe(expected.usage)
    expect(live.budget).toBe(expected.budgetInForce)
    // Reference counts are exactly the reads and citations stored in the log: none applied twice.
    const fromLog = countsFromLog(log, id)
    for (const entry of live.entries) {
      expect(entry.referenceCount, `${id}/${entry.id} reads`).toBe(fromLog.reads.get(entry.id) ?? 0)
      expect(entry.citationCount, `${id}/${entry.id} citations`).toBe(fromLog.citations.get(entry.id) ?? 0)
      referenceCounts += entry.referenceCount
      citations += entry.citationCount
    }
    entriesCompared += live.entries.length
    // The gateway (never stopped) and the restarted in-process fade worker for the agents it holds.
    expect(snapshotOf(gateway.view(id)), `gateway ${id}`).toEqual(snapshotOf(expected))
    if (fade1.owns(id)) {
      fadeOneAgents++
      await eventually(`fade-1 view of ${id}`, () => (fade1.view(id)?.lastSeq === expected.lastSeq ? true : undefined))
      expect(snapshotOf(fade1.view(id)), `fade-1 ${id}`).toEqual(snapshotOf(expected))
    }
  }
  expect(referenceCounts).toBeGreaterThan(0)
  expect(citations).toBeGreaterThan(0)
  const fadeMoves = log.filter((r) => r.event?._tag === "RungChanged" || r.event?._tag === "EntryDemoted")
  const movesByAgent = Object.fromEntries(
    AGENTS.map((id) => [id, fadeMoves.filter((r) => r.event!.agentId === id).length]),
  )
  expect(Object.values(movesByAgent).every((n) => n > 0)).toBe(true)
  expect(fadeOneAgents).toBeGreaterThan(0)
  expect(workingChild.isRunning() && fadeChild.isRunning()).toBe(true)

  recordFigures("service-kill", {
    recordsSent: RECORDS + EXTRA,
    inFlight: IN_FLIGHT,
    acknowledged: acked + extraAcked,
    foundInLog: counts.size,
    duplicatesInLog: [...counts.values()].filter((n) => n > 1).length,
    duplicateEventIds: duplicateEvents(log),
    repeatedFadeMoves: repeatedFadeMoves(log),
    stepsCompleted: steps,
    sdkGaveUpThenRetriedSameId: stats.noResponse,
    retryableRefusals: stats.retryableRefusals,
    faults: {
      workingProcessSigkill: faults.working,
      fadeInProcessDispose: faults.fadeInProcess,
      fadeProcessSigkill: { ...faults.fadeProcess, firstDecisionAfterRestartSeq: firstMoveAfterRestart },
    },
    ingestSeconds: Math.round(ingestMillis / 100) / 10,
    eventsInLog: last,
    fadeMovesByAgent: movesByAgent,
    workingEntriesCompared: entriesCompared,
    referenceCountsChecked: referenceCounts,
    citationsChecked: citations,
    viewsEqualRebuild: ["working (process, via API)", "gateway", "fade-1"],
  })
})
