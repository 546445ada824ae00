/**
 * The speed benchmark: each system figure measured side by side with its raw
 * JetStream counterpart, in one run, on one nats-server, rounds interleaved;
 * then the context build (pure CPU) and merged retrieval (on a server of its
 * own, see retrieval.ts), which have no raw counterpart.
 */

import { cpus, loadavg, totalmem } from "node:os"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Effect } from "effect"
import { readSetting, settings } from "../../contracts/settings.ts"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { type NatsServerProcess, natsServerVersion, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { ensureTopology } from "../../services/platform/nats/topology.ts"
import { fillLog } from "../support/synthetic-log.ts"
import { type ContextBuildFigures, contextBuildBench } from "./context-build.ts"
import { cpuPerOperation, findPid, sampleCpu } from "./cpu.ts"
import {
  ensureRawStream,
  type RunningSystem,
  rawPublishMillis,
  type ServicesMode,
  startSystem,
  storedEntries,
  systemIngest,
  systemIngestMany,
} from "./ingest.ts"
import { type LoadFigures, type LoadSizes, measureLoad } from "./load.ts"
import { rawConsumeMillis, type ServiceProcessFigures, serviceReplayMillis, workingProcessFigures } from "./replay.ts"
import { measureRetrieval, type RetrievalFigures } from "./retrieval.ts"
import { median, perSecond } from "./stats.ts"
import type { StepProfile } from "./step-profile.ts"
import {
  type EmbedderSteps,
  FULL_STEP_SIZES,
  measureSteps,
  type P99Crossing,
  QUICK_STEP_SIZES,
  type StepLongTerm,
  type StepRow,
  type StepSizes,
} from "./steps.ts"

/** The figures of the phases that ran (every one in a full run). */
export interface SpeedFigures {
  readonly ingestPerSec?: number
  /** The same entries imported with `entry.recordMany` (INGEST_BATCH_ENTRIES a request), in the same rounds. */
  readonly ingestManyPerSec?: number
  readonly rawPublishPerSec?: number
  readonly replayPerSec?: number
  readonly rawConsumePerSec?: number
  readonly contextBuildP50Ms?: number
  readonly contextBuildP99Ms?: number
  readonly peakRssMb?: number
  readonly retrievalP50Ms?: number
  readonly retrievalP99Ms?: number
  /** Memory of the lexical and dense indexes at the retrieval phase's record count (100k in a full run). */
  readonly retrievalMB?: number
  readonly recordP50Ms?: number
  readonly recordP99Ms?: number
  readonly queryP50MsUnderLoad?: number
  readonly queryP99MsUnderLoad?: number
  /** The agent loop at the largest agent count, with the first embedder measured (the default one). */
  readonly steps?: StepsHeadline
  readonly stepsByAgents?: ReadonlyArray<StepRow>
  /** The step rate at which the step p99 passes 50 ms. */
  readonly stepP99Over50Ms?: P99Crossing
  readonly stepProfile?: StepProfile
  readonly fanOut?: { readonly replicas: number; readonly maxShareReceived: number; readonly settled: boolean }
  /** Every embedder measured: its population, rows, crossing, profile and fan-out. */
  readonly stepsByEmbedder?: Readonly<Record<string, EmbedderStepsFigures>>
}

export interface StepsHeadline {
  readonly embedder: string
  readonly longTerm: StepLongTerm
  readonly agents: number
  readonly stepsPerSec: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly buildP50Ms: number
  readonly buildP99Ms: number
  /** Of the builds measured, those served without the step's recall (retrieval did not answer). */
  readonly buildsWithoutRecall: number
  readonly recordP99Ms: number
}

export type EmbedderStepsFigures = Omit<EmbedderSteps, "embedder">

const stepsHeadline = (measured: EmbedderSteps): StepsHeadline => {
  const row = measured.rows.reduce((a, b) => (b.agents > a.agents ? b : a))
  return {
    embedder: measured.embedder,
    longTerm: measured.longTerm,
    agents: row.agents,
    stepsPerSec: row.stepsPerSec,
    p50Ms: row.p50Ms,
    p99Ms: row.p99Ms,
    buildP50Ms: row.calls.buildContext.p50Ms,
    buildP99Ms: row.calls.buildContext.p99Ms,
    buildsWithoutRecall: row.buildsWithoutRecall,
    recordP99Ms: row.calls.record.p99Ms,
  }
}

export interface SpeedSizes {
  readonly rounds: number
  readonly ingestEntries: number
  readonly window: number
  readonly ingestAgents: number
  readonly replayEvents: number
  readonly contextWarmup: number
  /** Builds timed per round. */
  readonly contextIterations: number
  readonly load: LoadSizes
  readonly steps: StepSizes
}

export const FULL_SIZES: SpeedSizes = {
  rounds: 3,
  ingestEntries: 20_000,
  window: 256,
  ingestAgents: 16,
  replayEvents: 100_000,
  contextWarmup: 1_000,
  contextIterations: 5_000,
  load: { agents: 100, entriesPerAgent: 20 },
  steps: FULL_STEP_SIZES,
}

export const QUICK_SIZES: SpeedSizes = {
  rounds: 1,
  ingestEntries: 300,
  window: 256,
  ingestAgents: 4,
  replayEvents: 2_000,
  contextWarmup: 50,
  contextIterations: 300,
  load: { agents: 100, entriesPerAgent: 2 },
  steps: QUICK_STEP_SIZES,
}

/** The parts of the benchmark; a run of only some of them is for iterating, not for the committed figures. */
export type SpeedPhase = "context" | "server" | "retrieval" | "load" | "steps"
export const SPEED_PHASES: ReadonlyArray<SpeedPhase> = ["context", "server", "retrieval", "load", "steps"]
/** The figures each phase gives. */
export const FIGURES_OF_PHASE: Readonly<Record<SpeedPhase, ReadonlyArray<keyof SpeedFigures>>> = {
  context: ["contextBuildP50Ms", "contextBuildP99Ms"],
  server: ["ingestPerSec", "ingestManyPerSec", "rawPublishPerSec", "replayPerSec", "rawConsumePerSec", "peakRssMb"],
  retrieval: ["retrievalP50Ms", "retrievalP99Ms", "retrievalMB"],
  load: ["recordP50Ms", "recordP99Ms", "queryP50MsUnderLoad", "queryP99MsUnderLoad"],
  steps: ["steps", "stepsByAgents", "stepP99Over50Ms", "stepProfile", "fanOut", "stepsByEmbedder"],
}

export interface SpeedOptions {
  readonly quick?: boolean
  /** The phases to run (default all). */
  readonly phases?: ReadonlyArray<SpeedPhase>
  /** Long-term records for the retrieval phase (default 100k, 2k when quick). */
  readonly records?: number
  /** Where the memory services of the retrieval phase, and the services of each steps row, write a CPU profile. */
  readonly profileDir?: string
  readonly services?: ServicesMode
  /** Overrides the number of interleaved rounds. */
  readonly rounds?: number
  /** Overrides the steps phase's agent counts and measured seconds per count. */
  readonly stepAgents?: ReadonlyArray<number>
  readonly stepSeconds?: number
  /** WM_EMBEDDER of each system the steps phase measures (default: the configured one). */
  readonly stepEmbedders?: ReadonlyArray<string>
  /** Where the steps phase's long-term store keeps records (default: on disk, as `npm start`). */
  readonly stepLongTerm?: StepLongTerm
  readonly log?: (line: string) => void
}

/** Median CPU microseconds per entry or event, by process (Linux only; empty elsewhere). */
export type CpuPerOperation = Readonly<Record<string, number>>

export interface SpeedDetails {
  readonly machine: string
  /** Load average (1, 5, 15 min) when the run ended: the machine may be shared. */
  readonly loadAtEnd: ReadonlyArray<number>
  readonly sizes: SpeedSizes
  readonly services: ServicesMode
  readonly ingest?: {
    readonly systemMs: number[]
    readonly manyMs: number[]
    readonly rawMs: number[]
    readonly payloadBytes: number
    readonly systemCpuUs: CpuPerOperation
    readonly manyCpuUs: CpuPerOperation
    readonly rawCpuUs: CpuPerOperation
  }
  readonly replay?: {
    readonly systemMs: number[]
    readonly rawMs: number[]
    readonly events: number
    readonly systemCpuUs: CpuPerOperation
    readonly rawCpuUs: CpuPerOperation
  }
  readonly workingProcess?: ServiceProcessFigures[]
  readonly contextBuild?: ContextBuildFigures
  readonly retrieval?: RetrievalFigures
  readonly load?: LoadFigures
  readonly steps?: ReadonlyArray<EmbedderSteps>
}

export interface SpeedReport {
  readonly figures: SpeedFigures
  readonly details: SpeedDetails
}

const DEDUPE_WINDOW_MS = 10 * 60_000

/** Runs `body` and adds the CPU each process used per operation to `into`. */
const withCpu = async <A>(
  pids: ReadonlyMap<string, number>,
  operations: number,
  into: Array<Map<string, number>>,
  body: () => Promise<A>,
): Promise<A> => {
  const before = sampleCpu(pids)
  const value = await body()
  into.push(cpuPerOperation(before, sampleCpu(pids), operations))
  return value
}

const medianCpu = (runs: ReadonlyArray<ReadonlyMap<string, number>>): CpuPerOperation => {
  const names = new Set(runs.flatMap((r) => [...r.keys()]))
  const out: Record<string, number> = {}
  for (const name of names) {
    const xs = runs.map((r) => r.get(name)).filter((x): x is number => x !== undefined)
    if (xs.length > 0) out[name] = Math.round(median(xs))
  }
  return out
}
const round = (x: number, digits: number) => Number(x.toFixed(digits))

export const describeMachine = (): string => {
  const cpu = cpus()
  return (
    `${cpu.length} cores (${cpu[0]?.model.trim() ?? "unknown"}), ${Math.round(totalmem() / 2 ** 30)} GiB, ` +
    `Node ${process.versions.node}, nats-server ${natsServerVersion() ?? "?"}, ` +
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`
  )
}

interface IngestResult {
  readonly systemMs: number[]
  readonly manyMs: number[]
  readonly rawMs: number[]
  readonly payloadBytes: number
  readonly systemCpu: Array<Map<string, number>>
  readonly manyCpu: Array<Map<string, number>>
  readonly rawCpu: Array<Map<string, number>>
}

interface ReplayResult {
  readonly systemMs: number[]
  readonly rawMs: number[]
  readonly events: number
  readonly systemCpu: Array<Map<string, number>>
  readonly rawCpu: Array<Map<string, number>>
  readonly workingProcess: ServiceProcessFigures[]
}

/**
 * Replay, then ingest, on one nats-server: a log of N synthetic events
 * replayed by the working service and by a raw consumer; then the system's
 * ingest through the SDK against raw windowed publishes of the same bytes.
 */
const serverPhases = async (
  sizes: SpeedSizes,
  mode: ServicesMode,
  log: (line: string) => void,
  betweenRounds: () => void,
): Promise<{ replay: ReplayResult; ingest: IngestResult }> => {
  let server: NatsServerProcess | undefined
  let system: RunningSystem | undefined
  const closers: Array<() => Promise<unknown>> = []
  try {
    server = await startNatsServer()
    const url = server.url
    const nc = await connect({ servers: url, name: "bench-speed" })
    closers.push(() => nc.close())
    const jsm = await jetstreamManager(nc)
    await Effect.runPromise(
      ensureTopology(jsm, { servers: [url], name: "bench", replicas: 1, dedupeWindowMs: DEDUPE_WINDOW_MS }),
    )

    log(`replay: filling the log with ${sizes.replayEvents} events...`)
    await fillLog(nc, sizes.replayEvents)
    const events = (await jsm.streams.info(EVENTS_STREAM)).state.messages
    if (events !== sizes.replayEvents) throw new Error(`the log holds ${events} events, expected ${sizes.replayEvents}`)
    const natsPid = findPid("nats-server", `-p ${server.port} `)
    const benchPids = new Map<string, number>([
      ["bench", process.pid],
      ...(natsPid !== undefined ? [["nats-server", natsPid] as const] : []),
    ])
    const replay: ReplayResult = { systemMs: [], rawMs: [], events, systemCpu: [], rawCpu: [], workingProcess: [] }
    for (let r = 0; r < sizes.rounds; r++) {
      const raw = async () =>
        replay.rawMs.push(await withCpu(benchPids, events, replay.rawCpu, () => rawConsumeMillis(url, events)))
      const sys = async () =>
        replay.systemMs.push(await withCpu(benchPids, events, replay.systemCpu, () => serviceReplayMillis(url, events)))
      if (r % 2 === 0) await raw().then(sys)
      else await sys().then(raw)
      replay.workingProcess.push(await workingProcessFigures(nc, url))
      log(
        `  round ${r + 1}: raw consume ${replay.rawMs.at(-1)!.toFixed(0)} ms, working replay ${replay.systemMs.at(-1)!.toFixed(0)} ms, ` +
          `working process ready in ${replay.workingProcess.at(-1)!.readyMs.toFixed(0)} ms, peak RSS ${replay.workingProcess.at(-1)!.peakRssMb.toFixed(1)} MB`,
      )
      if (r + 1 < sizes.rounds) betweenRounds()
    }

    log(`ingest: starting the services (${mode})...`)
    system = await startSystem(mode, url, nc)
    const client = await WorkingMemoryClient.connect({ servers: url, name: "bench-sdk" })
    closers.unshift(() => client.close())
    const rawNc = await connect({ servers: url, name: "bench-raw-publish" })
    closers.unshift(() => rawNc.close())
    await ensureRawStream(jsm)
    const options = { entries: sizes.ingestEntries, window: sizes.window, agents: sizes.ingestAgents }
    log(`ingest: warm-up round of ${options.entries} entries each...`)
    const warm = await systemIngest(client, "warm", options)
    const payloads = await storedEntries(nc, warm)
    if (payloads.length !== options.entries)
      throw new Error(`found ${payloads.length} stored entries, expected ${options.entries}`)
    await rawPublishMillis(rawNc, payloads, options.entries, options.window)
    const ingest: IngestResult = {
      systemMs: [],
      manyMs: [],
      rawMs: [],
      payloadBytes: payloads.reduce((sum, p) => sum + p.data.length, 0) / payloads.length,
      systemCpu: [],
      manyCpu: [],
      rawCpu: [],
    }
    const allPids = new Map([...benchPids, ...system.processes])
    for (let r = 0; r < sizes.rounds; r++) {
      const raw = async () =>
        ingest.rawMs.push(
          await withCpu(allPids, options.entries, ingest.rawCpu, () =>
            rawPublishMillis(rawNc, payloads, options.entries, options.window),
          ),
        )
      const sys = async () =>
        ingest.systemMs.push(
          (await withCpu(allPids, options.entries, ingest.systemCpu, () => systemIngest(client, `r${r}`, options)))
            .millis,
        )
      const many = async () =>
        ingest.manyMs.push(
          (await withCpu(allPids, options.entries, ingest.manyCpu, () => systemIngestMany(client, `m${r}`, options)))
            .millis,
        )
      // Each round in another order: none of the three always runs first.
      const order = [raw, sys, many]
      for (let k = 0; k < order.length; k++) await order[(k + r) % order.length]!()
      log(
        `  round ${r + 1}: raw publish ${ingest.rawMs.at(-1)!.toFixed(0)} ms, system ingest ${ingest.systemMs.at(-1)!.toFixed(0)} ms, ` +
          `by recordMany ${ingest.manyMs.at(-1)!.toFixed(0)} ms`,
      )
    }
    return { replay, ingest }
  } finally {
    for (const close of closers) await close().catch(() => undefined)
    await system?.stop()
    await server?.stop()
  }
}

export const runSpeedBench = async (options: SpeedOptions = {}): Promise<SpeedReport> => {
  const log = options.log ?? (() => undefined)
  const base = options.quick ? QUICK_SIZES : FULL_SIZES
  const sizes: SpeedSizes = {
    ...base,
    rounds: options.rounds ?? base.rounds,
    steps: {
      ...base.steps,
      ...(options.stepAgents !== undefined ? { agents: options.stepAgents } : {}),
      ...(options.stepSeconds !== undefined ? { seconds: options.stepSeconds } : {}),
    },
  }
  const mode = options.services ?? "processes"
  const phases = new Set(options.phases ?? SPEED_PHASES)
  const machine = describeMachine()
  log(`machine: ${machine}`)

  // The context build is pure CPU. Its rounds are spread over the run (one
  // now, the others between replay rounds) so that a burst of load from other
  // processes does not decide the figure.
  const contextBench = phases.has("context")
    ? contextBuildBench({ warmup: sizes.contextWarmup, iterations: sizes.contextIterations })
    : undefined
  const contextRound = () => {
    if (contextBench === undefined) return
    const r = contextBench.round()
    log(
      `  context build: ${sizes.contextIterations} builds, p50 ${r.p50Ms.toFixed(3)} ms, p99 ${r.p99Ms.toFixed(3)} ms`,
    )
  }
  if (contextBench !== undefined) log(`context build of a full 12k-token supervisor view, ${sizes.rounds} round(s):`)
  contextRound()

  const server = phases.has("server") ? await serverPhases(sizes, mode, log, contextRound) : undefined
  const retrieval = phases.has("retrieval")
    ? await measureRetrieval({
        quick: options.quick ?? false,
        log,
        ...(options.records !== undefined ? { records: options.records } : {}),
        ...(options.profileDir !== undefined ? { profileDir: options.profileDir } : {}),
      })
    : undefined
  const load = phases.has("load") ? await measureLoad(sizes.load, log) : undefined
  const steps = phases.has("steps")
    ? await measureSteps({
        sizes: sizes.steps,
        embedders: options.stepEmbedders ?? [readSetting(settings.WM_EMBEDDER)],
        longTerm: options.stepLongTerm ?? "disk",
        log,
        ...(options.profileDir !== undefined ? { profileDir: options.profileDir } : {}),
      })
    : undefined
  const firstSteps = steps?.[0]

  const contextBuild = contextBench?.figures()
  const figures: SpeedFigures = {
    ...(server
      ? {
          ingestPerSec: Math.round(perSecond(sizes.ingestEntries, median(server.ingest.systemMs))),
          ingestManyPerSec: Math.round(perSecond(sizes.ingestEntries, median(server.ingest.manyMs))),
          rawPublishPerSec: Math.round(perSecond(sizes.ingestEntries, median(server.ingest.rawMs))),
          replayPerSec: Math.round(perSecond(server.replay.events, median(server.replay.systemMs))),
          rawConsumePerSec: Math.round(perSecond(server.replay.events, median(server.replay.rawMs))),
          peakRssMb: round(median(server.replay.workingProcess.map((w) => w.peakRssMb)), 1),
        }
      : {}),
    ...(contextBuild
      ? { contextBuildP50Ms: round(contextBuild.p50Ms, 4), contextBuildP99Ms: round(contextBuild.p99Ms, 4) }
      : {}),
    ...(retrieval
      ? {
          retrievalP50Ms: round(retrieval.p50Ms, 3),
          retrievalP99Ms: round(retrieval.p99Ms, 3),
          retrievalMB: round(retrieval.memory.retrievalMb, 1),
        }
      : {}),
    ...(load
      ? {
          recordP50Ms: round(load.recordP50Ms, 3),
          recordP99Ms: round(load.recordP99Ms, 3),
          queryP50MsUnderLoad: round(load.queryP50Ms, 3),
          queryP99MsUnderLoad: round(load.queryP99Ms, 3),
        }
      : {}),
    ...(steps !== undefined && firstSteps !== undefined
      ? {
          steps: stepsHeadline(firstSteps),
          stepsByAgents: firstSteps.rows,
          stepP99Over50Ms: firstSteps.p99Over50Ms,
          stepProfile: firstSteps.profile,
          ...(firstSteps.fanOut
            ? {
                fanOut: {
                  replicas: firstSteps.fanOut.replicas,
                  maxShareReceived: firstSteps.fanOut.maxShareReceived,
                  settled: firstSteps.fanOut.settled,
                },
              }
            : {}),
          stepsByEmbedder: Object.fromEntries(steps.map(({ embedder, ...figures }) => [embedder, figures])),
        }
      : {}),
  }
  return {
    figures,
    details: {
      machine,
      loadAtEnd: loadavg(),
      sizes,
      services: mode,
      ...(server
        ? {
            ingest: {
              systemMs: server.ingest.systemMs,
              manyMs: server.ingest.manyMs,
              rawMs: server.ingest.rawMs,
              payloadBytes: server.ingest.payloadBytes,
              systemCpuUs: medianCpu(server.ingest.systemCpu),
              manyCpuUs: medianCpu(server.ingest.manyCpu),
              rawCpuUs: medianCpu(server.ingest.rawCpu),
            },
            replay: {
              systemMs: server.replay.systemMs,
              rawMs: server.replay.rawMs,
              events: server.replay.events,
              systemCpuUs: medianCpu(server.replay.systemCpu),
              rawCpuUs: medianCpu(server.replay.rawCpu),
            },
            workingProcess: server.replay.workingProcess,
          }
        : {}),
      ...(contextBuild ? { contextBuild } : {}),
      ...(retrieval ? { retrieval } : {}),
      ...(load ? { load } : {}),
      ...(steps ? { steps } : {}),
    },
  }
}
