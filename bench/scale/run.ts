/**
 * The scale benchmark: a loopback JetStream cluster (3 nodes, R3 streams), a
 * synthetic log of `events` events for `agents` agents at steady state (the
 * fade worker's demotions keep ~140 entries in each agent's working), and
 * working replicas run as their own processes (services/working/main.ts, as
 * deployed):
 *
 *   - for each replica count N: the largest share of the log one replica
 *     consumes (the events of the partitions its leases hold, counted as the
 *     log was written) and each replica's resident memory once caught up;
 *   - one replica restarted: from its snapshots, then with the snapshots
 *     deleted (a full replay), until every partition answers again;
 *   - one of two replicas SIGKILLed while agents write and read: until its
 *     partitions answer from the survivor, how many acknowledged writes are
 *     missing afterwards and how many reads missed one of the reader's writes.
 */
import { readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { LEASE_BUCKET, leaseKey, SNAPSHOT_BUCKET } from "../../contracts/buckets.ts"
import { partitionCount, partitionOf } from "../../contracts/partitions.ts"
import { settings as allSettings } from "../../contracts/settings.ts"
import { eventSubject } from "../../contracts/subjects.ts"
import { startNatsCluster } from "../../infra/nats-server.ts"
import { type AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { EventLog } from "../../services/platform/log/event-log.ts"
import { Nats } from "../../services/platform/nats/connection.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { gatewayService } from "../../services/system.ts"
import { type ServiceProcess, startServiceProcess } from "../../test/faults/support/services.ts"
import { publishWindowed, syntheticEvents } from "../support/synthetic-log.ts"

export interface ScaleOptions {
  readonly agents: number
  readonly events: number
  readonly replicas: ReadonlyArray<number>
  readonly leaseTtlMs: number
  /** Writes per agent of the victim's partitions during the takeover. */
  readonly takeoverWrites: number
  readonly log: (line: string) => void
}

export interface RestartPhases {
  readonly millis: number
  readonly modulesMs: number
  readonly readyMs: number
  readonly slowestPartitionMs: number
}

export interface ScaleReport {
  readonly agents: number
  readonly events: number
  readonly partitions: number
  readonly clusterNodes: number
  readonly streamReplicas: number
  readonly replicas: ReadonlyArray<number>
  readonly eventsConsumedShare: ReadonlyArray<number>
  readonly rssPerReplicaMB: ReadonlyArray<number>
  readonly restartMsSnapshot: number
  readonly restartMsFullReplay: number
  /** Spawn-to-answer, and the service's own account of when its modules were loaded and it was ready. */
  readonly restartPhases: {
    readonly fromSnapshot: RestartPhases
    /** From snapshots with WM_LEASE_SETTLE_MS=0. */
    readonly fromSnapshotNoSettle: RestartPhases
    readonly fullReplay: RestartPhases
    readonly leaseSettleMs: number
  }
  readonly takeoverMs: number
  readonly lostAcked: number
  readonly wrongAnswers: number
}

/** Entries an agent holds in working once the log is at steady state (~6,300 of its 8,000 tokens). */
const WORKING_ENTRIES = 140

/** The line a service logs once every partition it took has caught up (announce-ready.ts). */
const READY_LINE =
  /ready (\d+) ms after the process started \(modules loaded at (\d+) ms; .* slowest caught up in (\d+) ms, slowest snapshot read in (\d+) ms/

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const encoder = new TextEncoder()

const rssMB = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
  return Math.round((kb / 1024) * 10) / 10
}

export const runScaleBench = async (options: ScaleOptions): Promise<ScaleReport> => {
  const P = partitionCount()
  const cluster = await startNatsCluster(3)
  const url = cluster.servers.join(",")
  const settings = NatsSettings.make({ servers: cluster.servers, name: "wm-bench-gateway", replicas: 3 })
  const children: ServiceProcess[] = []
  let gateway: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined
  let nc: NatsConnection | undefined
  let client: WorkingMemoryClient | undefined
  try {
    // The streams, R3, as the services create them.
    const foundation = EventLog.layer.pipe(Layer.provideMerge(Nats.layer), Layer.provideMerge(settings))
    await Effect.runPromise(
      Effect.gen(function* () {
        const log = yield* EventLog
        yield* log.lastSeq
      }).pipe(Effect.provide(foundation), Effect.scoped),
    )
    nc = await connect({ servers: [...cluster.servers] })

    // The log, counted per partition as it is written.
    const perPartition = new Array<number>(P).fill(0)
    const started = Date.now()
    await publishWindowed(
      nc,
      (function* () {
        // At steady state, as the fade worker keeps it: about a budget's worth of entries in working.
        for (const event of syntheticEvents(options.events, options.agents, { workingEntries: WORKING_ENTRIES })) {
          perPartition[partitionOf(event.agentId, P)]! += 1
          yield { subject: eventSubject(event), data: encoder.encode(JSON.stringify(event)), msgID: event.eventId }
        }
      })(),
    )
    options.log(`log: ${options.events} events for ${options.agents} agents in ${Date.now() - started} ms (R3)`)
    const total = perPartition.reduce((a, b) => a + b, 0)

    gateway = ManagedRuntime.make(gatewayService(settings) as Layer.Layer<unknown, unknown>)
    await gateway.runPromise(Effect.void)
    client = await WorkingMemoryClient.connect({ servers: [...cluster.servers], timeoutMs: 1_000, attempts: 30 })
    // A probe that times out says nothing for its whole timeout: short, so a partition is seen answering
    // within ~0.1 s of when it does.
    const probeClient = await WorkingMemoryClient.connect({
      servers: [...cluster.servers],
      timeoutMs: 100,
      attempts: 1,
    })
    const agentIds = Array.from({ length: options.agents }, (_, a) => `agent-${a}`)
    const probeOf = new Map<number, string>()
    for (const id of agentIds) if (!probeOf.has(partitionOf(id, P))) probeOf.set(partitionOf(id, P), id)

    const compileCache = join(tmpdir(), `wm-scale-node-compile-${process.pid}`)
    /** `settleMs`: a replica started alone (a restart) keeps the default unless told otherwise. */
    const spawn = (replicaId: string, alone = false, settleMs?: number) => {
      const child = startServiceProcess("working", {
        NATS_URL: url,
        WM_STREAM_REPLICAS: "3",
        WM_PARTITIONS: String(P),
        WM_REPLICA_ID: replicaId,
        WM_LEASE_TTL_MS: String(options.leaseTtlMs),
        // As the image sets it: a restarted replica loads its compiled modules from Node's cache.
        NODE_COMPILE_CACHE: compileCache,
        // Processes spawned together start seconds apart on a loaded machine: settle longer. One started
        // alone (a restart) keeps the default.
        ...(alone
          ? settleMs === undefined
            ? {}
            : { WM_LEASE_SETTLE_MS: String(settleMs) }
          : { WM_LEASE_SETTLE_MS: "5000" }),
      })
      children.push(child)
      return child
    }
    const answers = async (partition: number) => {
      const id = probeOf.get(partition)
      if (id === undefined) return true
      return probeClient.call(id, "getView", {}).then(
        () => true,
        () => false,
      )
    }
    /** Until every partition answers (from whichever replica owns it). */
    const allAnswer = async (partitions: ReadonlyArray<number>, timeoutMs = 600_000) => {
      const deadline = Date.now() + timeoutMs
      let pending = [...partitions]
      while (pending.length > 0) {
        if (Date.now() > deadline) throw new Error(`partitions ${pending.join(", ")} did not answer`)
        const results = await Promise.all(pending.map(answers))
        pending = pending.filter((_, i) => !results[i])
        if (pending.length > 0) await sleep(50)
      }
    }
    const allPartitions = Array.from({ length: P }, (_, p) => p)
    /** The replica named in each partition's lease (none while the lease bucket does not exist yet). */
    const owners = async (): Promise<Map<number, string>> => {
      const found = new Map<number, string>()
      try {
        const leases = await new Kvm(nc!).open(LEASE_BUCKET)
        for (const p of allPartitions) {
          const entry = await leases.get(leaseKey("working", p))
          if (entry !== null && entry.operation === "PUT") found.set(p, entry.json<{ replica: string }>().replica)
        }
      } catch {
        found.clear()
      }
      return found
    }
    const balanced = async (ids: ReadonlyArray<string>) => {
      const share = Math.ceil(P / ids.length)
      for (;;) {
        const found = await owners()
        const counts = ids.map((id) => [...found.values()].filter((o) => o === id).length)
        const mine = [...found.values()].every((o) => ids.includes(o))
        if (found.size === P && mine && counts.every((c) => c <= share)) return found
        await sleep(200)
      }
    }
    /** SIGTERM, and time to write the shutdown snapshots before anything is killed. */
    const stopAll = async () => {
      const stopping = children.splice(0)
      for (const child of stopping) if (child.isRunning()) process.kill(child.pid, "SIGTERM")
      const deadline = Date.now() + 120_000
      while (stopping.some((c) => c.isRunning()) && Date.now() < deadline) await sleep(100)
      for (const child of stopping) await child.kill()
    }

    // Shares and memory per replica count.
    const eventsConsumedShare: number[] = []
    const rssPerReplicaMB: number[] = []
    for (const n of options.replicas) {
      const ids = Array.from({ length: n }, (_, i) => `r${n}-${i}`)
      const procs = ids.map((id) => spawn(id))
      const t0 = Date.now()
      const found = await balanced(ids)
      await allAnswer(allPartitions)
      const shares = ids.map(
        (id) => allPartitions.filter((p) => found.get(p) === id).reduce((sum, p) => sum + perPartition[p]!, 0) / total,
      )
      eventsConsumedShare.push(Math.round(Math.max(...shares) * 1000) / 1000)
      rssPerReplicaMB.push(Math.max(...procs.map((p) => rssMB(p.pid))))
      options.log(
        `${n} replica(s): ready in ${Date.now() - t0} ms, largest share ${eventsConsumedShare.at(-1)}, RSS ${rssPerReplicaMB.at(-1)} MB`,
      )
      await stopAll()
    }

    // Restart of one replica: from its snapshots (written at its shutdown), then without them.
    const restart = async (settleMs?: number) => {
      const t0 = Date.now()
      const child = spawn("restarted", true, settleMs)
      await allAnswer(allPartitions)
      const millis = Date.now() - t0
      // The service's own account (announce-ready.ts): when its modules were loaded, when it was ready,
      // and how long its slowest partition took to catch up once taken. Its partitions may answer a
      // moment before it logs that line.
      for (let wait = 0; wait < 200 && !READY_LINE.test(child.output()); wait++) await sleep(50)
      const ready = READY_LINE.exec(child.output())
      return {
        millis,
        readyMs: Number(ready?.[1] ?? 0),
        modulesMs: Number(ready?.[2] ?? 0),
        slowestPartitionMs: Number(ready?.[3] ?? 0),
        slowestSnapshotReadMs: Number(ready?.[4] ?? 0),
      }
    }
    await restart()
    await stopAll()
    const fromSnapshot = await restart()
    await stopAll()
    // The same with no settling (WM_LEASE_SETTLE_MS=0, fit for a replica that runs alone).
    const fromSnapshotNoSettle = await restart(0)
    await stopAll()
    await new Kvm(nc).open(SNAPSHOT_BUCKET).then((b) => b.destroy())
    const fullReplay = await restart()
    await stopAll()
    const restartMsSnapshot = fromSnapshot.millis
    const restartMsFullReplay = fullReplay.millis
    const leaseSettleMs = Number(allSettings.WM_LEASE_SETTLE_MS.default)
    const restartPhases = { fromSnapshot, fromSnapshotNoSettle, fullReplay, leaseSettleMs }
    options.log(
      `restart: ${restartMsSnapshot} ms from snapshots (${fromSnapshotNoSettle.millis} ms without settling), ${restartMsFullReplay} ms replaying the log ` +
        `(modules loaded at ${fromSnapshot.modulesMs} / ${fullReplay.modulesMs} ms, ready at ${fromSnapshot.readyMs} / ${fullReplay.readyMs} ms; default lease settle ${leaseSettleMs} ms)`,
    )

    // Takeover: two replicas, one SIGKILLed while agents write and read.
    const [, victim] = [spawn("keeper"), spawn("victim")]
    const found = await balanced(["keeper", "victim"])
    await allAnswer(allPartitions)
    const victimPartitions = allPartitions.filter((p) => found.get(p) === "victim")
    const writers = agentIds.filter((id) => victimPartitions.includes(partitionOf(id, P))).slice(0, 20)
    const agents = new Map<string, AgentClient>(writers.map((id) => [id, client!.agent(id)]))
    const acked = new Map<string, string[]>(writers.map((id) => [id, []]))
    let wrongAnswers = 0
    let killedAt = 0
    let answeredAt = 0
    const load = Promise.all(
      writers.map(async (id) => {
        const agent = agents.get(id)!
        for (let i = 0; i < options.takeoverWrites; i++) {
          const written = await agent.record({ origin: "USER", content: `Takeover note ${i} of ${id}.` })
          acked.get(id)!.push(written.entryId)
          const view = await agent.view()
          const seen = new Set(view.entries.map((e) => e.id))
          if (!acked.get(id)!.every((e) => seen.has(e))) wrongAnswers++
        }
      }),
    )
    await sleep(500)
    killedAt = Date.now()
    await victim!.kill()
    await allAnswer(victimPartitions)
    answeredAt = Date.now()
    await load
    let lostAcked = 0
    for (const [id, entries] of acked) {
      const view = await agents.get(id)!.view()
      const seen = new Set(view.entries.map((e) => e.id))
      lostAcked += entries.filter((e) => !seen.has(e)).length
    }
    const takeoverMs = answeredAt - killedAt
    options.log(`takeover: ${takeoverMs} ms, ${lostAcked} acknowledged writes lost, ${wrongAnswers} stale answers`)
    await probeClient.close()

    return {
      agents: options.agents,
      events: options.events,
      partitions: P,
      clusterNodes: cluster.nodes.length,
      streamReplicas: 3,
      replicas: options.replicas,
      eventsConsumedShare,
      rssPerReplicaMB,
      restartMsSnapshot,
      restartMsFullReplay,
      restartPhases,
      takeoverMs,
      lostAcked,
      wrongAnswers,
    }
  } finally {
    for (const child of children) await child.kill()
    await client?.close()
    await gateway?.dispose()
    await nc?.close()
    await cluster.stop()
  }
}
