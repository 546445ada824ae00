/**
 * A pinned tenant's requests: the server maps them over the shared partitions (contracts/routing.ts) and the
 * replica answering for the slot forwards each, once, to the replica answering for the tenant's partition.
 * The placement is this process's environment, set before anything reads it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { deploymentPlacement, partitionCount, partitionOf } from "../contracts/partitions.ts"
import { partitionOfSlot, slotCount, slotOf } from "../contracts/routing.ts"
import { freePort, type NatsServerProcess, startNatsServer } from "../infra/nats-server.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import { teardown } from "./faults/support/audit.ts"
import { gatewayLayer, type InProcess, startInProcess } from "./faults/support/services.ts"
import { eventually } from "./support/eventually.ts"
import { AGENTS, received, startReplica, stepEach, subscriptions } from "./support/routing.ts"

const PINNED = Array.from({ length: 12 }, (_, i) => `acme-${i}`)
process.env.WM_TENANTS = `acme=${PINNED.join(",")}`
process.env.WM_PARTITION_PINS = "acme=0-1"

describe("a pinned tenant's requests", () => {
  let server: NatsServerProcess
  let monitorUrl: string
  let gateway: InProcess<unknown>
  let replicas: Array<Awaited<ReturnType<typeof startReplica>>>
  let client: WorkingMemoryClient

  beforeAll(async () => {
    const monitorPort = await freePort()
    monitorUrl = `http://127.0.0.1:${monitorPort}`
    server = await startNatsServer({ config: `http: "127.0.0.1:${monitorPort}"\n` })
    gateway = await startInProcess(gatewayLayer(server.url))
    replicas = [await startReplica(server.url, "pins-a"), await startReplica(server.url, "pins-b")]
    client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 3_000, attempts: 8 })
  })
  afterAll(() =>
    teardown(
      () => client?.close(),
      ...(replicas ?? []).map((r) => () => r.services.stop()),
      () => gateway?.stop(),
      () => server?.stop(),
    ),
  )

  it("are mapped over the shared partitions and forwarded once to the tenant's partition", async () => {
    await eventually("the partitions split between the two replicas", () =>
      replicas.every((r) => r.working.views.ready().length === partitionCount() / 2) ? true : undefined,
    )
    const placement = deploymentPlacement()
    expect(placement.shared).not.toContain(0)
    await stepEach(client, [...PINNED, ...AGENTS.slice(0, 10)])

    const subs = await subscriptions(monitorUrl)
    const forwarded = subs
      .filter((s) => s.subject.startsWith(`wm.route.${partitionCount()}.p`) && s.subject.endsWith(".context.build"))
      .reduce((n, s) => n + (s.msgs ?? 0), 0)
    // Each pinned agent's build was mapped to a shared partition's slot; when another replica answers for that
    // slot, it was forwarded to partition 0 or 1.
    const ownerOf = (partition: number) => replicas.find((r) => r.working.views.ready().includes(partition))
    const crossing = PINNED.filter(
      (id) => ownerOf(partitionOfSlot(placement, slotOf(id, slotCount(placement)))) !== ownerOf(partitionOf(id)),
    )
    expect(crossing.length).toBeGreaterThan(0)
    expect(forwarded).toBeGreaterThanOrEqual(crossing.length)
    for (const id of PINNED) expect([0, 1]).toContain(partitionOf(id))
    for (const r of replicas) expect(received(subs, r.replicaId).unrouted).toBe(0)
  })
})
