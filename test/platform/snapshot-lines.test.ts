/**
 * A views-only service reads a snapshot's views as their lines and decodes each when it is used: the
 * lines are cut on bytes across chunks (multi-byte text included), a line never decoded is written back
 * into the next snapshot as it was, a line that does not decode is reported (its agent is then unknown
 * and the partition rebuilt), and a snapshot read ahead of taking a partition is used only while it is
 * still the latest.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { type KV, Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { SNAPSHOT_BUCKET, snapshotChunkKey } from "../../contracts/buckets.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { openContentKeys } from "../../services/platform/keys/content-keys.ts"
import { makeSnapshotKeys } from "../../services/platform/keys/snapshot-keys.ts"
import { PartitionViewMap } from "../../services/platform/partitions/partition-view-map.ts"
import {
  makeSnapshotStore,
  openSnapshotKv,
  type SnapshotAgent,
  type SnapshotStore,
} from "../../services/platform/partitions/snapshots.ts"
import { encodeView } from "../../services/platform/partitions/view-codec.ts"
import { teardown } from "../faults/support/audit.ts"
import { recorded, registered } from "../support/events.ts"
import { eventually } from "../support/eventually.ts"

let server: NatsServerProcess
let nc: NatsConnection
let store: SnapshotStore
let kv: KV

const AGENTS = Array.from({ length: 6 }, (_, i) => `lines-${i}`)

/** A view with several entries, some of their text outside ASCII, so that chunk boundaries fall inside characters. */
const viewOf = (agentId: string): AgentView => {
  const as = <E extends MemoryEvent>(event: E): E => ({ ...event, agentId })
  let view = evolve(undefined, as(registered({ id: agentId })), { seq: 1 })
  for (let i = 0; i < 12; i++)
    view = evolve(
      view,
      as(recorded(`${agentId}-e${i}`, `Café ☕ 日本語のメモ ${i} of ${agentId}: ${"ü".repeat(40)}`, i)),
      {
        seq: 2 + i,
      },
    )
  return view!
}
const views = new Map(AGENTS.map((id) => [id, viewOf(id)]))
const asEncoded = (view: AgentView | undefined) => (view === undefined ? undefined : encodeView(view))
const fresh = (): Array<readonly [string, SnapshotAgent]> => AGENTS.map((id) => [id, { view: views.get(id)! }])

beforeAll(async () => {
  server = await startNatsServer()
  nc = await connect({ servers: server.url })
  kv = await openSnapshotKv(new Kvm(nc), 1)
  const jsm = await jetstreamManager(nc)
  store = makeSnapshotStore(kv, {
    service: "lines",
    partitions: 16,
    streamCreated: "2026-01-01T00:00:00Z",
    // Small chunks: most lines span several, and most chunk boundaries fall inside a line.
    chunkBytes: 1_000,
    erase: async (seq) => {
      await jsm.streams.deleteMessage(`KV_${SNAPSHOT_BUCKET}`, seq, true).catch(() => undefined)
    },
    keys: makeSnapshotKeys((await openContentKeys(nc, Date.now)).store, jsm),
  })
})
afterAll(() =>
  teardown(
    () => nc?.close(),
    () => server?.stop(),
  ),
)

it("a snapshot read ahead keeps its views as lines; each decodes to the view it was, and one never used is written back as it was", async () => {
  await Effect.runPromise(store.save(0, 100, fresh()))
  const read = await Effect.runPromise(store.prefetch(0))
  expect(read?.manifest.seq).toBe(100)
  expect(read?.views.size).toBe(0)
  expect([...read!.lines.keys()]).toEqual(AGENTS)

  const reasons: string[] = []
  const map = new PartitionViewMap((agentId, reason) => reasons.push(`${agentId}: ${reason}`))
  map.addLines(read!.lines)
  expect(asEncoded(map.get(AGENTS[1]!))).toEqual(asEncoded(views.get(AGENTS[1]!)))
  expect(map.undecoded).toBe(AGENTS.length - 1)

  // The next snapshot: one agent decoded, the others still lines.
  await Effect.runPromise(store.save(0, 200, map.snapshotAgents()))
  const again = await store.read(0)
  if (typeof again === "string") throw new Error(again)
  expect(again.manifest.seq).toBe(200)
  for (const id of AGENTS) expect(asEncoded(again.views.get(id)), id).toEqual(asEncoded(views.get(id)))

  // Decoding behind, a batch at a time, until none is left.
  while (map.decodeSome(2) > 0);
  expect([...map.entries()].map(([id, view]) => [id, asEncoded(view)])).toEqual(
    AGENTS.map((id) => [id, asEncoded(views.get(id))]),
  )
  expect(reasons).toEqual([])
})

it("a line whose checksum holds but whose view does not decode is reported, and its agent is not answered from it", async () => {
  const broken = new TextEncoder().encode(JSON.stringify(["lines-9", { entries: "not pairs" }]))
  await Effect.runPromise(store.save(1, 100, [...fresh(), ["lines-9", { line: broken }]]))

  // The whole read (wm verify) refuses the snapshot, naming why.
  expect(await store.read(1)).toMatch(/^does not decode: /)

  const read = await Effect.runPromise(store.load(1))
  const reasons: string[] = []
  const map = new PartitionViewMap((agentId, reason) => reasons.push(`${agentId}: ${reason}`))
  map.addLines(read!.lines)
  expect(map.get("lines-9")).toBeUndefined()
  expect(map.has("lines-9")).toBe(false)
  expect(reasons).toHaveLength(1)
  expect(reasons[0]).toMatch(/^lines-9: /)
  expect(asEncoded(map.get(AGENTS[0]!))).toEqual(asEncoded(views.get(AGENTS[0]!)))
})

it("a line that names no agent id makes the snapshot unreadable, not a view of nobody", async () => {
  const nameless = new TextEncoder().encode(JSON.stringify([{ id: "lines-1" }, {}]))
  await Effect.runPromise(store.save(2, 100, [...fresh(), ["lines-1", { line: nameless }]]))
  expect(await Effect.runPromise(store.prefetch(2))).toBeNull()
  expect(await Effect.runPromise(store.load(2))).toBeNull()
})

it("a snapshot read ahead is not used once a newer one was written, and the newer one keeps its chunks", async () => {
  await Effect.runPromise(store.save(3, 100, fresh()))
  const ahead = await Effect.runPromise(store.prefetch(3))
  expect(ahead?.manifest.seq).toBe(100)
  // The partition's owner writes another before this replica takes it; a writer that died left a chunk.
  await Effect.runPromise(store.save(3, 150, fresh()))
  const orphan = snapshotChunkKey("lines", 3, "orphan", 0)
  await kv.put(orphan, "left by a writer that died")

  const loaded = await Effect.runPromise(store.load(3, ahead))
  expect(loaded?.manifest.seq).toBe(150)
  // The load's sweep erases the orphan (the last key it meets) and spares the latest snapshot's chunks.
  await eventually("the orphan chunk erased", async () =>
    (await kv.get(orphan))?.operation === "PUT" ? undefined : true,
  )
  const after = await store.read(3)
  if (typeof after === "string") throw new Error(after)
  expect(after.manifest.seq).toBe(150)

  // Still the latest: the snapshot read ahead is the one used.
  const current = await Effect.runPromise(store.prefetch(3))
  expect(await Effect.runPromise(store.load(3, current))).toBe(current)
})
