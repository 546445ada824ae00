/**
 * Snapshots of the working views per partition: a restart loads them and
 * replays only the tail, to the same views a full rebuild gives; a snapshot
 * that does not decode is ignored; a forget leaves no copy of what it
 * removed in any snapshot.
 */
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import { join } from "node:path"
import { promisify } from "node:util"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { forget } from "../../cli/audit/forget.ts"
import { KEY_BUCKET, SNAPSHOT_BUCKET, snapshotChunkKey, snapshotManifestKey } from "../../contracts/buckets.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { sealBytes } from "../../services/platform/keys/aead.ts"
import { openContentKeys } from "../../services/platform/keys/content-keys.ts"
import { makeSnapshotKeys, snapshotKeyName } from "../../services/platform/keys/snapshot-keys.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import type { Manifest } from "../../services/platform/partitions/snapshots.ts"
import { substrateService, workingService } from "../../services/system.ts"
import type { WorkingShape } from "../../services/working/working.ts"
import { readRecords, rebuildViews, snapshotOf, teardown } from "../faults/support/audit.ts"
import { gatewayLayer, type InProcess, settingsFor, startInProcess, workingOf } from "../faults/support/services.ts"
import { eventually } from "../support/eventually.ts"
import { openedSnapshotBody } from "../support/log.ts"
import { filesHolding } from "../support/store-files.ts"

const run = promisify(execFile)
const wm = (...args: string[]) =>
  run("node_modules/.bin/node", ["cli/wm.ts", ...args, "--server", server.url, "--no-progress"], {
    cwd: process.cwd(),
  })

const AGENTS = Array.from({ length: 20 }, (_, i) => `snap-${i}`)

/**
 * The snapshot bucket as the test reads and tampers with it. Its reads follow a stop that has just written
 * every partition's snapshot; on a loaded machine JetStream may take longer than the client's default 5 s to
 * answer, which says nothing of the snapshots.
 */
const snapshotBucket = () => new Kvm(jetstream(nc, { timeout: 30_000 })).open(SNAPSHOT_BUCKET)

let server: NatsServerProcess
let gateway: InProcess<unknown>
let client: WorkingMemoryClient
let nc: NatsConnection
let working: { services: InProcess<unknown>; shape: WorkingShape } | undefined

const startWorking = async () => {
  const services = await startInProcess(
    workingService(
      settingsFor(server.url)("wm-working"),
      // Snapshots only at shutdown and after forgets: the test decides when they are taken.
      PartitionSettings.make({ leaseTtlMs: 2_000, replicaId: "only", snapshotIntervalMs: 0 }),
    ),
  )
  working = { services, shape: await workingOf(services) }
  return working.shape
}
const stopWorking = async () => {
  await working?.services.stop()
  working = undefined
}

const recordRound = async (n: number) => {
  for (const id of AGENTS) {
    const agent = client.agent(id)
    if (n === 0) await agent.register({ role: "main" })
    await agent.record({ origin: "USER", content: `Round ${n}: ${id} keeps the minutes.` })
    await agent.buildContext()
  }
}

/** Every live view equals the one the whole log rebuilds. */
const expectViewsEqualRebuild = async (shape: WorkingShape) => {
  const rebuilt = rebuildViews(await readRecords(server.url))
  for (const id of AGENTS) expect(snapshotOf(shape.view(id)), id).toEqual(snapshotOf(rebuilt.get(id)))
}

beforeAll(async () => {
  server = await startNatsServer()
  // The substrate (and its eraser) completes forgets.
  gateway = await startInProcess(
    Layer.merge(gatewayLayer(server.url), substrateService(settingsFor(server.url)("wm-substrate"))),
  )
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000, attempts: 8 })
  nc = await connect({ servers: server.url })
})
afterAll(() =>
  teardown(
    () => nc?.close(),
    () => client?.close(),
    () => stopWorking(),
    () => gateway?.stop(),
    () => server?.stop(),
  ),
)

describe("working snapshots", () => {
  it("a restart from the snapshots plus the tail equals a full rebuild", async () => {
    await startWorking()
    await recordRound(0)
    await recordRound(1)
    await stopWorking()
    // Written while the service is down: the tail the restart replays.
    for (const id of AGENTS.slice(0, 5))
      await client.agent(id).record({ origin: "USER", content: `${id} wrote while working was down.` })

    const restarted = await startWorking()
    const fromSnapshot = restarted.catchUps().filter((c) => c.snapshotSeq > 0)
    expect(new Set(fromSnapshot.map((c) => c.partition))).toEqual(new Set(AGENTS.map((id) => partitionOf(id))))
    await Effect.runPromise(restarted.waitApplied((await readRecords(server.url)).at(-1)!.seq))
    await expectViewsEqualRebuild(restarted)

    // wm verify compares every snapshot with the log folded to the sequence it covers.
    await stopWorking()
    const verified = JSON.parse((await wm("verify", "--check", "working-snapshots", "--json")).stdout) as {
      ok: boolean
      checks: Array<{ summary: string }>
    }
    expect(verified.ok).toBe(true)
    expect(verified.checks[0]!.summary).toMatch(
      new RegExp(`^${AGENTS.length} agents in \\d+ partition snapshots compared`),
    )
    await startWorking()
  })

  it("a snapshot that does not decode is ignored and its partition rebuilt from the log", async () => {
    await recordRound(2)
    await stopWorking()
    const victim = partitionOf(AGENTS[0]!)
    const kv = await snapshotBucket()
    const manifest = (await kv.get(snapshotManifestKey("working", victim)))!.json<Manifest>()
    await kv.put(snapshotChunkKey("working", victim, manifest.id, 0), '{"format":1,"seq":')

    // wm verify says which snapshot it could not compare, and fails.
    const refused = await wm("verify", "--check", "working-snapshots", "--json").then(
      () => null,
      (error: { code: number; stdout: string }) => error,
    )
    expect(refused?.code).toBe(1)
    // Its chunks are sealed: the altered one no longer opens with the snapshot's key.
    expect(refused?.stdout).toContain(
      `the snapshot of partition ${victim}: chunk 0 does not open with the snapshot's key`,
    )

    const restarted = await startWorking()
    const catchUps = restarted.catchUps()
    expect(catchUps.find((c) => c.partition === victim)?.snapshotSeq).toBe(0)
    const others = new Set(AGENTS.map((id) => partitionOf(id)).filter((p) => p !== victim))
    expect(catchUps.filter((c) => others.has(c.partition)).every((c) => c.snapshotSeq > 0)).toBe(true)
    await expectViewsEqualRebuild(restarted)
  })

  it("a snapshot whose checksum holds but one of whose views does not decode: its partition is rebuilt from the log", async () => {
    await recordRound(3)
    await stopWorking()
    const victim = partitionOf(AGENTS[0]!)
    const kv = await snapshotBucket()
    const key = snapshotManifestKey("working", victim)
    const entry = (await kv.get(key))!
    const manifest = entry.json<Manifest>()
    const body = (await openedSnapshotBody(server.url, "working", victim))!.body
    const broken = body
      .split("\n")
      .map((line) =>
        line.startsWith(`["${AGENTS[0]}",`) ? JSON.stringify([AGENTS[0], { entries: "not pairs" }]) : line,
      )
      .join("\n")
    expect(broken).not.toBe(body)
    const bytes = Buffer.from(broken)
    // Sealed as a writer would: under a key of its own, so only the view inside is wrong.
    const snapshotKeys = makeSnapshotKeys((await openContentKeys(nc, Date.now)).store, await jetstreamManager(nc))
    const sealKey = await snapshotKeys.make(snapshotKeyName("working", victim, "brokenview"))
    const chunkName = snapshotChunkKey("working", victim, "brokenview", 0)
    await kv.put(chunkName, sealBytes(sealKey, bytes, chunkName))
    const sha256 = createHash("sha256").update(bytes).digest("hex")
    await kv.update(
      key,
      JSON.stringify({ ...manifest, id: "brokenview", chunks: 1, bytes: bytes.length, sha256 }),
      entry.revision,
    )

    const restarted = await startWorking()
    // It answered from its snapshot, met the view that does not decode, and caught up again from the log.
    await eventually("the partition rebuilt from the log", () =>
      restarted.catchUps().some((c) => c.partition === victim && c.snapshotSeq === 0) && restarted.owns(AGENTS[0]!)
        ? true
        : undefined,
    )
    expect(restarted.catchUps().some((c) => c.partition === victim && c.snapshotSeq > 0)).toBe(true)
    // The snapshot it met is dropped, so the next owner does not meet it again.
    const after = await kv.get(key)
    expect(after?.operation === "PUT" ? after.json<Manifest>().id : null).not.toBe("brokenview")
    expect(await kv.get(snapshotChunkKey("working", victim, "brokenview", 0)).then((c) => c?.operation)).not.toBe("PUT")
    await expectViewsEqualRebuild(restarted)
    const view = await client.agent(AGENTS[0]!).view()
    expect(view.entries.some((e) => e.content?.includes("Round 3"))).toBe(true)
  })

  it("a forget erases the partition's snapshot: no store file keeps the forgotten text, and the next start rebuilds it from the log", async () => {
    const SECRET = "SNAPSECRETOTTER7731"
    const agent = client.agent("snap-confider")
    await agent.register({ role: "main" })
    const { entryId } = await agent.record({ origin: "USER", content: `The code is ${SECRET}.` })
    await stopWorking()
    const snapshotFiles = join(server.storeDir, "jetstream", "$G", "streams", `KV_${SNAPSHOT_BUCKET}`)
    // The snapshot holds the text, sealed under its own key: in no file in clear.
    const taken = await openedSnapshotBody(server.url, "working", partitionOf("snap-confider"))
    expect(taken?.body).toContain(SECRET)
    expect(filesHolding([snapshotFiles], SECRET)).toEqual([])

    await startWorking()
    await forget(nc, "snap-confider", entryId, { waitMs: 1_000 })
    await eventually("the snapshot erased, and its key", async () =>
      (await openedSnapshotBody(server.url, "working", partitionOf("snap-confider")))?.id !== taken?.id &&
      (await (
        await new Kvm(nc).open(KEY_BUCKET)
      ).get(snapshotKeyName("working", partitionOf("snap-confider"), taken!.id))) === null
        ? true
        : undefined,
    )
    expect(filesHolding([snapshotFiles], SECRET)).toEqual([])
    expect((await agent.view()).entries.some((e) => e.id === entryId)).toBe(false)
    // Its views still count the erased entry: no snapshot of them at shutdown; the next start rebuilds the partition.
    await stopWorking()
    const restarted = await startWorking()
    expect(restarted.catchUps().find((c) => c.partition === partitionOf("snap-confider"))?.snapshotSeq).toBe(0)
    const rebuilt = rebuildViews(await readRecords(server.url))
    expect(snapshotOf(restarted.view("snap-confider"))).toEqual(snapshotOf(rebuilt.get("snap-confider")))
  })
})
