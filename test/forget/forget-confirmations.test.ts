/**
 * What confirms a forget on a deployment whose long-term projection keeps
 * a checkpoint per partition (Qdrant: `projection.longterm-<store>.p<p>`
 * in `wm_checkpoints`): the checkpoint of the tombstone's partition only.
 * The other partitions' checkpoints never see the tombstone, and the
 * whole-log checkpoint left from before partitions never moves again.
 */
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { CHECKPOINT_BUCKET, checkpointKey, SNAPSHOT_BUCKET } from "../../contracts/buckets.ts"
import type { EventOf } from "../../contracts/events.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { confirmations, retainedBelowApi } from "../../services/platform/log/erase.ts"

let server: NatsServerProcess
let nc: NatsConnection
beforeAll(async () => {
  server = await startNatsServer()
  nc = await connect({ servers: server.url })
})
afterAll(async () => {
  await nc?.close()
  await server?.stop()
})

const AGENT = "forgetful"
const tombstone: EventOf<"EntryForgotten"> = {
  _tag: "EntryForgotten",
  v: 1,
  eventId: "forget-1",
  agentId: AGENT,
  entryId: "e-1",
  at: 1,
  causationId: null,
  correlationId: null,
} as EventOf<"EntryForgotten">

it("asks only the tombstone's partition of a projection checkpointed per partition", async () => {
  const kv = await new Kvm(nc).create(CHECKPOINT_BUCKET)
  // Every deployment has the snapshot bucket (here empty: no snapshot holds anything).
  await new Kvm(nc).create(SNAPSHOT_BUCKET)
  const mine = partitionOf(AGENT)
  const other = (mine + 1) % 16
  const TOMBSTONE_SEQ = 50
  await kv.put(checkpointKey(`longterm-qdrant-test.p${mine}`), "40")
  await kv.put(checkpointKey(`longterm-qdrant-test.p${other}`), "3")
  // The whole-log checkpoint an upgraded deployment left behind.
  await kv.put(checkpointKey("longterm-qdrant-test"), "7")
  // A projection of the whole log still counts as it did.
  await kv.put(checkpointKey("some-whole-log-projection"), "60")

  const before = await confirmations(nc, tombstone, TOMBSTONE_SEQ)
  expect(before.pending).toEqual([`longterm-qdrant-test.p${mine}`])
  expect(before.confirmed).toEqual(["some-whole-log-projection"])

  await kv.put(checkpointKey(`longterm-qdrant-test.p${mine}`), "50")
  const after = await confirmations(nc, tombstone, TOMBSTONE_SEQ)
  expect(after.pending).toEqual([])
  expect(after.confirmed.sort()).toEqual([`longterm-qdrant-test.p${mine}`, "some-whole-log-projection"])
})

it("names what a Qdrant store still keeps below its API once it confirmed the forget, and nothing for the other stores", () => {
  const retained = retainedBelowApi([
    `longterm-qdrant-1a2b3c4d.p3`,
    `longterm-qdrant-1a2b3c4d.p4`,
    "longterm-durable",
    "some-whole-log-projection",
  ])
  expect(retained).toHaveLength(1)
  expect(retained[0]).toMatch(/^longterm-qdrant-1a2b3c4d: Qdrant deletes softly: .*segment.*write-ahead log/)
  expect(retainedBelowApi(["longterm-durable", "longterm-embedded"])).toEqual([])
  // A collection per agent: an entry's points are deleted softly, an agent's collections deleted.
  const perAgent = retainedBelowApi(["longterm-qdrant-agents-1a2b3c4d.p3"])
  expect(perAgent).toHaveLength(1)
  expect(perAgent[0]).toMatch(
    /^longterm-qdrant-agents-1a2b3c4d: Qdrant deletes softly: an entry's .*segment.*write-ahead log.*; an agent's forget deletes its collections/,
  )
})
