/**
 * What the questions a replica can ask about where a partition stands cost the server: the partition's last
 * stored record (a `last_by_subj` get on the wildcard `wm.evt.<p>.>`, what reads waiting for another
 * partition's sequence ask, partition-position.ts), its first record after a recent sequence (`next_by_subj`
 * from `since` records before the log's end, what the position tracker asks) and the partition's consumer (one
 * consumer info). Measured on a log of the events stream's own configuration and subject layout: each
 * agent's step subject and one subject per entry, three records per entry, round-robin over agents (so every
 * partition's last record is recent), synthetic payloads.
 */
import { DeliverPolicy, jetstream, jetstreamManager, type MsgRequest } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Effect } from "effect"
import { agentStepSubject, EVENTS_STREAM, entrySubject, partitionEvents } from "../../contracts/subjects.ts"
import { natsServerVersion, startNatsServer } from "../../infra/nats-server.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { ensureTopology } from "../../services/platform/nats/topology.ts"
import { cpuMillis, findPid } from "../speed/cpu.ts"
import { percentile } from "../speed/stats.ts"

export interface PositionOptions {
  readonly events: number
  readonly agents: number
  readonly payloadBytes: number
  /** Requests of each kind, round-robin over the 16 partitions. */
  readonly requests: number
  /** How far back the next-record question starts: about a second of appends for a tracker asking every second. */
  readonly since: number
}

export interface ProofCost {
  readonly p50Ms: number
  readonly p99Ms: number
  /** nats-server CPU per request (from /proc; null elsewhere). */
  readonly serverCpuMs: number | null
}

export interface PositionFigures {
  readonly natsServer: string | null
  readonly events: number
  readonly subjects: number
  readonly bytes: number
  readonly partitionLastRecord: ProofCost
  /** The partition's first record at or after `since` records before the log's end (what the tracker asks). */
  readonly partitionNextRecord: ProofCost
  readonly consumerPosition: ProofCost
}

const PARTITIONS = 16
const WINDOW = 256

const round = (x: number, digits = 3) => Number(x.toFixed(digits))

const timeRequests = async (
  pid: number | undefined,
  requests: number,
  request: (i: number) => Promise<unknown>,
): Promise<ProofCost> => {
  const millis: number[] = []
  const cpuBefore = pid === undefined ? undefined : cpuMillis(pid)
  for (let i = 0; i < requests; i++) {
    const start = performance.now()
    await request(i)
    millis.push(performance.now() - start)
  }
  const cpuAfter = pid === undefined ? undefined : cpuMillis(pid)
  return {
    p50Ms: round(percentile(millis, 50)),
    p99Ms: round(percentile(millis, 99)),
    serverCpuMs: cpuBefore === undefined || cpuAfter === undefined ? null : round((cpuAfter - cpuBefore) / requests),
  }
}

export const measurePositions = async (
  options: PositionOptions,
  log: (line: string) => void = () => undefined,
): Promise<PositionFigures> => {
  const server = await startNatsServer()
  const nc = await connect({ servers: server.url, noAsyncTraces: true })
  try {
    const jsm = await jetstreamManager(nc)
    const js = jetstream(nc)
    await Effect.runPromise(
      Effect.flatMap(NatsSettings, (settings) => ensureTopology(jsm, settings)).pipe(
        Effect.provide(NatsSettings.make({ servers: [server.url], name: "bench-positions" })),
      ),
    )
    const agents = Array.from({ length: options.agents }, (_, i) => `agent-${i}`)
    const payload = new Uint8Array(options.payloadBytes).fill(120)
    let window: Promise<unknown>[] = []
    for (let i = 0; i < options.events; i++) {
      const agentId = agents[i % agents.length] as string
      const entry = Math.floor(i / (3 * agents.length))
      const subject = i % 3 === 0 ? agentStepSubject(agentId) : entrySubject(agentId, `e${entry}-${i % agents.length}`)
      window.push(js.publish(subject, payload))
      if (window.length >= WINDOW) {
        await Promise.all(window)
        window = []
      }
      if ((i + 1) % 100_000 === 0) log(`  ${i + 1} events stored`)
    }
    await Promise.all(window)
    const state = (await jsm.streams.info(EVENTS_STREAM)).state
    const pid = findPid("nats-server", `-p ${server.port} `)

    // Both questions about the same partitions: one ordered consumer each, caught up, as a replica follows them.
    const followers = await Promise.all(
      Array.from({ length: PARTITIONS }, async (_, p) => {
        const consumer = await js.consumers.get(EVENTS_STREAM, {
          filter_subjects: partitionEvents(p),
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: state.last_seq,
        })
        const messages = await consumer.consume({ expires: 2_000, callback: () => undefined })
        return { name: (await consumer.info(true)).name, stop: () => messages.close() }
      }),
    )
    try {
      await new Promise((resolve) => setTimeout(resolve, 500))
      const partitionLastRecord = await timeRequests(pid, options.requests, (i) =>
        jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: partitionEvents(i % PARTITIONS) }),
      )
      const from = Math.max(1, state.last_seq - options.since)
      const partitionNextRecord = await timeRequests(pid, options.requests, (i) =>
        jsm.streams.getMessage(EVENTS_STREAM, {
          seq: from,
          next_by_subj: partitionEvents(i % PARTITIONS),
        } as unknown as MsgRequest),
      )
      const consumerPosition = await timeRequests(pid, options.requests, (i) =>
        jsm.consumers.info(EVENTS_STREAM, (followers[i % PARTITIONS] as (typeof followers)[number]).name),
      )
      return {
        natsServer: natsServerVersion() ?? null,
        events: state.messages,
        subjects: state.num_subjects ?? 0,
        bytes: state.bytes,
        partitionLastRecord,
        partitionNextRecord,
        consumerPosition,
      }
    } finally {
      await Promise.all(followers.map((f) => f.stop()))
    }
  } finally {
    await nc.close()
    await server.stop()
  }
}
