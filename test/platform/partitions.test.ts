/**
 * Working replicas divide the agents by partition through leases in NATS:
 * each agent is answered by the replica that owns its partition, from a
 * view equal to the rebuild from the log; a replica killed hands its
 * partitions to the survivor, and no acknowledged write is lost nor any
 * read answered from a view that misses it.
 */
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LEASE_BUCKET, leaseKey } from "../../contracts/buckets.ts"
import { partitionCount, partitionOf } from "../../contracts/partitions.ts"
import { agentIdOfEventSubject, partitionOfEventSubject } from "../../contracts/subjects.ts"
import { viewResponseOf } from "../../domain/agent-view.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { workingService } from "../../services/system.ts"
import type { WorkingShape } from "../../services/working/working.ts"
import { asJson, readRecords, rebuildViews, snapshotOf, teardown } from "../faults/support/audit.ts"
import {
  gatewayLayer,
  type InProcess,
  type ServiceProcess,
  settingsFor,
  startInProcess,
  startServiceProcess,
  workingOf,
} from "../faults/support/services.ts"
import { eventually } from "../support/eventually.ts"

const P = partitionCount()
const TTL = 2_000
const AGENTS = Array.from({ length: 50 }, (_, i) => `fleet-${i}`)

const replica = async (url: string, replicaId: string) => {
  const services = await startInProcess(
    workingService(settingsFor(url)(`wm-working-${replicaId}`), PartitionSettings.make({ leaseTtlMs: TTL, replicaId })),
  )
  return { services, working: await workingOf(services) }
}

const balanced = (...replicas: ReadonlyArray<WorkingShape>) =>
  replicas.every((r) => r.answeringPartitions().length === Math.ceil(P / replicas.length)) || undefined

/** The replica named in each partition's lease. */
const leaseOwners = async (nc: NatsConnection): Promise<Map<number, string>> => {
  const kv = await new Kvm(nc).open(LEASE_BUCKET)
  const owners = new Map<number, string>()
  for (let p = 0; p < P; p++) {
    const entry = await kv.get(leaseKey("working", p))
    if (entry !== null && entry.operation === "PUT") owners.set(p, entry.json<{ replica: string }>().replica)
  }
  return owners
}

const withoutPosition = (view: unknown) => ({ ...(view as object), appliedSeq: 0 })

describe("two working replicas, fifty agents", () => {
  let server: NatsServerProcess
  let gateway: InProcess<unknown>
  let a: Awaited<ReturnType<typeof replica>>
  let b: Awaited<ReturnType<typeof replica>>
  let client: WorkingMemoryClient
  let nc: NatsConnection

  beforeAll(async () => {
    server = await startNatsServer()
    gateway = await startInProcess(gatewayLayer(server.url))
    a = await replica(server.url, "replica-a")
    b = await replica(server.url, "replica-b")
    client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000, attempts: 8 })
    nc = await connect({ servers: server.url })
  })
  afterAll(() =>
    teardown(
      () => nc?.close(),
      () => client?.close(),
      () => b?.services.stop(),
      () => a?.services.stop(),
      () => gateway?.stop(),
      () => server?.stop(),
    ),
  )

  it("answers each agent from the replica that owns its partition, with the view the log rebuilds", async () => {
    await eventually("the partitions split between the replicas", () => balanced(a.working, b.working))
    for (const id of AGENTS) {
      const agent = client.agent(id)
      await agent.register({ role: "main" })
      await agent.record({ origin: "USER", content: `Agent ${id} has to ship report number ${id.length}.` })
      await agent.record({ origin: "INTERNAL", content: "Check the numbers twice." })
      await agent.buildContext()
    }

    // Every partition leased: on a loaded machine a lease may lapse for a moment before its renewal lands.
    const owners = await eventually("every partition to be leased", async () => {
      const leased = await leaseOwners(nc)
      return leased.size === P ? leased : undefined
    })
    expect(owners.size).toBe(P)
    const records = await readRecords(server.url)
    const rebuilt = rebuildViews(records)
    // Every event went to its agent's partition.
    for (const r of records)
      expect(partitionOfEventSubject(r.subject)).toBe(partitionOf(agentIdOfEventSubject(r.subject)))

    for (const id of AGENTS) {
      const [owner, other] =
        owners.get(partitionOf(id)) === "replica-a" ? [a.working, b.working] : [b.working, a.working]
      // A lease suspended by a stalled event loop (a loaded machine, TTL 2 s here) answers again once renewed.
      await eventually(`${id}'s owner to answer`, () => owner.owns(id) || undefined)
      // The other replica holds nothing of the agent and would not answer for it.
      expect(other.owns(id)).toBe(false)
      expect(other.view(id)).toBeUndefined()
      expect(snapshotOf(owner.view(id))).toEqual(snapshotOf(rebuilt.get(id)))
      const answered = await client.agent(id).view()
      expect(withoutPosition(answered)).toEqual(withoutPosition(asJson(viewResponseOf(rebuilt.get(id)!, 0))))
    }
    // Each replica decoded only its own partitions' events.
    for (const r of [a.working, b.working]) {
      const mine = new Set(r.answeringPartitions())
      expect(r.agents().every((id) => mine.has(partitionOf(id)))).toBe(true)
    }
  })
})

describe("a working replica killed under load", () => {
  let server: NatsServerProcess
  let gateway: InProcess<unknown>
  let survivor: Awaited<ReturnType<typeof replica>>
  let victim: ServiceProcess
  let client: WorkingMemoryClient

  beforeAll(async () => {
    server = await startNatsServer()
    gateway = await startInProcess(gatewayLayer(server.url))
    survivor = await replica(server.url, "survivor")
    victim = startServiceProcess("working", {
      NATS_URL: server.url,
      WM_LEASE_TTL_MS: String(TTL),
      WM_REPLICA_ID: "victim",
      WM_PARTITIONS: String(P),
    })
    client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000, attempts: 10 })
  })
  afterAll(() =>
    teardown(
      () => client?.close(),
      () => victim?.kill(),
      () => survivor?.services.stop(),
      () => gateway?.stop(),
      () => server?.stop(),
    ),
  )

  it("moves its partitions to the survivor; no acknowledged write is lost and no read misses one", async () => {
    await eventually(
      "the partitions to split",
      () => survivor.working.answeringPartitions().length === Math.ceil(P / 2) || undefined,
      30_000,
    )
    const acked = new Map<string, string[]>(AGENTS.map((id) => [id, []]))
    // One client per agent: it asks each read to wait for the agent's own last write.
    const agents = new Map(AGENTS.map((id) => [id, client.agent(id)]))
    for (const agent of agents.values()) await agent.register({ role: "main" })

    let stale = 0
    const round = async (n: number) => {
      for (const id of AGENTS) {
        const agent = agents.get(id)!
        const written = await agent.record({ origin: "USER", content: `Round ${n} note for ${id}.` })
        acked.get(id)!.push(written.entryId)
        const view = await agent.view()
        const seen = new Set(view.entries.map((e) => e.id))
        if (!acked.get(id)!.every((e) => seen.has(e))) stale++
      }
    }
    await round(0)
    await victim.kill()
    for (let n = 1; n <= 3; n++) await round(n)

    await eventually(
      "the survivor to own every partition",
      () => survivor.working.answeringPartitions().length === P || undefined,
    )
    const rebuilt = rebuildViews(await readRecords(server.url))
    let lost = 0
    for (const id of AGENTS) {
      const view = await agents.get(id)!.view()
      const seen = new Set(view.entries.map((e) => e.id))
      lost += acked.get(id)!.filter((e) => !seen.has(e)).length
      expect(snapshotOf(survivor.working.view(id))).toEqual(snapshotOf(rebuilt.get(id)))
    }
    expect({ lost, stale }).toEqual({ lost: 0, stale: 0 })
  })
})

describe("a replica whose leases lapse", () => {
  let server: NatsServerProcess
  let gateway: InProcess<unknown>
  let a: Awaited<ReturnType<typeof replica>>
  let client: WorkingMemoryClient
  let nc: NatsConnection

  beforeAll(async () => {
    server = await startNatsServer()
    gateway = await startInProcess(gatewayLayer(server.url))
    a = await replica(server.url, "stalling")
    client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000, attempts: 8 })
    nc = await connect({ servers: server.url })
  })
  afterAll(() =>
    teardown(
      () => nc?.close(),
      () => client?.close(),
      () => a?.services.stop(),
      () => gateway?.stop(),
      () => server?.stop(),
    ),
  )

  it("stalled past the TTL, it answers again from the views it kept, without catching up again", async () => {
    await eventually(
      "the replica to own every partition",
      () => a.working.answeringPartitions().length === P || undefined,
    )
    const agent = client.agent("stalled-0")
    await agent.register({ role: "main" })
    const before = await agent.record({ origin: "USER", content: "Written before the stall." })
    const catchUps = a.working.catchUps().length

    // A process stall longer than the lease TTL (a long GC pause, a starved CPU): no renewal is sent and
    // the broker expires every lease.
    const until = Date.now() + TTL + 1_500
    while (Date.now() < until) {}
    expect(a.working.owns(agent.agentId)).toBe(false)

    await eventually("the replica to answer for every partition again", () =>
      a.working.answeringPartitions().length === P ? true : undefined,
    )
    expect(a.working.catchUps().length).toBe(catchUps)
    const after = await agent.record({ origin: "USER", content: "Written after the stall." })
    const seen = new Set((await agent.view()).entries.map((e) => e.id))
    expect(seen.has(before.entryId) && seen.has(after.entryId)).toBe(true)
    expect((await leaseOwners(nc)).get(partitionOf(agent.agentId))).toBe("stalling")
  })

  it("drops a partition whose lease another replica holds", async () => {
    const agentId = "stalled-1"
    const agent = client.agent(agentId)
    await agent.register({ role: "main" })
    const partition = partitionOf(agentId)
    expect(a.working.owns(agentId)).toBe(true)
    // Another replica's entry where this one's renewal expects its own (as after a lapse and a take).
    const kv = await new Kvm(nc).open(LEASE_BUCKET)
    await kv.put(leaseKey("working", partition), JSON.stringify({ replica: "intruder" }))
    await eventually("the replica to drop the partition", () =>
      a.working.answeringPartitions().includes(partition) ? undefined : true,
    )
    expect(a.working.view(agentId)).toBeUndefined()
    expect(a.working.heldPartitions()).not.toContain(partition)
  })
})
