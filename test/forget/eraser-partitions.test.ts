/**
 * The forget eraser scales out with the substrate: its replicas divide the partitions by lease (service
 * `eraser`), each follows only its partitions' events, and each finishes the forgets whose tombstones
 * fall in its partitions; when one stops, the survivor takes its partitions and finishes their forgets.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import type { Effect } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { forget } from "../../cli/audit/forget.ts"
import { LEASE_BUCKET, leaseKey } from "../../contracts/buckets.ts"
import { allPartitions, partitionOf } from "../../contracts/partitions.ts"
import { EVENTS_STREAM, partitionEvents } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { ForgetEraser, type ForgetEraserShape } from "../../services/substrate/eraser.ts"
import { substrateService } from "../../services/system.ts"
import { teardown } from "../faults/support/audit.ts"
import { gatewayLayer, type InProcess, settingsFor, startInProcess } from "../faults/support/services.ts"
import { eventually } from "../support/eventually.ts"

let server: NatsServerProcess
let gateway: InProcess<unknown>
let client: WorkingMemoryClient
let nc: NatsConnection
const replicas = new Map<string, InProcess<unknown>>()

const startReplica = async (replicaId: string) => {
  const running = await startInProcess(
    substrateService(
      settingsFor(server.url)(`wm-substrate-${replicaId}`),
      // Long enough that a loaded machine's stalled event loop does not let a lease lapse mid-test.
      PartitionSettings.make({ replicaId, leaseTtlMs: 6_000, leaseSettleMs: 500 }),
    ),
  )
  replicas.set(replicaId, running)
  return running
}
const eraserOf = (replicaId: string) =>
  replicas.get(replicaId)!.runtime.runPromise(ForgetEraser as unknown as Effect.Effect<ForgetEraserShape>)

/** Which replica holds each partition's eraser lease. */
const owners = async () => {
  const kv = await new Kvm(nc).open(LEASE_BUCKET)
  const found = new Map<number, string>()
  for (const p of allPartitions()) {
    const entry = await kv.get(leaseKey("eraser", p))
    if (entry !== null && entry.operation === "PUT") found.set(p, entry.json<{ replica: string }>().replica)
  }
  return found
}

/** An agent whose partition the replica's eraser holds. */
const agentOwnedBy = (held: Map<number, string>, replicaId: string, tag: string) => {
  for (let i = 0; ; i++) {
    const id = `${tag}-${i}`
    if (held.get(partitionOf(id)) === replicaId) return id
  }
}

beforeAll(async () => {
  server = await startNatsServer()
  gateway = await startInProcess(gatewayLayer(server.url))
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 3_000, attempts: 8 })
  nc = await connect({ servers: server.url })
  await Promise.all([startReplica("one"), startReplica("two")])
})
afterAll(() =>
  teardown(
    () => nc?.close(),
    () => client?.close(),
    ...[...replicas.values()].map((r) => () => r.stop()),
    () => gateway?.stop(),
    () => server?.stop(),
  ),
)

const forgetOne = async (agentId: string) => {
  const agent = client.agent(agentId)
  await agent.register({ role: "main" })
  const { entryId } = await agent.record({ origin: "USER", content: `${agentId} keeps the vault code.` })
  return (await forget(nc, agentId, entryId, { waitMs: 500 })).tombstoneSeq
}

it("two replicas split the partitions, each follows only its own and finishes the forgets that fall in them", async () => {
  const held = await eventually("the replicas to hold half the eraser leases each", async () => {
    const found = await owners()
    const counts = ["one", "two"].map((r) => [...found.values()].filter((o) => o === r).length)
    // Balanced, so no lease is still on its way from one replica to the other.
    return found.size === allPartitions().length && Math.abs(counts[0]! - counts[1]!) <= 1 ? found : undefined
  })
  // No consumer of the event stream follows the whole log: every one is filtered to one partition.
  const jsm = await jetstreamManager(nc)
  const filters = (await jsm.consumers.list(EVENTS_STREAM).next()).flatMap((c) => [
    ...(c.config.filter_subject ? [c.config.filter_subject] : []),
    ...(c.config.filter_subjects ?? []),
  ])
  expect(filters.length).toBeGreaterThan(0)
  expect(filters.every((f) => allPartitions().some((p) => f === partitionEvents(p)))).toBe(true)

  const ofOne = agentOwnedBy(held, "one", "vault-a")
  const ofTwo = agentOwnedBy(held, "two", "vault-b")
  const [seqOfOne, seqOfTwo] = [await forgetOne(ofOne), await forgetOne(ofTwo)]
  const [one, two] = [await eraserOf("one"), await eraserOf("two")]
  await eventually("both forgets to be finished", () =>
    one.completed().length + two.completed().length === 2 ? true : undefined,
  )
  expect(one.completed().map((r) => r.tombstoneSeq)).toEqual([seqOfOne])
  expect(two.completed().map((r) => r.tombstoneSeq)).toEqual([seqOfTwo])
})

it("a replica stopped, the survivor takes its partitions and finishes the forgets that fall in them", async () => {
  const held = await owners()
  const orphan = agentOwnedBy(held, "two", "vault-c")
  await replicas.get("two")!.stop()
  replicas.delete("two")
  await eventually("the survivor to hold every eraser lease", async () =>
    [...(await owners()).values()].filter((o) => o === "one").length === allPartitions().length ? true : undefined,
  )
  const seq = await forgetOne(orphan)
  const one = await eraserOf("one")
  await eventually("the survivor to finish the forget", () =>
    one.completed().some((r) => r.tombstoneSeq === seq) ? true : undefined,
  )
})
