/**
 * Back-pressure: slow consumers must not make the gateway lose or block
 * accepted writes. Every record of a phase is acknowledged while a consumer
 * is stuck for the whole phase — the fade worker's remote summariser
 * stalled (a local HTTP server that never answers), then a projection
 * process held on one event — so a write that waited for either would never
 * be acknowledged; whether that holds does not depend on the machine's
 * speed. Record latency and throughput of each phase are measured next to a
 * phase with nothing slow (figures only: on a shared machine they vary with
 * the load); then the limits that bound ingest are measured and read back
 * from the server: in-flight window, max payload, stream limits, dedupe
 * window, and the cost of a worst-case entry.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { MAX_CONTENT_BYTES } from "../../contracts/api.ts"
import { DEAD_LETTER_STREAM, EVENTS_STREAM } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { Summarizer } from "../../services/fade/summarizer.ts"
import { EmbeddingProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { hashedEmbedder } from "../../services/platform/embedding/offline-embedder.ts"
import { eventually } from "../support/eventually.ts"
import { entryRecordCounts, readRecords, sleep, streamLastSeq, teardown } from "./support/audit.ts"
import { callUntilAnswered, contentFor, newStats, percentile, pool } from "./support/driver.ts"
import { REPO_ROOT, recordFigures, round } from "./support/figures.ts"
import {
  fadeLayer,
  gatewayLayer,
  type InProcess,
  type ServiceProcess,
  startInProcess,
  startNodeProcess,
  startServiceProcess,
  workingLayer,
} from "./support/services.ts"

const PHASE_RECORDS = 1_500
const IN_FLIGHT = 16
const AGENTS = ["bp-0", "bp-1", "bp-2", "bp-3"]

let server: NatsServerProcess
let core: InProcess<unknown>
let fade: InProcess<unknown> | undefined
let slow: ServiceProcess | undefined
let gatewayProcess: ServiceProcess | undefined
let workingProcess: ServiceProcess | undefined
let client: WorkingMemoryClient
let nc: NatsConnection
let summariser: Server
const hanging: ServerResponse[] = []
let summariserRequests = 0
let summariserStalled = true

beforeAll(async () => {
  summariser = createServer((req: IncomingMessage, res: ServerResponse) => {
    summariserRequests++
    req.resume()
    if (summariserStalled) hanging.push(res)
    else res.writeHead(500).end("overloaded")
  })
  await new Promise<void>((r) => summariser.listen(0, "127.0.0.1", () => r()))
  server = await startNatsServer()
  core = await startInProcess(Layer.mergeAll(gatewayLayer(server.url), workingLayer(server.url)))
  client = await WorkingMemoryClient.connect({ servers: server.url })
  nc = await connect({ servers: server.url })
})
afterAll(async () => {
  summariserStalled = false
  for (const res of hanging.splice(0)) res.destroy()
  await teardown(
    () => slow?.stop(),
    () => gatewayProcess?.stop(),
    () => workingProcess?.stop(),
    () => fade?.stop(),
    () => nc?.close(),
    () => client?.close(),
    () => core?.stop(),
    () => server?.stop(),
    () => new Promise((r) => summariser.close(r)),
  )
})

interface Phase {
  readonly records: number
  readonly acknowledged: number
  readonly seconds: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  readonly sdkGaveUp: number
}

let phaseNo = 0
/** `count` records through the SDK with `inFlight` outstanding; every one must be acknowledged. */
const ingest = async (
  count: number,
  inFlight = IN_FLIGHT,
  content: (i: number) => string = contentFor,
): Promise<Phase & { keys: string[] }> => {
  const phase = phaseNo++
  const stats = newStats()
  const latencies: number[] = []
  const keys: string[] = []
  const started = performance.now()
  await pool(
    Array.from({ length: count }, (_, i) => i),
    inFlight,
    async (i) => {
      const agentId = AGENTS[i % AGENTS.length]!
      const requestId = `bp${phase}-${i}`
      const t = performance.now()
      const r = await callUntilAnswered(
        client,
        agentId,
        "recordEntry",
        { requestId, origin: "USER", content: content(i) },
        stats,
      )
      latencies.push(performance.now() - t)
      if (r !== undefined) keys.push(`${agentId}/${requestId}`)
    },
  )
  const seconds = (performance.now() - started) / 1000
  expect(stats.failures).toEqual([])
  return {
    records: count,
    acknowledged: keys.length,
    seconds: round(seconds, 2),
    perSecond: Math.round(count / seconds),
    p50Ms: round(percentile(latencies, 50)),
    p99Ms: round(percentile(latencies, 99)),
    maxMs: round(Math.max(...latencies)),
    sdkGaveUp: stats.noResponse,
    keys,
  }
}

const withoutKeys = ({ keys: _keys, ...rest }: Phase & { keys: string[] }): Phase => rest

it("slow consumers do not make the gateway lose or block accepted writes; the limits, measured", async () => {
  for (const id of AGENTS) await client.agent(id).register({ role: "custom", budget: 400 })
  await ingest(1_000) // warm-up: encodings loaded, code optimised, connections and consumers established

  // 1. Nothing slow.
  const baseline = await ingest(PHASE_RECORDS)

  // 2. The fade worker's remote summariser never answers: every evaluation that needs a summary waits.
  const models = Layer.merge(
    Summarizer.remote({
      baseUrl: `http://127.0.0.1:${(summariser.address() as { port: number }).port}/v1`,
      model: "stalled",
      timeout: "120 seconds",
      retries: 0,
    }),
    EmbeddingProvider.offlineOnly(hashedEmbedder()),
  )
  fade = await startInProcess(fadeLayer(server.url, { name: "fade" }, models))
  await eventually("the fade worker waiting on the summariser", () => (hanging.length > 0 ? true : undefined), 30_000)
  const stalledFrom = await streamLastSeq(server.url)
  const stalled = await ingest(PHASE_RECORDS)
  const stalledTo = await streamLastSeq(server.url)
  const duringStall = (await readRecords(server.url)).filter((r) => r.seq > stalledFrom && r.seq <= stalledTo)
  const summariesDuringStall = duringStall.filter((r) => r.event?._tag === "RungChanged" && r.event.to === 2).length
  const pendingSummaries = hanging.length
  const summariserRequestsDuringStall = summariserRequests
  expect(pendingSummaries).toBeGreaterThan(0)
  expect(summariesDuringStall, "no summary while the summariser is stalled").toBe(0)

  // 3. A projection process held on one event for the whole phase (then 2 ms per event): the gateway does not wait for it.
  const holdDir = mkdtempSync(join(tmpdir(), "wm-hold-"))
  const holdFile = join(holdDir, "hold")
  writeFileSync(holdFile, "")
  slow = startNodeProcess("slow-projection", `${REPO_ROOT}test/faults/support/slow-projection.ts`, {
    NATS_URL: server.url,
    SLOW_APPLY_MS: "2",
    HOLD_FILE: holdFile,
  })
  const slowLines = () => slow!.output().trim().split("\n")
  const slowApplied = () =>
    Number(
      slowLines()
        .filter((l) => l.startsWith("applied "))
        .at(-1)
        ?.split(" ")[1] ?? 0,
    )
  const heldAt = await eventually(
    "the slow projection to be held",
    () => {
      const held = slowLines().find((l) => l.startsWith("held "))
      return held === undefined ? undefined : Number(held.split(" ")[1])
    },
    60_000,
  )
  const phaseFrom = await streamLastSeq(server.url)
  const withSlowProjection = await ingest(PHASE_RECORDS)
  const endOfPhase = await streamLastSeq(server.url)
  // Still held: it applied nothing of the phase while every record of it was acknowledged.
  const stillHeld = slowLines().at(-1)
  const appliedDuringPhase = slowApplied()
  expect(stillHeld, "the projection was held for the whole phase").toBe(`held ${heldAt}`)
  expect(heldAt).toBeLessThanOrEqual(phaseFrom)
  expect(appliedDuringPhase).toBeLessThan(heldAt)
  const slowLagAtEnd = endOfPhase - appliedDuringPhase
  rmSync(holdDir, { recursive: true, force: true })
  const drainStarted = Date.now()
  await eventually(
    "the slow projection to catch up",
    () => (slowApplied() >= endOfPhase ? true : undefined),
    120_000,
    100,
  )
  const slowDrainMs = Date.now() - drainStarted

  // The stalled summariser gives up: fading falls back and catches up.
  summariserStalled = false
  for (const res of hanging.splice(0)) res.writeHead(500).end("gave up")
  const summaryAfterRelease = await eventually(
    "a summary after the summariser answers",
    async () => {
      const log = await readRecords(server.url)
      return log.find((r) => r.seq > stalledFrom && r.event?._tag === "RungChanged" && r.event.to === 2)?.seq
    },
    60_000,
    250,
  )

  // Nothing accepted was lost or stored twice, in any phase.
  const log = await readRecords(server.url)
  const counts = entryRecordCounts(log)
  for (const phase of [baseline, stalled, withSlowProjection]) {
    expect(phase.acknowledged).toBe(PHASE_RECORDS)
    expect(phase.keys.filter((k) => counts.get(k) === 1).length).toBe(PHASE_RECORDS)
  }
  expect([...counts.values()].every((n) => n === 1)).toBe(true)
  // Writes were not blocked by either stuck consumer: each was answered within the SDK's own attempts.
  // (Throughput and latency next to the baseline are figures, recorded below, not checks.)
  for (const phase of [stalled, withSlowProjection]) expect(phase.sdkGaveUp).toBe(0)
  await slow.stop()
  slow = undefined
  await fade.stop()
  fade = undefined

  // 4. The client's in-flight window: throughput as the number of outstanding records grows.
  const window: Record<string, Phase> = {}
  for (const inFlight of [1, 4, 16, 64, 256])
    window[String(inFlight)] = withoutKeys(await ingest(inFlight === 1 ? 300 : 1_000, inFlight))

  // 5. A worst-case entry: 64 KiB of one unbroken word costs seconds of tokenisation in the gateway,
  //    during which the records that reach that gateway wait; none is lost. Measured against the
  //    gateway and working services as their own processes, so this process's clock keeps running.
  await core.stop()
  gatewayProcess = startServiceProcess("gateway", { NATS_URL: server.url })
  workingProcess = startServiceProcess("working", { NATS_URL: server.url })
  await eventually(
    "the gateway process to answer",
    async () => {
      const reply = await nc.request(
        `wm.api.${AGENTS[0]}.agent.register`,
        JSON.stringify({ role: "custom", budget: 400 }),
        { timeout: 1_000 },
      )
      return (JSON.parse(new TextDecoder().decode(reply.data)) as { ok: boolean }).ok ? true : undefined
    },
    60_000,
    100,
  )
  const worst = "x".repeat(MAX_CONTENT_BYTES)
  const ongoing = ingest(1_200, 8)
  await sleep(300)
  const worstStarted = performance.now()
  // Sent the way a careful client sends an entry it knows is costly: with a per-attempt timeout above its cost. With
  // the default 5 s, on a loaded machine each attempt timed out before its reply and every resend queued one more
  // tokenisation behind the first, so no reply ever came in time.
  const worstReply = await client.call(
    AGENTS[0]!,
    "recordEntry",
    { requestId: "bp-worst-case", origin: "USER", content: worst },
    { timeoutMs: 120_000 },
  )
  const worstMs = performance.now() - worstStarted
  const around = await ongoing
  expect(worstReply.entryId).toBe("bp-worst-case")
  expect(around.acknowledged).toBe(1_200)
  const afterWorst = entryRecordCounts(await readRecords(server.url))
  expect(around.keys.filter((k) => afterWorst.get(k) === 1).length).toBe(1_200)
  expect(afterWorst.get(`${AGENTS[0]}/bp-worst-case`)).toBe(1)

  // The limits as the server and the stream state them.
  const jsm = await jetstreamManager(nc)
  const events = await jsm.streams.info(EVENTS_STREAM)
  const letters = await jsm.streams.info(DEAD_LETTER_STREAM)
  const limits = {
    natsMaxPayloadBytes: nc.info?.max_payload,
    contentLimitBytes: MAX_CONTENT_BYTES,
    eventStream: {
      maxMsgSizeBytes: events.config.max_msg_size,
      maxMsgs: events.config.max_msgs,
      maxBytes: events.config.max_bytes,
      maxAgeNs: events.config.max_age,
      discard: events.config.discard,
      storage: events.config.storage,
      replicas: events.config.num_replicas,
      duplicateWindowMs: events.config.duplicate_window / 1e6,
    },
    deadLetterStream: {
      maxAgeDays: letters.config.max_age / 1e9 / 86_400,
      maxMsgs: letters.config.max_msgs,
      maxBytes: letters.config.max_bytes,
    },
    sdk: { timeoutPerAttemptMs: 5_000, attempts: 4, inFlightWindow: "none: every call is its own request" },
  }
  expect(limits.eventStream.maxMsgSizeBytes).toBe(1024 * 1024)
  expect(limits.eventStream.duplicateWindowMs).toBe(600_000)

  recordFigures("back-pressure", {
    recordsPerPhase: PHASE_RECORDS,
    inFlight: IN_FLIGHT,
    baseline: withoutKeys(baseline),
    fadeSummariserStalled: {
      ...withoutKeys(stalled),
      pendingSummaries,
      summariesDuringStall,
      firstSummaryAfterReleaseSeq: summaryAfterRelease,
      summariserRequestsDuringStall,
    },
    slowProjectionHeldThen2msPerEvent: {
      ...withoutKeys(withSlowProjection),
      heldAtSeq: heldAt,
      lagAtEndOfPhaseEvents: slowLagAtEnd,
      drainAfterReleaseMs: slowDrainMs,
    },
    lostOrDuplicated: 0,
    inFlightWindow: window,
    worstCaseEntry: {
      bytes: MAX_CONTENT_BYTES,
      shape: "one unbroken 64 KiB word",
      recordMs: round(worstMs),
      recordsMeanwhileFromOtherClients: withoutKeys(around),
    },
    limits,
  })
})
