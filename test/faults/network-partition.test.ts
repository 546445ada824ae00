/**
 * A three-node JetStream cluster whose nodes each live in a network namespace of the test's own: the
 * stream leader — also the node the gateway and the test's SDK client are connected to — is cut off from
 * the other nodes and from every client mid-ingest, then joined again. Its connections stall rather than close, as in a real
 * partition. Writes go on through the majority (retries keep their request ids); after the heal nothing
 * acknowledged is lost, nothing is applied twice, the cut node catches up and serves the whole log from
 * its own store, and every service answers again, through the healed node too.
 */
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { type NatsCluster, startNatsCluster } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import type { GatewayShape } from "../../services/gateway/gateway.ts"
import type { WorkingShape } from "../../services/working/working.ts"
import { eventually } from "../support/eventually.ts"
import { duplicateEvents, readRecords, sleep, teardown, waitQuiet } from "./support/audit.ts"
import { expectEachAcknowledgedOnce, expectViewsEqualRebuild } from "./support/cluster-checks.ts"
import { callUntilAnswered, contentFor, newStats, pool } from "./support/driver.ts"
import { recordFigures } from "./support/figures.ts"
import { createNamespaceNetwork, type NamespaceNetwork, namespacesUnavailable } from "./support/netns.ts"
import { gatewayLayer, gatewayOf, type InProcess, startInProcess, workingLayer, workingOf } from "./support/services.ts"
import { makeStreamLeader, untilCurrentReplica } from "./support/stream-leadership.ts"

const AGENTS = ["np-0", "np-1", "np-2", "np-3"]
const RECORDS = 2_000
const AFTER_HEAL = 200
const IN_FLIGHT = 16
const CUT_AFTER = 600
/** Acknowledgements to see while the node is cut off, before the heal: the majority serves alone. */
const ACKS_WHILE_CUT = 400
/** The name of the test's SDK connection, as the nodes list it. */
const WRITER = "np-writer"

let network: NamespaceNetwork | undefined
let cluster: NatsCluster
let services: InProcess<unknown>
let client: WorkingMemoryClient
let working: WorkingShape
let gateway: GatewayShape
/** One observer connection per node, so that what the test asks never goes through the cut node. */
const observers: Array<{ nc: NatsConnection; jsm: JetStreamManager }> = []

beforeAll(async () => {
  const unavailable = namespacesUnavailable()
  if (unavailable !== undefined) throw new Error(`the partition test needs network namespaces: ${unavailable}`)
  network = createNamespaceNetwork(3)
  cluster = await startNatsCluster(3, "wm", {
    placement: network.nodes.map((n) => ({ host: n.address, command: n.command })),
  })
  const settings = { replicas: 3 }
  services = await startInProcess(
    Layer.mergeAll(workingLayer(cluster.servers, settings), gatewayLayer(cluster.servers, settings)),
  )
  working = await workingOf(services)
  gateway = await gatewayOf(services)
  client = await WorkingMemoryClient.connect({ servers: cluster.servers, timeoutMs: 3_000, name: WRITER })
  for (const url of cluster.servers) {
    const nc = await connect({ servers: [url], maxReconnectAttempts: -1, reconnectTimeWait: 250 })
    observers.push({ nc, jsm: await jetstreamManager(nc, { timeout: 5_000, checkAPI: false }) })
  }
})
afterAll(() =>
  teardown(
    async () => network?.heal(0),
    async () => network?.heal(1),
    async () => network?.heal(2),
    ...observers.map((o) => () => o.nc.close()),
    () => client?.close(),
    () => services?.stop(),
    () => cluster?.stop(),
    async () => network?.remove(),
  ),
)

const streamInfoVia = (node: number) =>
  eventually(
    `stream info through ${cluster.nodes[node]!.name}`,
    () => observers[node]!.jsm.streams.info(EVENTS_STREAM),
    60_000,
    250,
  )

/** The names of the client connections a node holds (its monitoring endpoint). */
const connectionNames = async (node: number): Promise<string[]> => {
  const response = await fetch(`http://${network!.nodes[node]!.address}:8222/connz?limit=1024`)
  const body = (await response.json()) as { connections?: Array<{ name?: string }> }
  return (body.connections ?? []).map((c) => c.name ?? "")
}

/** Moves the stream's leadership to `node`, asking through that node; returns the step-downs it took. */
const makeLeader = (node: number): Promise<number> =>
  makeStreamLeader(observers[node]!.nc, observers[node]!.jsm, cluster.nodes[node]!.name)

it("the stream leader cut off mid-ingest and joined again: no acknowledged loss, nothing applied twice, every service serving", async () => {
  for (const id of AGENTS) await client.agent(id).register({ role: "custom", budget: 50_000 })
  const initial = await streamInfoVia(0)
  expect(initial.config.num_replicas).toBe(3)

  // The node to cut: the one the gateway (which answers writes) is connected to, made the stream leader.
  let target = -1
  for (let i = 0; i < cluster.nodes.length && target < 0; i++)
    if ((await connectionNames(i)).includes("wm-gateway")) target = i
  expect(target, "the gateway's node").toBeGreaterThanOrEqual(0)
  const victim = cluster.nodes[target]!
  const majority = cluster.nodes.findIndex((_, i) => i !== target)
  await makeLeader(target)
  // The writer's own connection on that node too (the client picks a server of the list at random).
  for (let tries = 0; !(await connectionNames(target)).includes(WRITER); tries++) {
    expect(tries, "the writer connected to the node to cut").toBeLessThan(30)
    await client.close()
    client = await WorkingMemoryClient.connect({ servers: cluster.servers, timeoutMs: 3_000, name: WRITER })
  }
  const onVictim = await connectionNames(target)

  const stats = newStats()
  const ackedAt: number[] = []
  let acked = 0
  let duplicateReplies = 0
  let cutAt = 0
  let healAt = 0
  let newLeaderAt = 0
  let newLeader = ""
  let ackedWhileCut = 0

  const partitioner = (async () => {
    while (acked < CUT_AFTER) await sleep(5)
    network!.cut(target)
    cutAt = Date.now()
    console.log(`[network-partition] ${victim.name} cut off at ${new Date(cutAt).toISOString()}`)
    const ackedAtCut = acked
    const info = await eventually(
      "a new stream leader on the majority side",
      async () => {
        const i = await observers[majority]!.jsm.streams.info(EVENTS_STREAM)
        return i.cluster?.leader !== undefined && i.cluster.leader !== victim.name ? i : undefined
      },
      60_000,
      200,
    )
    newLeaderAt = Date.now()
    newLeader = info.cluster!.leader!
    await eventually(
      `${ACKS_WHILE_CUT} writes acknowledged while ${victim.name} is cut off`,
      async () => (acked - ackedAtCut >= ACKS_WHILE_CUT || acked >= RECORDS ? true : undefined),
      150_000,
      100,
    )
    ackedWhileCut = acked - ackedAtCut
    network!.heal(target)
    healAt = Date.now()
    console.log(`[network-partition] ${victim.name} joined again at ${new Date(healAt).toISOString()}`)
  })()

  const record = async (i: number) => {
    const agentId = AGENTS[i % AGENTS.length]!
    const r = await callUntilAnswered(
      client,
      agentId,
      "recordEntry",
      { requestId: `np-r${i}`, origin: "USER", content: contentFor(i) },
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
    record,
  )
  const ingestMillis = Date.now() - started
  await partitioner

  await pool(
    Array.from({ length: AFTER_HEAL }, (_, i) => RECORDS + i),
    IN_FLIGHT,
    record,
  )
  await untilCurrentReplica(observers[majority]!.jsm, victim.name)
  const caughtUpMs = Date.now() - healAt

  const last = await waitQuiet(cluster.servers, () => [working.appliedSeq(), gateway.appliedSeq()], {
    quietMs: 1_500,
    timeoutMs: 90_000,
  })
  const expectedState = (await streamInfoVia(majority)).state
  expect(expectedState.last_seq).toBe(last)

  // What the cut node serves as leader comes from its own store: whatever it held when cut off and
  // never committed is gone, and everything committed without it is there.
  const stepdowns = await makeLeader(target)
  const ownState = (await streamInfoVia(target)).state
  expect(ownState.messages).toBe(expectedState.messages)
  expect(ownState.last_seq).toBe(expectedState.last_seq)
  const log = await readRecords(victim.url)
  expect(log.length).toBe(expectedState.messages)

  const counts = expectEachAcknowledgedOnce(log, { stats, acknowledged: acked, sent: RECORDS + AFTER_HEAL })
  await expectViewsEqualRebuild(log, last, AGENTS, { working, gateway })
  // Every service answers again, for a client of any node, the healed one included.
  for (const url of cluster.servers) {
    const one = await WorkingMemoryClient.connect({ servers: [url], timeoutMs: 5_000 })
    try {
      const agent = one.agent(AGENTS[0]!)
      const fresh = await agent.record({ origin: "USER", content: `after the heal, through ${url}` })
      expect(
        (await agent.buildContext()).items.some((i) => i.entryId === fresh.entryId),
        url,
      ).toBe(true)
    } finally {
      await one.close()
    }
  }

  const sorted = [...ackedAt].sort((a, b) => a - b)
  /** The longest stretch without an acknowledgement between `from` and `to`. */
  const longestGap = (from: number, to: number) => {
    const marks = [from, ...sorted.filter((t) => t > from && t < to), to]
    return Math.max(...marks.slice(1).map((t, i) => t - marks[i]!))
  }
  recordFigures("network-partition", {
    nodes: cluster.nodes.length,
    replicas: initial.config.num_replicas,
    recordsSent: RECORDS + AFTER_HEAL,
    inFlight: IN_FLIGHT,
    acknowledged: acked,
    foundInLog: counts.size,
    duplicatesInLog: [...counts.values()].filter((n) => n > 1).length,
    duplicateEventIds: duplicateEvents(log),
    repliesSayingDuplicate: duplicateReplies,
    sdkGaveUpThenRetriedSameId: stats.noResponse,
    retryableRefusals: stats.retryableRefusals,
    cutNode: victim.name,
    connectionsOnCutNode: onVictim.filter((n) => n.startsWith("wm-") || n === WRITER).sort(),
    cutAfterAcks: CUT_AFTER,
    newLeader,
    newLeaderReportedAfterMs: newLeaderAt - cutAt,
    ackedWhileCut,
    cutForMs: healAt - cutAt,
    longestGapWhileCutMs: longestGap(cutAt, healAt),
    longestGapAfterHealMs: longestGap(healAt, sorted.at(-1)!),
    ingestSeconds: Math.round(ingestMillis / 100) / 10,
    healedNodeCurrentAfterMs: caughtUpMs,
    stepdownsToMakeItLeaderAgain: stepdowns,
    healedNodeState: { messages: ownState.messages, firstSeq: ownState.first_seq, lastSeq: ownState.last_seq },
    viewsEqualRebuild: ["working", "gateway"],
  })
}, 300_000)
