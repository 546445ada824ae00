/**
 * Ingest through the public API against raw JetStream publishes.
 *
 * System: entries recorded with the SDK (`agent.record`, through the
 * gateway) with a bounded window of requests in flight, until the working
 * service has applied the last one (a read with `afterSeq` returns).
 *
 * Raw: `js.publish` with a msgID of the very bytes the gateway stored for
 * the same entries, with the same window, to a stream of its own
 * (`BENCH_RAW`, configured like the event stream) so it does not disturb
 * the system's log.
 */
import { DeliverPolicy, type JetStreamManager, jetstream } from "@nats-io/jetstream"
import { nuid } from "@nats-io/nuid"
import type { NatsConnection } from "@nats-io/transport-node"
import { Effect, ManagedRuntime } from "effect"
import { NotCaughtUp } from "../../contracts/errors.ts"
import { ALL_EVENTS, apiSubject, EVENTS_STREAM } from "../../contracts/subjects.ts"
import type { AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { systemLayer } from "../../services/system.ts"
import { realisticEntry } from "../support/realistic-entries.ts"
import { READINESS_PROBE, waitUntilServed } from "./replay.ts"
import { spawnService, stopChild } from "./services.ts"
import { runWindowed } from "./windowed.ts"

export const RAW_STREAM = "BENCH_RAW"
const RAW_ROOT = "bench.raw"

/**
 * Where the services run:
 * - processes: the services on the ingest path, gateway and working, each in
 *   its own process as deployed (`node services/<name>/main.ts`);
 * - embedded: every service in one process, the embedded default of
 *   `npm start` (fading, long-term and retrieval included);
 * - in-process: every service inside the benchmark's own process.
 */
export type ServicesMode = "processes" | "embedded" | "in-process"
export const SERVICES_MODES: ReadonlyArray<ServicesMode> = ["processes", "embedded", "in-process"]

export interface RunningSystem {
  readonly mode: ServicesMode
  /** The processes the services run in, by name. */
  readonly processes: ReadonlyMap<string, number>
  readonly stop: () => Promise<void>
}

/** Starts the gateway and the working service (see ServicesMode) and waits until both serve. */
export const startSystem = async (mode: ServicesMode, url: string, nc: NatsConnection): Promise<RunningSystem> => {
  const ready = () =>
    Promise.all([
      waitUntilServed(nc, apiSubject(READINESS_PROBE, "view.get")),
      waitUntilServed(nc, apiSubject(READINESS_PROBE, "budget.hyperfocus.exit")),
    ])
  if (mode === "in-process") {
    const runtime = ManagedRuntime.make(systemLayer((name) => NatsSettings.make({ servers: [url], name })))
    await runtime.runPromise(Effect.void)
    await ready()
    return { mode, processes: new Map(), stop: () => runtime.dispose() }
  }
  const scripts: ReadonlyArray<readonly [string, string]> =
    mode === "processes"
      ? [
          ["gateway", "services/gateway/main.ts"],
          ["working", "services/working/main.ts"],
        ]
      : [["services", "bench/speed/system-runner.ts"]]
  const children = scripts.map(([, script]) => spawnService(script, url))
  try {
    await Promise.race([ready(), ...children.map((c) => c.exited())])
  } catch (error) {
    await Promise.all(children.map(({ child }) => stopChild(child)))
    throw error
  }
  return {
    mode,
    processes: new Map(scripts.map(([name], i) => [name, children[i]!.child.pid ?? 0])),
    stop: async () => void (await Promise.all(children.map(({ child }) => stopChild(child)))),
  }
}

export interface IngestOptions {
  readonly entries: number
  readonly window: number
  /** Agents the entries are spread over, round-robin. */
  readonly agents: number
}

export interface SystemIngestRun {
  readonly millis: number
  /** Stream sequences of the run's first and last entry. */
  readonly firstSeq: number
  readonly lastSeq: number
}

/** The realistic entry `i` as a record request. */
const recordRequest = (i: number) => {
  const entry = realisticEntry(i)
  return { origin: entry.origin, content: entry.content, tags: [...entry.tags], emotionalWeight: entry.emotionalWeight }
}

/** `count` fresh agents of a run, and a reader that waits for their writes, all registered. */
const freshAgents = async (client: WorkingMemoryClient, label: string, count: number) => {
  const agents: AgentClient[] = []
  for (let k = 0; k < count; k++) agents.push(client.agent(`ingest-${label}-${k}`))
  const reader = client.agent(`ingest-${label}-reader`)
  await Promise.all([...agents, reader].map((a) => a.register({ role: "supervisor" })))
  return { agents, reader }
}

/** Visible in the working view: a read that waits until the write at `lastSeq` is applied. */
const untilApplied = async (reader: AgentClient, lastSeq: number) => {
  reader.lastSeq = lastSeq
  for (;;) {
    try {
      await reader.view()
      return
    } catch (error) {
      if (!(error instanceof NotCaughtUp)) throw error
    }
  }
}

/**
 * Records `entries` realistic entries through the SDK over fresh agents and
 * waits until the working view has applied the last one.
 */
export const systemIngest = async (
  client: WorkingMemoryClient,
  label: string,
  options: IngestOptions,
): Promise<SystemIngestRun> => {
  const { agents, reader } = await freshAgents(client, label, options.agents)
  let firstSeq = Number.MAX_SAFE_INTEGER
  let lastSeq = 0
  const start = performance.now()
  await runWindowed(options.entries, options.window, async (i) => {
    const r = await agents[i % agents.length]!.record(recordRequest(i))
    if (r.seq > lastSeq) lastSeq = r.seq
    if (r.seq < firstSeq) firstSeq = r.seq
  })
  await untilApplied(reader, lastSeq)
  return { millis: performance.now() - start, firstSeq, lastSeq }
}

/** Entries a batch carries when ingest imports with `entry.recordMany`. */
export const INGEST_BATCH_ENTRIES = 64

/**
 * As `systemIngest`, importing with `entry.recordMany`: batches of INGEST_BATCH_ENTRIES entries, as many
 * batches in flight as make the same window of entries, each agent's batches in turn.
 */
export const systemIngestMany = async (
  client: WorkingMemoryClient,
  label: string,
  options: IngestOptions,
): Promise<SystemIngestRun> => {
  const { agents, reader } = await freshAgents(client, label, options.agents)
  let firstSeq = Number.MAX_SAFE_INTEGER
  let lastSeq = 0
  const batches = Math.ceil(options.entries / INGEST_BATCH_ENTRIES)
  const start = performance.now()
  await runWindowed(batches, Math.max(1, Math.floor(options.window / INGEST_BATCH_ENTRIES)), async (b) => {
    const from = b * INGEST_BATCH_ENTRIES
    const entries = Array.from({ length: Math.min(INGEST_BATCH_ENTRIES, options.entries - from) }, (_, j) =>
      recordRequest(from + j),
    )
    const r = await agents[b % agents.length]!.recordMany(entries)
    const refused = r.results.filter((result) => !result.ok).length
    if (refused > 0) throw new Error(`${refused} entries of a batch were refused`)
    if (r.seq > lastSeq) lastSeq = r.seq
    for (const result of r.results) if (result.ok && result.seq < firstSeq) firstSeq = result.seq
  })
  await untilApplied(reader, lastSeq)
  return { millis: performance.now() - start, firstSeq, lastSeq }
}

export interface StoredEntry {
  readonly agentId: string
  readonly data: Uint8Array
}

/** The EntryRecorded events a system run stored, as the bytes on the stream. */
export const storedEntries = async (nc: NatsConnection, run: SystemIngestRun): Promise<StoredEntry[]> => {
  const consumer = await jetstream(nc).consumers.get(EVENTS_STREAM, {
    filter_subjects: ALL_EVENTS,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: run.firstSeq,
  })
  const out: StoredEntry[] = []
  const messages = await consumer.consume()
  for await (const m of messages) {
    const [, , , agentId, kind] = m.subject.split(".")
    // Other events of an entry (a fade, when the fade worker runs) share its subject.
    if (kind === "entry" && agentId !== undefined && m.json<{ _tag?: unknown }>()._tag === "EntryRecorded") {
      out.push({ agentId, data: m.data })
    }
    if (m.seq >= run.lastSeq) break
  }
  await messages.close().catch(() => undefined)
  return out
}

/** Creates the raw stream with the event stream's storage, replicas and dedupe window. */
export const ensureRawStream = async (jsm: JetStreamManager): Promise<void> => {
  const events = (await jsm.streams.info(EVENTS_STREAM)).config
  await jsm.streams.delete(RAW_STREAM).catch(() => undefined)
  await jsm.streams.add({
    name: RAW_STREAM,
    subjects: [`${RAW_ROOT}.>`],
    storage: events.storage,
    retention: events.retention,
    discard: events.discard,
    num_replicas: events.num_replicas,
    duplicate_window: events.duplicate_window,
    max_msg_size: events.max_msg_size,
  })
}

/**
 * Publishes `count` messages to the raw stream with `window` acknowledgements
 * outstanding, cycling over `payloads`; each with a fresh msgID, on a
 * per-entry subject as the gateway's. Returns the milliseconds until the
 * last acknowledgement.
 */
export const rawPublishMillis = async (
  nc: NatsConnection,
  payloads: ReadonlyArray<StoredEntry>,
  count: number,
  window: number,
): Promise<number> => {
  if (payloads.length === 0) throw new Error("no payloads to publish")
  const js = jetstream(nc)
  const start = performance.now()
  await runWindowed(count, window, (i) => {
    const p = payloads[i % payloads.length]!
    const id = nuid.next()
    return js.publish(`${RAW_ROOT}.${p.agentId}.entry.${id}`, p.data, { msgID: `${p.agentId}:recordEntry:${id}` })
  })
  return performance.now() - start
}
