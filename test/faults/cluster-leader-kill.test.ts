/**
 * A three-node JetStream cluster with the event stream at three replicas:
 * the stream leader is SIGKILLed mid-ingest. Publishing goes on through the
 * election (retries keep their dedupe ids), nothing acknowledged is lost or
 * stored twice, the views converge, and the killed node, restarted, rejoins
 * and catches up: it ends up leading the stream and serving the whole log
 * from its own store.
 */
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { type NatsCluster, type NatsServerProcess, startNatsCluster } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import type { GatewayShape } from "../../services/gateway/gateway.ts"
import type { WorkingShape } from "../../services/working/working.ts"
import { eventually } from "../support/eventually.ts"
import { duplicateEvents, readRecords, sleep, teardown, waitQuiet } from "./support/audit.ts"
import { expectEachAcknowledgedOnce, expectViewsEqualRebuild } from "./support/cluster-checks.ts"
import { callUntilAnswered, contentFor, newStats, pool } from "./support/driver.ts"
import { recordFigures } from "./support/figures.ts"
import { gatewayLayer, gatewayOf, type InProcess, startInProcess, workingLayer, workingOf } from "./support/services.ts"
import { makeStreamLeader, untilCurrentReplica } from "./support/stream-leadership.ts"

const AGENTS = ["cl-0", "cl-1", "cl-2", "cl-3"]
const RECORDS = 2_000
const AFTER_REJOIN = 200
const IN_FLIGHT = 16
const KILL_AFTER = 600

let cluster: NatsCluster
let services: InProcess<unknown>
let client: WorkingMemoryClient
let nc: NatsConnection
let jsm: JetStreamManager
let working: WorkingShape
let gateway: GatewayShape

beforeAll(async () => {
  cluster = await startNatsCluster(3)
  const settings = { replicas: 3 }
  services = await startInProcess(
    Layer.mergeAll(workingLayer(cluster.servers, settings), gatewayLayer(cluster.servers, settings)),
  )
  working = await workingOf(services)
  gateway = await gatewayOf(services)
  client = await WorkingMemoryClient.connect({ servers: cluster.servers, timeoutMs: 3_000 })
  nc = await connect({ servers: [...cluster.servers], maxReconnectAttempts: -1, reconnectTimeWait: 250 })
  jsm = await jetstreamManager(nc, { timeout: 5_000 })
})
afterAll(() =>
  teardown(
    () => nc?.close(),
    () => client?.close(),
    () => services?.stop(),
    () => cluster?.stop(),
  ),
)

const streamInfo = () => eventually("stream info", () => jsm.streams.info(EVENTS_STREAM), 60_000, 250)
const nodeNamed = (name: string | undefined): NatsServerProcess | undefined =>
  cluster.nodes.find((n) => n.name === name)

it("the stream leader killed mid-ingest: no acknowledged loss, no duplicates, and the node rejoins and catches up", async () => {
  for (const id of AGENTS) await client.agent(id).register({ role: "custom", budget: 50_000 })
  const initial = await streamInfo()
  expect(initial.config.num_replicas).toBe(3)
  expect(initial.cluster?.replicas?.length).toBe(2)

  const stats = newStats()
  const ackedAt: number[] = []
  let acked = 0
  let duplicateReplies = 0
  let victim: NatsServerProcess | undefined
  let killAt = 0
  let newLeaderAt = 0
  let newLeader = ""

  const killer = (async () => {
    while (acked < KILL_AFTER) await sleep(5)
    const leader = (await streamInfo()).cluster?.leader
    victim = nodeNamed(leader)
    expect(victim, `leader ${leader} is one of the nodes`).toBeDefined()
    killAt = Date.now()
    await victim!.kill()
    const info = await eventually(
      "a new stream leader",
      async () => {
        const i = await jsm.streams.info(EVENTS_STREAM)
        return i.cluster?.leader !== undefined && i.cluster.leader !== victim!.name ? i : undefined
      },
      60_000,
      100,
    )
    newLeaderAt = Date.now()
    newLeader = info.cluster!.leader!
  })()

  const record = (i: number) => async () => {
    const agentId = AGENTS[i % AGENTS.length]!
    const r = await callUntilAnswered(
      client,
      agentId,
      "recordEntry",
      { requestId: `cl-r${i}`, origin: "USER", content: contentFor(i) },
      stats,
    )
    if (r === undefined) return
    acked++
    ackedAt.push(Date.now())
    if (r.duplicate) duplicateReplies++
  }
  const started = Date.now()
  await pool(
    Array.from({ length: RECORDS }, (_, i) => i),
    IN_FLIGHT,
    (i) => record(i)(),
  )
  const ingestMillis = Date.now() - started
  await killer

  // The killed node comes back on its port and store while writes go on; it must catch up.
  const restartAt = Date.now()
  await victim!.restart()
  await pool(
    Array.from({ length: AFTER_REJOIN }, (_, i) => RECORDS + i),
    IN_FLIGHT,
    (i) => record(i)(),
  )
  await untilCurrentReplica(jsm, victim!.name)
  const caughtUpMs = Date.now() - restartAt

  const last = await waitQuiet(cluster.servers, () => [working.appliedSeq(), gateway.appliedSeq()], {
    quietMs: 1_500,
    timeoutMs: 90_000,
  })
  const expectedState = (await jsm.streams.info(EVENTS_STREAM)).state
  expect(expectedState.last_seq).toBe(last)

  // Hand the stream's leadership to the restarted node, so that what it serves comes from its own store.
  const stepdowns = await makeStreamLeader(nc, jsm, victim!.name)
  const ownState = (await jsm.streams.info(EVENTS_STREAM)).state
  expect(ownState.messages).toBe(expectedState.messages)
  expect(ownState.last_seq).toBe(expectedState.last_seq)
  expect(ownState.first_seq).toBe(expectedState.first_seq)
  // Read through the restarted node alone.
  const log = await readRecords(victim!.url)
  expect(log.length).toBe(expectedState.messages)

  // Nothing acknowledged lost, nothing stored twice.
  const counts = expectEachAcknowledgedOnce(log, { stats, acknowledged: acked, sent: RECORDS + AFTER_REJOIN })
  await expectViewsEqualRebuild(log, last, AGENTS, { working, gateway })
  // And the services still serve after all these elections.
  // One agent client for both calls: it carries the write's sequence into the read.
  const first = client.agent(AGENTS[0]!)
  const fresh = await first.record({ origin: "USER", content: "after the failover" })
  expect((await first.buildContext()).items.some((i) => i.entryId === fresh.entryId)).toBe(true)

  const sorted = [...ackedAt].sort((a, b) => a - b)
  let longestGap = 0
  for (let i = 1; i < sorted.length; i++)
    if (sorted[i - 1]! < restartAt) longestGap = Math.max(longestGap, sorted[i]! - sorted[i - 1]!)
  const firstAckAfterKill = sorted.find((t) => t > killAt) ?? Number.NaN

  recordFigures("cluster-leader-kill", {
    nodes: cluster.nodes.length,
    replicas: initial.config.num_replicas,
    recordsSent: RECORDS + AFTER_REJOIN,
    inFlight: IN_FLIGHT,
    acknowledged: acked,
    foundInLog: counts.size,
    duplicatesInLog: [...counts.values()].filter((n) => n > 1).length,
    duplicateEventIds: duplicateEvents(log),
    repliesSayingDuplicate: duplicateReplies,
    sdkGaveUpThenRetriedSameId: stats.noResponse,
    retryableRefusals: stats.retryableRefusals,
    killedLeader: victim!.name,
    killedAfterAcks: KILL_AFTER,
    newLeader,
    newLeaderReportedAfterMs: newLeaderAt - killAt,
    firstAckAfterKillMs: firstAckAfterKill - killAt,
    longestGapBetweenAcksMs: longestGap,
    ingestSeconds: Math.round(ingestMillis / 100) / 10,
    restartedNodeCurrentAfterMs: caughtUpMs,
    stepdownsToMakeItLeader: stepdowns,
    restartedNodeState: { messages: ownState.messages, firstSeq: ownState.first_seq, lastSeq: ownState.last_seq },
    viewsEqualRebuild: ["working", "gateway"],
  })
})
