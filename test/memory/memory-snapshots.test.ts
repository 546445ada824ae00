/**
 * Snapshots of the memory service and of fade: what each keeps beside the views (the lexical and
 * episode indexes; the raw texts and histories of working entries) travels in its partitions'
 * snapshots, so a restart replays only the tail, answers as a full rebuild does, and `wm verify`
 * compares snapshot and log; a snapshot of another state format is ignored and rebuilt.
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import type { Effect } from "effect"
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SNAPSHOT_BUCKET, snapshotManifestKey } from "../../contracts/buckets.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import type { FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import { KEPT_TEXTS_FORMAT } from "../../services/fade/kept-texts.ts"
import { INDEX_STATE_FORMAT } from "../../services/memory/retrieval/index-state.ts"
import { Retrieval, type RetrievalShape } from "../../services/memory/retrieval/retrieval.ts"
import { EmbeddingProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { hashedEmbedder } from "../../services/platform/embedding/offline-embedder.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import type { Manifest } from "../../services/platform/partitions/snapshots.ts"
import { memoryService, substrateService } from "../../services/system.ts"
import { streamLastSeq, teardown, waitQuiet } from "../faults/support/audit.ts"
import {
  fadeLayer,
  fadeOf,
  gatewayLayer,
  type InProcess,
  settingsFor,
  startInProcess,
  workingLayer,
} from "../faults/support/services.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { FILLER_TURNS } from "../support/fillers.ts"

const run = promisify(execFile)
const wm = (...args: string[]) =>
  run("node_modules/.bin/node", ["cli/wm.ts", ...args, "--server", server.url, "--no-progress"], {
    cwd: process.cwd(),
  })

const AGENTS = Array.from({ length: 6 }, (_, i) => `msnap-${i}`)
const QUERIES = ["Which dog did I adopt?", "the courgettes in the garden", "what was written while memory was down"]
const MINUTE = 60_000

let server: NatsServerProcess
let core: InProcess<unknown>
let client: WorkingMemoryClient
let nc: NatsConnection
let memory: InProcess<unknown> | undefined
let retrieval: RetrievalShape
let fade: InProcess<unknown> | undefined

// Snapshots only at shutdown and after forgets: the test decides when they are taken.
const partitions = () => PartitionSettings.make({ leaseTtlMs: 2_000, replicaId: "only", snapshotIntervalMs: 0 })
const models = Layer.fresh(EmbeddingProvider.offlineOnly(hashedEmbedder()))

const startMemory = async () => {
  memory = await startInProcess(
    memoryService(settingsFor(server.url)("wm-memory"), { models, partitions: partitions() }),
  )
  retrieval = await memory.runtime.runPromise(Retrieval as unknown as Effect.Effect<RetrievalShape>)
  return retrieval
}
const startFade = async () => {
  fade = await startInProcess(fadeLayer(server.url, {}, undefined, {}, partitions()))
  return fadeOf(fade) as Promise<FadeWorkerShape>
}
const stopBoth = async () => {
  await memory?.stop()
  await fade?.stop()
  memory = undefined
  fade = undefined
}

/** Each query's hits as [entry, tier, similarity], by entry: what the indexes decide, whatever the clock. */
const answers = async () => {
  const last = await streamLastSeq(server.url)
  // A working entry's vector is made in the background (when recorded, or once its partition is taken).
  await eventually("working vectors made", () => (retrieval.embeddingInBackground() === 0 ? true : undefined))
  const out: Record<string, unknown> = {}
  for (const id of AGENTS) {
    const agent = client.agent(id)
    agent.lastSeq = Math.max(agent.lastSeq, last)
    for (const text of QUERIES) {
      const { results } = await agent.query(text, { explain: true, limit: 20 })
      out[`${id}: ${text}`] = results
        .map((r) => [
          r.entryId,
          r.tier,
          Number(r.explain!.similarity.toFixed(12)),
          Number(r.explain!.dense.toFixed(9)),
          Number(r.explain!.lexical.toFixed(9)),
        ])
        .sort(([a], [b]) => String(a).localeCompare(String(b)))
    }
  }
  return out
}

const manifests = async (service: string) => {
  const kv = await new Kvm(nc).open(SNAPSHOT_BUCKET)
  const found = new Map<number, Manifest>()
  for (const p of new Set(AGENTS.map((id) => partitionOf(id)))) {
    const entry = await kv.get(snapshotManifestKey(service, p))
    if (entry !== null && entry.operation === "PUT") found.set(p, entry.json<Manifest>())
  }
  return found
}

beforeAll(async () => {
  server = await startNatsServer()
  core = await startInProcess(
    Layer.mergeAll(
      gatewayLayer(server.url),
      workingLayer(server.url),
      substrateService(settingsFor(server.url)("wm-substrate")),
    ),
  )
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 3_000, attempts: 8 })
  nc = await connect({ servers: server.url })
  await startMemory()
  const fading = await startFade()
  const clock = steppingClock(Date.UTC(2024, 5, 3, 8), MINUTE)
  for (const id of AGENTS) {
    const agent = client.agent(id)
    await agent.register({ role: "custom", budget: 200 })
    await agent.record({ origin: "USER", content: `${id} adopted a golden retriever puppy.`, timestamp: clock.next() })
    await agent.record({
      origin: "USER",
      content: `The garden gave ${id} its first ripe courgettes.`,
      timestamp: clock.next(),
      correlationId: `garden-${id}`,
    })
    for (let i = 0; i < 16; i++)
      await agent.record({ origin: "USER", content: FILLER_TURNS[i % FILLER_TURNS.length]!, timestamp: clock.next() })
  }
  // Fading has demoted the oldest entries of every agent: both tiers hold entries.
  for (const id of AGENTS) await fading.evaluate(id)
  await waitQuiet(server.url, () => [fading.appliedSeq()])
}, 120_000)
afterAll(() =>
  teardown(
    () => nc?.close(),
    () => client?.close(),
    () => stopBoth(),
    () => core?.stop(),
    () => server?.stop(),
  ),
)

describe("memory and fade snapshots", () => {
  let beforeRestart: Record<string, unknown>

  it("both tiers answer before the restart", async () => {
    beforeRestart = await answers()
    const tiers = new Set(
      Object.values(beforeRestart).flatMap((hits) => (hits as Array<[string, string]>).map((h) => h[1])),
    )
    expect(tiers).toEqual(new Set(["working", "long-term"]))
  })

  it("a restart starts every partition from its snapshot, indexes included, and answers as before plus the tail", async () => {
    await stopBoth()
    for (const [service, state] of [
      ["memory", INDEX_STATE_FORMAT],
      ["fade", KEPT_TEXTS_FORMAT],
    ] as const) {
      const written = await manifests(service)
      expect(written.size, service).toBe(new Set(AGENTS.map((id) => partitionOf(id))).size)
      for (const manifest of written.values()) expect(manifest.state, service).toBe(state)
    }
    // The tail: written while memory and fade are down.
    for (const id of AGENTS.slice(0, 2))
      await client.agent(id).record({ origin: "USER", content: `${id} wrote this while memory was down.` })

    const restarted = await startMemory()
    const fading = await startFade()
    for (const shape of [restarted, fading]) {
      const started = shape.catchUps().filter((c) => new Set(AGENTS.map((id) => partitionOf(id))).has(c.partition))
      expect(started.length).toBeGreaterThan(0)
      expect(started.every((c) => c.snapshotSeq > 0)).toBe(true)
    }
    // Fading settles the tail before anything is compared.
    for (const id of AGENTS) await fading.evaluate(id)
    await waitQuiet(server.url, () => [restarted.appliedSeq(), fading.appliedSeq()])
    const after = await answers()
    // Only the two agents with a tail answer the third query differently.
    for (const [key, hits] of Object.entries(beforeRestart))
      if (!AGENTS.slice(0, 2).some((id) => key.startsWith(`${id}: `))) expect(after[key], key).toEqual(hits)
    for (const id of AGENTS.slice(0, 2)) {
      const hits = after[`${id}: ${QUERIES[2]}`] as Array<[string, string]>
      expect(hits.length, id).toBeGreaterThan((beforeRestart[`${id}: ${QUERIES[2]}`] as unknown[]).length)
    }
    beforeRestart = after
  })

  it("wm verify compares the memory and fade snapshots, indexes and kept texts included, with the log", async () => {
    await stopBoth()
    const verified = JSON.parse(
      (await wm("verify", "--check", "memory-snapshots", "--check", "fade-snapshots", "--json")).stdout,
    ) as { ok: boolean; checks: Array<{ name: string; summary: string }> }
    expect(verified.ok).toBe(true)
    for (const check of verified.checks)
      expect(check.summary, check.name).toMatch(/^6 agents in \d+ partition snapshots? compared/)
  })

  it("a snapshot of another state format is ignored: the partition is rebuilt from the log, to the same answers", async () => {
    const kv = await new Kvm(nc).open(SNAPSHOT_BUCKET)
    for (const [p, manifest] of await manifests("memory"))
      await kv.put(snapshotManifestKey("memory", p), JSON.stringify({ ...manifest, state: "memory-indexes-0" }))
    const refused = await wm("verify", "--check", "memory-snapshots", "--json").then(
      () => null,
      (error: { code: number; stdout: string }) => error,
    )
    expect(refused?.code).toBe(1)
    expect(refused?.stdout).toContain(`state memory-indexes-0, this code reads ${INDEX_STATE_FORMAT}`)

    // Memory alone: nothing moves in the log while the rebuild is compared.
    const rebuilt = await startMemory()
    const ours = rebuilt.catchUps().filter((c) => new Set(AGENTS.map((id) => partitionOf(id))).has(c.partition))
    expect(ours.length).toBeGreaterThan(0)
    expect(ours.every((c) => c.snapshotSeq === 0)).toBe(true)
    expect(await answers()).toEqual(beforeRestart)
  })
})
