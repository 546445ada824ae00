/**
 * Steps: N agents each running the agent loop (step-loop.ts) through the SDK against every service in
 * one process as `npm start` composes them (default configuration, long-term kept on disk as `npm
 * start` keeps it; no dashboard), one step a second per agent. Before measuring, each agent's history
 * is imported with `entry.recordMany` under a small budget, so that fading demotes it to long-term, and
 * the run waits until fading and the long-term projection have caught up (their progress reports say
 * no work is left behind); then the budget is set to the one the steps build with, so recall runs
 * against the agents' long-term and fading runs as in production. For each N: per-call and per-step
 * latencies, the step rate, and the CPU each process spent per step. Then one agent steps alone with
 * the wire tapped (step-profile.ts), and, with more replicas of the gateway and the working service
 * started beside the system, how many of the requests each replica receives.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { connect } from "@nats-io/transport-node"
import { readStatus, type Status } from "../../cli/audit/status.ts"
import { DEFAULT_BATCH_ENTRIES } from "../../contracts/api.ts"
import type { Origin } from "../../contracts/entry.ts"
import { Overloaded } from "../../contracts/errors.ts"
import { ROUTE_ROOT } from "../../contracts/routing.ts"
import { DEFAULT_LEASE_TTL_MS } from "../../contracts/settings.ts"
import { apiSubject } from "../../contracts/subjects.ts"
import { freePort, startNatsServer } from "../../infra/nats-server.ts"
import { type AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { memoryText } from "../support/realistic-entries.ts"
import { cpuPerOperation, findPid, sampleCpu } from "./cpu.ts"
import { READINESS_PROBE, waitUntilServed } from "./replay.ts"
import { createBenchTopology, type ServiceProcess, spawnService, stopChild } from "./services.ts"
import { type LoopRun, runAgentLoops, runStepsEach, STEP_CALLS, type StepCall, stepLatencies } from "./step-loop.ts"
import {
  type CallCpu,
  type CpuProfile,
  type CpuRow,
  cpuInCalls,
  profileSteps,
  readListeners,
  type StepProfile,
  summariseCpuProfile,
  tapWire,
} from "./step-profile.ts"

export interface StepSizes {
  /** Agent counts measured, in order; the largest is populated. */
  readonly agents: ReadonlyArray<number>
  readonly warmupSeconds: number
  /** Measured seconds per agent count. */
  readonly seconds: number
  /** Entries of history imported per agent, and how many of them must be in long-term before measuring. */
  readonly history: number
  readonly demoted: number
  /** The agents' budget while their history is imported (small, so that fading demotes it). */
  readonly importBudget: number
  /** The budget the steps build their context with. */
  readonly budget: number
  /** Steps of one agent profiled on the wire. */
  readonly profileSteps: number
  /** Seconds the processes' CPU is sampled with no agent stepping. */
  readonly idleSeconds: number
  /**
   * The fan-out phase: replicas of the gateway and the working service, and a fleet stepping through them, each
   * agent a fixed number of steps, so that every agent sends as many requests however fast its replica answers.
   * It is measured once no partition has moved for `quietMs`.
   */
  readonly fanOut: {
    readonly replicas: number
    readonly agents: number
    readonly stepsPerAgent: number
    readonly quietMs: number
  }
}

export const FULL_STEP_SIZES: StepSizes = {
  agents: [1, 10, 100],
  warmupSeconds: 5,
  seconds: 40,
  history: 1_050,
  demoted: 1_000,
  importBudget: 16,
  budget: 2_048,
  profileSteps: 20,
  idleSeconds: 10,
  // Two lease TTLs: eight lease rounds without a partition moving.
  fanOut: { replicas: 3, agents: 100, stepsPerAgent: 3, quietMs: 2 * DEFAULT_LEASE_TTL_MS },
}

export const QUICK_STEP_SIZES: StepSizes = {
  agents: [1, 2],
  warmupSeconds: 1,
  seconds: 3,
  history: 40,
  demoted: 20,
  importBudget: 16,
  budget: 2_048,
  profileSteps: 2,
  idleSeconds: 1,
  fanOut: { replicas: 2, agents: 2, stepsPerAgent: 2, quietMs: 2_000 },
}

export interface StepRow {
  readonly agents: number
  /** Steps that started in the measured window. */
  readonly steps: number
  /** Steps that ended in the window, per second of it. */
  readonly stepsPerSec: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly calls: Readonly<Record<StepCall, { readonly p50Ms: number; readonly p99Ms: number }>>
  /** CPU microseconds per step over the window, by process ("services": every service, one process). */
  readonly cpuUsPerStep: Readonly<Record<string, number>>
  /** Mean context items served per build, of them recalled cues, and the context's tokens. */
  readonly servedPerBuild: number
  readonly cuesPerBuild: number
  readonly contextTokens: number
  /** Builds whose reply said the step's recall was not in them (retrieval did not answer in time). */
  readonly buildsWithoutRecall: number
  /**
   * Events the background projections (fading, long-term) had not worked off when the row ended: requests go
   * first, so a loaded system defers fading, and working then holds more full entries and leaves less room for cues.
   */
  readonly backgroundBehindAtEnd: number
  readonly errors: Readonly<Record<string, number>>
  /** One-minute load average when the count's run began and ended. */
  readonly load: readonly [number, number]
}

export interface FanOutFigures {
  readonly replicas: number
  /** False when a partition moved during every attempt: the shares then say nothing of the division. */
  readonly settled: boolean
  readonly agents: number
  readonly stepsPerAgent: number
  /** Requests the agents sent to each partitioned service, and what each of its replicas received. */
  readonly services: ReadonlyArray<{
    readonly service: string
    readonly sent: number
    readonly received: ReadonlyArray<number>
  }>
  /** The largest share of a service's requests that one replica received (1: every replica gets every request). */
  readonly maxShareReceived: number
  readonly stepP50Ms: number
  readonly stepP99Ms: number
}

export interface EmbedderSteps {
  readonly embedder: string
  readonly longTerm: StepLongTerm
  readonly populate: {
    readonly agents: number
    readonly entriesPerAgent: number
    /** The fewest entries of one agent's history in long-term when measuring began. */
    readonly demotedAtLeast: number
    readonly seconds: number
    readonly logEvents: number
  }
  /** CPU milliseconds per second of each process while no agent steps (leases, progress reports, timers). */
  readonly idleCpuMsPerSec: Readonly<Record<string, number>>
  /** Mean tokens of the entries each step records: user turn, tool output, thought. */
  readonly recordedTokens: readonly [number, number, number]
  readonly rows: ReadonlyArray<StepRow>
  /** The step rate (steps/s) at which the step p99 passes 50 ms. */
  readonly p99Over50Ms: P99Crossing
  readonly profile: StepProfile
  /** Where the services' main thread spent the profiled steps (embedder worker threads not included). */
  readonly servicesCpu: ReadonlyArray<CpuRow>
  /** What the services' main thread did while each kind of the profiled steps' calls was in flight. */
  readonly servicesCpuInCalls: ReadonlyArray<CallCpu>
  readonly fanOut?: FanOutFigures
}

export interface P99Crossing {
  /** Interpolated between the two measured rates around it; null when no measured rate was on each side. */
  readonly stepsPerSec: number | null
  readonly how: "interpolated" | "above 50 ms at every rate measured" | "below 50 ms at every rate measured"
}

/** Where p99 passes `limitMs`, linearly between the measured step rates on each side of it. */
export const p99Crossing = (
  rows: ReadonlyArray<{ readonly stepsPerSec: number; readonly p99Ms: number }>,
  limitMs = 50,
): P99Crossing => {
  const sorted = [...rows].sort((a, b) => a.stepsPerSec - b.stepsPerSec)
  const over = sorted.findIndex((r) => r.p99Ms > limitMs)
  if (over === -1) return { stepsPerSec: null, how: "below 50 ms at every rate measured" }
  if (over === 0) return { stepsPerSec: null, how: "above 50 ms at every rate measured" }
  const a = sorted[over - 1]!
  const b = sorted[over]!
  const rate = a.stepsPerSec + ((limitMs - a.p99Ms) * (b.stepsPerSec - a.stepsPerSec)) / (b.p99Ms - a.p99Ms)
  return { stepsPerSec: Number(rate.toFixed(1)), how: "interpolated" }
}

const cpuProfileProbe = fileURLToPath(new URL("./cpu-profile-probe.ts", import.meta.url))
const repoRoot = fileURLToPath(new URL("../../", import.meta.url))

/** Asks the services' process (started with the probe) for something over IPC and waits for its answer. */
const askProcess = (target: ServiceProcess, message: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const onMessage = (m: unknown) => {
      if (typeof m === "object" && m !== null && typeof (m as { cpuProfile?: unknown }).cpuProfile === "string") {
        target.child.off("message", onMessage)
        resolve((m as { cpuProfile: string }).cpuProfile)
      }
    }
    target.child.on("message", onMessage)
    target.child.send(message, (error) => {
      if (error) reject(error)
    })
  })

/**
 * Stops the services' profile and keeps it as `<dir>/<name>.cpuprofile`, with the probe's garbage collections
 * (`.cpuprofile.gc.json`) and allocation sample (`.heapprofile`) beside it.
 */
const keepProfile = async (target: ServiceProcess, dir: string, name: string): Promise<string> => {
  mkdirSync(dir, { recursive: true })
  const written = await askProcess(target, "cpuProfileStop")
  const profiled = join(dir, `${name}.cpuprofile`)
  copyFileSync(written, profiled)
  copyFileSync(`${written}.gc.json`, `${profiled}.gc.json`)
  copyFileSync(`${written}.heapprofile`, join(dir, `${name}.heapprofile`))
  return profiled
}

/**
 * The monotonic clock a V8 CPU profile's sample times are on (µs; process.hrtime's, in every process of the
 * machine) minus this process's performance.now() in µs: the step calls' times moved onto a profile's.
 */
const monotonicOffsetUs = () => Number(process.hrtime.bigint() / 1_000n) - performance.now() * 1_000

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const mean = (xs: ReadonlyArray<number>) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length)
const round = (x: number, digits: number) => Number(x.toFixed(digits))

/** Runs `body` over `items` with at most `limit` at a time. */
const forEachLimited = async <A>(
  items: ReadonlyArray<A>,
  limit: number,
  body: (item: A, i: number) => Promise<void>,
) => {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++
        await body(items[i]!, i)
      }
    }),
  )
}

const HISTORY_ORIGINS: ReadonlyArray<Origin> = ["USER", "INTERNAL", "SYSTEM", "USER", "ADVISOR", "INTERNAL"]

/** Events the background projections (fading, long-term) have not worked off, summed over their partitions. */
const backgroundBehind = (status: Status) =>
  status.partitions.filter((p) => p.background).reduce((sum, p) => sum + p.lag, 0)

/**
 * Waits until the background projections (working, fade, memory) have done all their work and nothing
 * more is being written: every partition's report says it has no work behind (lag 0) or that its work
 * is done up to its projection's position (`seq` ≥ `applied`: nothing applied is left to fade or to
 * store; a lag can stay one or two records above zero on a partition whose work is done), and the
 * log's end did not move between two polls half a second apart. With `minReplicas`, also until that
 * many replicas of each of those services report.
 */
const untilCaughtUp = async (
  nc: WorkingMemoryClient["nc"],
  timeoutMs: number,
  log: (line: string) => void,
  minReplicas?: { readonly services: ReadonlyArray<string>; readonly count: number },
): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  let quiet = 0
  let lastEnd = -1
  let said = Date.now()
  for (;;) {
    const status = await readStatus(nc, 0)
    const background = status.partitions.filter((p) => p.background)
    const pending = background.filter((p) => p.lag > 0 && p.seq < p.applied)
    const behind = backgroundBehind(status)
    const divided =
      minReplicas === undefined ||
      minReplicas.services.every(
        (service) =>
          new Set(status.partitions.filter((p) => p.service === service).map((p) => p.replica)).size >=
          minReplicas.count,
      )
    const still = status.lastSeq === lastEnd
    lastEnd = status.lastSeq
    if (background.length > 0 && pending.length === 0 && still && divided) {
      if (++quiet >= 2) return true
    } else quiet = 0
    if (Date.now() > deadline) {
      log(`    background work still ${behind} events behind after ${timeoutMs / 1_000} s: going on`)
      return false
    }
    if (Date.now() - said > 15_000) {
      said = Date.now()
      log(
        `    log at ${status.lastSeq}; background work ${behind} events behind, ${pending.length} partitions with work pending`,
      )
    }
    await sleep(500)
  }
}

/** Sends a write again while the gateway answers Overloaded (each refusal already waited on by the SDK). */
const untilAccepted = async <A>(write: () => Promise<A>, log: (line: string) => void): Promise<A> => {
  for (;;) {
    try {
      return await write()
    } catch (error) {
      if (!(error instanceof Overloaded)) throw error
      log("    import refused with Overloaded after the SDK's retries: sending it again")
    }
  }
}

/** Imports each agent's history and waits until fading has demoted it to long-term. */
const populate = async (
  nc: WorkingMemoryClient["nc"],
  agents: ReadonlyArray<AgentClient>,
  sizes: StepSizes,
  log: (line: string) => void,
): Promise<number> => {
  const now = Date.now()
  let done = 0
  await forEachLimited(agents, 8, async (agent, k) => {
    await agent.register({ role: "custom", budget: sizes.importBudget })
    for (let from = 0; from < sizes.history; from += DEFAULT_BATCH_ENTRIES) {
      const entries = Array.from({ length: Math.min(DEFAULT_BATCH_ENTRIES, sizes.history - from) }, (_, j) => {
        const i = from + j
        return {
          // Given here, so that a batch sent again after a refusal stores nothing twice.
          requestId: `h-${k}-${i}`,
          origin: HISTORY_ORIGINS[i % HISTORY_ORIGINS.length]!,
          content: memoryText(k * 1_000_003 + i),
          // Ten minutes apart, the last one a step's length before now.
          timestamp: now - (sizes.history - i) * 600_000,
        }
      })
      const result = await untilAccepted(() => agent.recordMany(entries), log)
      const refused = result.results.filter((r) => !r.ok)
      if (refused.length > 0) throw new Error(`${refused.length} entries of ${agent.agentId}'s history were refused`)
    }
    if (++done % 20 === 0) log(`    ${done} agents' history imported`)
  })
  for (let attempt = 0; ; attempt++) {
    if (!(await untilCaughtUp(nc, 4 * 60 * 60_000, log))) throw new Error("fading did not catch up with the import")
    let fewest = Number.POSITIVE_INFINITY
    await forEachLimited(agents, 8, async (agent) => {
      const view = await agent.view()
      fewest = Math.min(fewest, sizes.history - view.entries.length)
    })
    if (fewest >= sizes.demoted) return fewest
    if (attempt >= 5) throw new Error(`only ${fewest} of an agent's ${sizes.history} entries were demoted`)
    log(`    only ${fewest} entries of an agent demoted so far; waiting for fading`)
    // Fading re-evaluates every agent on its timer (WM_FADE_INTERVAL_MS): wait for it.
    await sleep(5_000)
  }
}

interface ReplicaRoutes {
  /** Requests received per replica queue group of the partitioned services (routed or not). */
  readonly received: Map<string, number>
  /** Every such subscription (connection, subject, queue group): what changes when a partition moves. */
  readonly subscriptions: ReadonlySet<string>
}

/** The partitioned services' request subscriptions, from the server's connection list. */
const replicaRoutes = async (monitorUrl: string): Promise<ReplicaRoutes> => {
  const response = await fetch(`${monitorUrl}/connz?subs=detail&limit=1024`)
  const body = (await response.json()) as {
    connections?: Array<{
      cid: number
      subscriptions_list_detail?: Array<{ subject: string; qgroup?: string; msgs?: number }>
    }>
  }
  const received = new Map<string, number>()
  const subscriptions = new Set<string>()
  for (const c of body.connections ?? [])
    for (const s of c.subscriptions_list_detail ?? [])
      if (
        (s.subject.startsWith("wm.api.*.") || s.subject.startsWith(`${ROUTE_ROOT}.`)) &&
        s.qgroup !== undefined &&
        /^wm-(gateway|working)\./.test(s.qgroup)
      ) {
        received.set(s.qgroup, (received.get(s.qgroup) ?? 0) + (s.msgs ?? 0))
        subscriptions.add(`${c.cid} ${s.subject} ${s.qgroup}`)
      }
  return { received, subscriptions }
}

const sameSubscriptions = (a: ReplicaRoutes, b: ReplicaRoutes) =>
  a.subscriptions.size === b.subscriptions.size && [...a.subscriptions].every((s) => b.subscriptions.has(s))

/**
 * Waits until no partition has moved for `quietMs` (the replicas' subscriptions did not change): a lease
 * round is a quarter of the lease TTL, so a few rounds without a move is a settled division.
 */
const untilRoutesSettle = async (monitorUrl: string, quietMs: number, timeoutMs: number): Promise<ReplicaRoutes> => {
  const deadline = Date.now() + timeoutMs
  let last = await replicaRoutes(monitorUrl)
  let since = Date.now()
  for (;;) {
    await sleep(250)
    const now = await replicaRoutes(monitorUrl)
    if (!sameSubscriptions(last, now)) since = Date.now()
    last = now
    if (Date.now() - since >= quietMs || Date.now() > deadline) return last
  }
}

/** Measurements of the fan-out thrown away because a partition moved during them, before reporting one. */
const FAN_OUT_ATTEMPTS = 3

/** The first message of each kind of failed step, one line each. */
const logFailures = (messages: Readonly<Record<string, string>>, log: (line: string) => void) => {
  for (const [kind, message] of Object.entries(messages)) log(`    ${kind}: ${message}`)
}

const GATEWAY_CALLS: ReadonlySet<StepCall> = new Set(["record", "beginStep", "reference", "endStep"])

const stepRow = (
  n: number,
  run: LoopRun,
  cpu: ReadonlyMap<string, number>,
  load: readonly [number, number],
  backgroundBehindAtEnd: number,
): StepRow => {
  const latencies = stepLatencies(run.steps)
  return {
    agents: n,
    steps: run.steps.length,
    stepsPerSec: round(run.endedInWindow / (run.windowMs / 1_000), 2),
    p50Ms: round(latencies.step.p50Ms, 2),
    p99Ms: round(latencies.step.p99Ms, 2),
    calls: Object.fromEntries(
      STEP_CALLS.map((c) => [
        c,
        { p50Ms: round(latencies.calls[c].p50Ms, 2), p99Ms: round(latencies.calls[c].p99Ms, 2) },
      ]),
    ) as StepRow["calls"],
    cpuUsPerStep: Object.fromEntries([...cpu].map(([name, us]) => [name, Math.round(us)])),
    servedPerBuild: round(mean(run.steps.map((s) => s.served)), 1),
    cuesPerBuild: round(mean(run.steps.map((s) => s.cues)), 2),
    buildsWithoutRecall: run.steps.filter((s) => !s.recalled).length,
    backgroundBehindAtEnd,
    contextTokens: Math.round(mean(run.steps.map((s) => s.contextTokens))),
    errors: run.errors,
    load,
  }
}

/** Where the long-term store keeps its records: on disk, as `npm start` keeps them, or in memory. */
export type StepLongTerm = "disk" | "memory"
export const STEP_LONG_TERMS: ReadonlyArray<StepLongTerm> = ["disk", "memory"]

export interface StepOptions {
  readonly sizes: StepSizes
  /** WM_EMBEDDER of each system measured, the first one giving the headline figures. */
  readonly embedders: ReadonlyArray<string>
  readonly longTerm: StepLongTerm
  readonly log: (line: string) => void
  /** Where a CPU profile of the services' main thread is written for each agent count measured. */
  readonly profileDir?: string
}

/** One system, on its own nats-server, with the given embedder: populated, then measured. */
const measureEmbedder = async (
  embedder: string,
  longTerm: StepLongTerm,
  sizes: StepSizes,
  withFanOut: boolean,
  log: (line: string) => void,
  profileDir?: string,
): Promise<EmbedderSteps> => {
  const monitorPort = await freePort()
  const server = await startNatsServer({ config: `http: "127.0.0.1:${monitorPort}"\n` })
  const monitorUrl = `http://127.0.0.1:${monitorPort}`
  const longTermDir = mkdtempSync(join(tmpdir(), "wm-bench-steps-longterm-"))
  let client: WorkingMemoryClient | undefined
  let services: ServiceProcess | undefined
  const replicas: ServiceProcess[] = []
  // Stopped by a signal (a run cut short): the processes this run started go with it.
  const onSignal = (signal: NodeJS.Signals) => {
    for (const p of [services, ...replicas]) p?.child.kill("SIGKILL")
    const natsPid = findPid("nats-server", `-p ${server.port} `)
    if (natsPid !== undefined) process.kill(natsPid, "SIGKILL")
    rmSync(server.storeDir, { recursive: true, force: true })
    rmSync(longTermDir, { recursive: true, force: true })
    process.exit(signal === "SIGINT" ? 130 : 143)
  }
  process.once("SIGINT", onSignal)
  process.once("SIGTERM", onSignal)
  try {
    // Calls that wait long are timed as they are, not sent again.
    client = await WorkingMemoryClient.connect({ servers: server.url, name: "bench-steps", timeoutMs: 120_000 })
    await createBenchTopology(client.nc, server.url)
    // An empty WM_LONGTERM_DIR is the in-memory store.
    const env = { WM_EMBEDDER: embedder, WM_LONGTERM_DIR: longTerm === "disk" ? longTermDir : "" }
    services = spawnService("bench/speed/system-runner.ts", server.url, ["--import", cpuProfileProbe], env)
    await Promise.race([
      Promise.all(
        ["view.get", "budget.hyperfocus.exit", "memory.query"].map((op) =>
          waitUntilServed(client!.nc, apiSubject(READINESS_PROBE, op)),
        ),
      ),
      services.exited(),
    ])
    const largest = Math.max(...sizes.agents)
    const agents = Array.from({ length: largest }, (_, k) => client!.agent(`step-${k}`))

    log(
      `steps (${embedder}, long-term ${longTerm === "disk" ? "on disk" : "in memory"}): importing ${sizes.history} entries of history for each of ${largest} agents (budget ${sizes.importBudget}), until ${sizes.demoted} of each are in long-term...`,
    )
    const populateStart = performance.now()
    const demotedAtLeast = await populate(client.nc, agents, sizes, log)
    const populateSeconds = (performance.now() - populateStart) / 1_000
    const logEvents = (await readStatus(client.nc, 0)).lastSeq
    log(
      `  populated in ${populateSeconds.toFixed(0)} s: at least ${demotedAtLeast} entries per agent in long-term, ${logEvents} events in the log`,
    )
    await forEachLimited(agents, 16, async (agent) => void (await agent.retuneBudget(sizes.budget)))

    const natsPid = findPid("nats-server", `-p ${server.port} `)
    const pids = new Map<string, number>([
      ["services", services.child.pid ?? 0],
      ["bench", process.pid],
      ...(natsPid !== undefined ? [["nats-server", natsPid] as const] : []),
    ])
    await untilCaughtUp(client.nc, 10 * 60_000, log)
    if (profileDir !== undefined) await askProcess(services, "cpuProfileStart")
    const idleStart = sampleCpu(pids)
    await sleep(sizes.idleSeconds * 1_000)
    const idleEnd = sampleCpu(pids)
    if (profileDir !== undefined) {
      const profiled = await keepProfile(services, profileDir, `idle-${embedder}`)
      log(`  the services' CPU profile while no agent steps: ${profiled} (beside it: .gc.json, .heapprofile)`)
    }
    const idleCpuMsPerSec = Object.fromEntries(
      [...cpuPerOperation(idleStart, idleEnd, sizes.idleSeconds)].map(([name, us]) => [name, round(us / 1_000, 1)]),
    )
    log(`  idle: CPU ms per second ${JSON.stringify(idleCpuMsPerSec)}`)
    let stepCounter = 0
    const seedOf = (agent: number, step: number) => agent * 1_000_003 + 500_000 + step + stepCounter
    const rows: StepRow[] = []
    const recorded: Array<readonly [number, number, number]> = []
    for (const n of sizes.agents) {
      await untilCaughtUp(client.nc, 10 * 60_000, log)
      const loadStart = loadavg()[0]!
      let before = sampleCpu(pids)
      let after = before
      if (profileDir !== undefined) await askProcess(services, "cpuProfileStart")
      const run = await runAgentLoops(
        agents.slice(0, n),
        { warmupMs: sizes.warmupSeconds * 1_000, measureMs: sizes.seconds * 1_000 },
        seedOf,
        (edge) => {
          if (edge === "open") before = sampleCpu(pids)
          else after = sampleCpu(pids)
        },
      )
      stepCounter += 100_000
      const backgroundBehindAtEnd = backgroundBehind(await readStatus(client.nc, 0))
      if (profileDir !== undefined) {
        const profiled = await keepProfile(services, profileDir, `steps-${embedder}-${n}-agents`)
        log(`  the services' CPU profile of the ${n}-agent row: ${profiled} (beside it: .gc.json, .heapprofile)`)
      }
      const row = stepRow(
        n,
        run,
        cpuPerOperation(before, after, Math.max(1, run.endedInWindow)),
        [round(loadStart, 2), round(loadavg()[0]!, 2)],
        backgroundBehindAtEnd,
      )
      rows.push(row)
      for (const s of run.steps) recorded.push(s.recordedTokens)
      log(
        `  ${n} agent(s): ${row.steps} steps, ${row.stepsPerSec} steps/s; step p50 ${row.p50Ms} ms, p99 ${row.p99Ms} ms; ` +
          `build p50 ${row.calls.buildContext.p50Ms} ms, p99 ${row.calls.buildContext.p99Ms} ms; record p99 ${row.calls.record.p99Ms} ms; ` +
          `CPU µs/step ${Object.entries(row.cpuUsPerStep)
            .map(([k, v]) => `${k} ${v}`)
            .join(
              ", ",
            )}; ${row.cuesPerBuild} cues of ${row.servedPerBuild} items a build, ${row.buildsWithoutRecall} without their recall; background work ${row.backgroundBehindAtEnd} events behind at the end; load ${row.load.join(" → ")}` +
          (Object.keys(row.errors).length > 0 ? `; errors ${JSON.stringify(row.errors)}` : ""),
      )
      logFailures(run.errorMessages, log)
    }

    log(`  profiling ${sizes.profileSteps} steps of one agent on the wire...`)
    await untilCaughtUp(client.nc, 10 * 60_000, log)
    const tapConnection = await connect({ servers: server.url, name: "bench-tap" })
    let profile: StepProfile
    let servicesCpu: ReadonlyArray<CpuRow>
    let servicesCpuInCalls: ReadonlyArray<CallCpu>
    try {
      const tap = tapWire(tapConnection)
      await tapConnection.flush()
      const listeners = await readListeners(monitorUrl)
      await askProcess(services, "cpuProfileStart")
      const run = await runAgentLoops(
        agents.slice(0, 1),
        { warmupMs: 0, measureMs: sizes.profileSteps * 1_000 },
        (a, s) => seedOf(a, s) + 900_000,
      )
      const profilePath = await askProcess(services, "cpuProfileStop")
      const cpuProfile = JSON.parse(readFileSync(profilePath, "utf8")) as CpuProfile
      servicesCpu = summariseCpuProfile(cpuProfile, repoRoot)
      servicesCpuInCalls = cpuInCalls(cpuProfile, run.steps, monotonicOffsetUs(), repoRoot)
      log(`  the services' CPU profile of those steps: ${profilePath}`)
      await sleep(100)
      await tap.stop()
      profile = profileSteps(run.steps, tap.messages(), listeners, "bench-steps")
    } finally {
      await tapConnection.close()
    }

    let fanOut: FanOutFigures | undefined
    if (withFanOut) {
      const { replicas: count, agents: n, stepsPerAgent, quietMs } = sizes.fanOut
      log(
        `  fan-out: ${count} replicas of the gateway and the working service, ${n} agents stepping ${stepsPerAgent} times each...`,
      )
      // Agents beyond those with a history step with what they record.
      const fleet = Array.from({ length: n }, (_, k) => agents[k] ?? client!.agent(`step-${k}`))
      await forEachLimited(
        fleet.slice(agents.length),
        16,
        async (agent) => void (await agent.register({ role: "custom", budget: sizes.budget })),
      )
      for (let r = 1; r < count; r++)
        replicas.push(spawnService("bench/speed/replica-runner.ts", server.url, [], { WM_EMBEDDER: embedder }))
      await Promise.race([
        untilCaughtUp(client.nc, 5 * 60_000, log, { services: ["gateway", "working"], count }),
        ...replicas.map((r) => r.exited()),
      ])
      // A partition that moves while the fleet steps takes its requests from one replica to another mid-count:
      // such a measurement is thrown away and taken again once the division has settled.
      let attempt = 0
      let settled = false
      let before: ReplicaRoutes
      let after: ReplicaRoutes
      let run: Awaited<ReturnType<typeof runStepsEach>>
      do {
        attempt++
        before = await untilRoutesSettle(monitorUrl, quietMs, 2 * 60_000)
        run = await runStepsEach(fleet, stepsPerAgent, (a, s) => seedOf(a, s + 700_000 + attempt * 10_000))
        after = await replicaRoutes(monitorUrl)
        settled = sameSubscriptions(before, after)
        if (!settled)
          log(
            `    a partition moved while the fleet stepped (attempt ${attempt} of ${FAN_OUT_ATTEMPTS}): measuring again`,
          )
      } while (!settled && attempt < FAN_OUT_ATTEMPTS)
      const sent = (calls: (c: StepCall) => boolean) =>
        run.steps.reduce((sum, s) => sum + s.calls.filter((c) => calls(c.call)).length, 0)
      const services = (["gateway", "working"] as const).map((service) => ({
        service,
        sent: sent((c) => (service === "gateway" ? GATEWAY_CALLS.has(c) : c === "buildContext")),
        received: [...after.received]
          .filter(([queue]) => queue.startsWith(`wm-${service}.`))
          .map(([queue, msgs]) => msgs - (before.received.get(queue) ?? 0)),
      }))
      const latencies = stepLatencies(run.steps)
      fanOut = {
        replicas: count,
        settled,
        agents: n,
        stepsPerAgent,
        services,
        maxShareReceived: round(
          Math.max(...services.flatMap((s) => s.received.map((r) => (s.sent > 0 ? r / s.sent : 0)))),
          3,
        ),
        stepP50Ms: round(latencies.step.p50Ms, 2),
        stepP99Ms: round(latencies.step.p99Ms, 2),
      }
      log(
        `  fan-out: ${services.map((s) => `${s.service} sent ${s.sent}, received ${s.received.join("/")}`).join("; ")}; ` +
          `largest share one replica received ${fanOut.maxShareReceived}` +
          (Object.keys(run.errors).length > 0 ? `; failed steps ${JSON.stringify(run.errors)}` : "") +
          (settled
            ? ""
            : `; partitions still moved after ${FAN_OUT_ATTEMPTS} attempts: not a measurement of the division`),
      )
      logFailures(run.errorMessages, log)
    }

    return {
      embedder,
      longTerm,
      populate: {
        agents: largest,
        entriesPerAgent: sizes.history,
        demotedAtLeast,
        seconds: round(populateSeconds, 1),
        logEvents,
      },
      idleCpuMsPerSec,
      recordedTokens: [0, 1, 2].map((i) => Math.round(mean(recorded.map((r) => r[i]!)))) as unknown as readonly [
        number,
        number,
        number,
      ],
      rows,
      p99Over50Ms: p99Crossing(rows),
      profile,
      servicesCpu,
      servicesCpuInCalls,
      ...(fanOut ? { fanOut } : {}),
    }
  } finally {
    await client?.close()
    for (const r of replicas) await stopChild(r.child)
    if (services) await stopChild(services.child)
    await server.stop()
    rmSync(longTermDir, { recursive: true, force: true })
    process.off("SIGINT", onSignal)
    process.off("SIGTERM", onSignal)
  }
}

export const measureSteps = async (options: StepOptions): Promise<ReadonlyArray<EmbedderSteps>> => {
  const out: EmbedderSteps[] = []
  for (const [i, embedder] of options.embedders.entries())
    out.push(await measureEmbedder(embedder, options.longTerm, options.sizes, i === 0, options.log, options.profileDir))
  return out
}
