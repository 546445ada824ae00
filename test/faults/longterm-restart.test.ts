/**
 * The memory service (long-term projection and retrieval,
 * `node services/memory/main.ts`) killed mid-stream with a store that
 * outlives it: SIGKILLed while agents record and entries demote, started
 * again, it resumes from the store's checkpoint — and the store then holds
 * exactly what a rebuild from the whole log holds. Entries recorded before
 * the kill and demoted after it are the ones a projection that needed their
 * earlier events would lose.
 *
 * Against the durable embedded store (WM_LONGTERM_DIR) always, and against
 * Qdrant when QDRANT_URL names a server (a fresh collection prefix, deleted
 * at the end).
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect } from "@nats-io/transport-node"
import { QdrantClient } from "@qdrant/js-client-rest"
import { Effect, Layer } from "effect"
import { afterAll, expect, it } from "vitest"
import type { LongTermPayload } from "../../contracts/longterm.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { makeDurableStore } from "../../services/memory/longterm/durable-store.ts"
import { LongTerm, type LongTermShape } from "../../services/memory/longterm/longterm.ts"
import { makeQdrantStore } from "../../services/memory/longterm/qdrant-store.ts"
import { SEALED_TEXT, sealedLongTermStore } from "../../services/memory/longterm/sealed-store.ts"
import { LongTermStore, type LongTermStoreShape } from "../../services/memory/longterm/store.ts"
import { openContentKeys } from "../../services/platform/keys/content-keys.ts"
import { eventually } from "../support/eventually.ts"
import { startLongTermAlone } from "../support/longterm.ts"
import { readRecords, sleep, streamLastSeq, teardown } from "./support/audit.ts"
import { callUntilAnswered, contentFor, newStats, pool } from "./support/driver.ts"
import { REPO_ROOT, recordFigures } from "./support/figures.ts"
import {
  fadeLayer,
  gatewayLayer,
  type ServiceProcess,
  startInProcess,
  startNodeProcess,
  workingLayer,
} from "./support/services.ts"

const AGENTS = ["lt-0", "lt-1", "lt-2"]
const RECORDS = 360
const IN_FLIGHT = 8

interface Target {
  readonly name: string
  /** The memory service's environment for this store. */
  readonly env: Record<string, string>
  /** Every record the store holds, read once the service is stopped. */
  /** The store's records as it keeps them (their text sealed). */
  readonly records: () => Promise<ReadonlyArray<LongTermPayload>>
  readonly cleanUp: () => Promise<void>
}

const durableTarget = (): Target => {
  const dir = mkdtempSync(join(tmpdir(), "wm-longterm-restart-"))
  return {
    name: "durable embedded",
    // QDRANT_URL blank: this run is about the durable embedded store even where Qdrant is configured.
    env: { WM_LONGTERM_DIR: dir, QDRANT_URL: "" },
    records: async () => {
      const store = makeDurableStore(dir)
      try {
        return await Effect.runPromise(store.list({}))
      } finally {
        store.close()
      }
    },
    cleanUp: async () => rmSync(dir, { recursive: true, force: true }),
  }
}

const qdrantUrl = process.env.QDRANT_URL?.trim()
const qdrantTarget = (url: string): Target => {
  const apiKey = process.env.QDRANT_API_KEY?.trim() || undefined
  const prefix = `wmrestart_${Date.now().toString(36)}${randomBytes(3).toString("hex")}_`
  return {
    name: "qdrant",
    env: {
      QDRANT_URL: url,
      WM_QDRANT_COLLECTION_PREFIX: prefix,
      WM_LONGTERM_DIR: "",
      ...(apiKey ? { QDRANT_API_KEY: apiKey } : {}),
    },
    records: () => Effect.runPromise(makeQdrantStore({ url, apiKey, collectionPrefix: prefix }).list({})),
    cleanUp: async () => {
      const client = new QdrantClient({ url, ...(apiKey ? { apiKey } : {}), checkCompatibility: false })
      for (const { name } of (await client.getCollections()).collections)
        if (name.startsWith(prefix)) await client.deleteCollection(name)
    },
  }
}

/** Records as a store kept them, opened as the memory service opens them. */
const openStored = async (
  url: string,
  kept: ReadonlyArray<LongTermPayload>,
): Promise<ReadonlyArray<LongTermPayload>> => {
  const nc = await connect({ servers: url })
  try {
    const keys = await openContentKeys(nc, Date.now)
    const asKept: LongTermStoreShape = {
      name: "as-kept",
      upsert: () => Effect.void,
      remove: () => Effect.void,
      searchDense: () => Effect.succeed([]),
      list: () => Effect.succeed(kept),
      get: () => Effect.succeed([]),
      models: () => Effect.succeed([]),
    }
    return await Effect.runPromise(sealedLongTermStore(asKept, keys.store).list({}))
  } finally {
    await nc.close()
  }
}

/** The long-term records a projection rebuilt from the start of the log holds (in-memory store). */
const rebuildFromLog = async (url: string, upTo: number): Promise<ReadonlyArray<LongTermPayload>> => {
  const runtime = await startLongTermAlone(url)
  try {
    const longTerm = await runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>)
    await runtime.runPromise(longTerm.waitFor(upTo))
    const records = await runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
    return await Effect.runPromise(records.list({}))
  } finally {
    await runtime.dispose()
  }
}

const targets: Array<() => Target> = [durableTarget, ...(qdrantUrl ? [() => qdrantTarget(qdrantUrl)] : [])]
if (!qdrantUrl)
  console.log("[longterm-restart] QDRANT_URL is not set: the scenario runs against the durable embedded store only")

const cleanUps: Array<() => Promise<unknown> | undefined> = []
afterAll(() => teardown(...cleanUps))

for (const makeTarget of targets) {
  it(`the memory service SIGKILLed mid-stream resumes from its checkpoint, and its store (${makeTarget().name}) equals a rebuild from the log`, async () => {
    const target = makeTarget()
    let server: NatsServerProcess | undefined
    let memory: ServiceProcess | undefined
    let client: WorkingMemoryClient | undefined
    let core: Awaited<ReturnType<typeof startInProcess>> | undefined
    cleanUps.push(
      () => client?.close(),
      () => memory?.stop(),
      () => core?.stop(),
      () => server?.stop(),
      () => target.cleanUp(),
    )
    server = await startNatsServer()
    const url = server.url
    core = await startInProcess(Layer.mergeAll(gatewayLayer(url), workingLayer(url), fadeLayer(url)))
    client = await WorkingMemoryClient.connect({ servers: url, timeoutMs: 3_000 })
    const memoryEnv = { NATS_URL: url, ...target.env }
    const startMemory = () => startNodeProcess("memory", join(REPO_ROOT, "services", "memory", "main.ts"), memoryEnv)
    const memoryAnswers = (afterSeq: number) =>
      eventually(
        `the memory service to answer after seq ${afterSeq}`,
        async () =>
          await client!.call(AGENTS[0]!, "query", { query: "anything", afterSeq }).then(
            () => true,
            () => undefined,
          ),
        120_000,
        200,
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}\nmemory process output:\n${memory?.output().slice(-3_000)}`)
      })

    memory = startMemory()
    for (const id of AGENTS) await client.agent(id).register({ role: "custom", budget: 300 })
    await memoryAnswers(await streamLastSeq(url))

    const stats = newStats()
    let acked = 0
    const demotedSoFar = async () => (await readRecords(url)).filter((r) => r.event?._tag === "EntryDemoted").length
    // The last two thirds of the records wait for the kill, so it falls mid-stream however fast the first third goes.
    let released: () => void = () => undefined
    const killedMidStream = new Promise<void>((resolve) => {
      released = resolve
    })
    const fault = (async () => {
      while (acked < RECORDS / 3) await sleep(10)
      await eventually(
        "demotions before the kill",
        async () => ((await demotedSoFar()) >= 10 ? true : undefined),
        60_000,
        100,
      )
      const killedAtSeq = await streamLastSeq(url)
      const demotedBeforeKill = await demotedSoFar()
      await memory!.kill()
      memory = startMemory()
      released()
      return { killedAtSeq, demotedBeforeKill, ackedAtKill: acked }
    })()
    await pool(
      Array.from({ length: RECORDS }, (_, i) => i),
      IN_FLIGHT,
      async (i) => {
        if (i >= RECORDS / 3) await killedMidStream
        const agentId = AGENTS[i % AGENTS.length]!
        const r = await callUntilAnswered(
          client!,
          agentId,
          "recordEntry",
          {
            requestId: `lt-${i}`,
            origin: i % 4 === 0 ? "INTERNAL" : "USER",
            content: contentFor(i),
            tags: [`t${i % 5}`],
          },
          stats,
        )
        if (r !== undefined) acked++
      },
    )
    const killed = await fault

    // Quiet: fading has nothing more to move.
    let last = -1
    for (;;) {
      await sleep(2_000)
      const now = await streamLastSeq(url)
      if (now === last) break
      last = now
    }
    await memoryAnswers(last)
    await memory.stop()

    const log = await readRecords(url)
    const demotions = log.filter((r) => r.event?._tag === "EntryDemoted")
    const kept = await target.records()
    // The store keeps each record's text sealed; opened with the content keys, they are the records.
    expect(kept.every((r) => r.summary.startsWith(SEALED_TEXT))).toBe(true)
    const opened = await openStored(url, kept)
    expect(opened).toHaveLength(kept.length)
    const stored = [...opened]
    const rebuilt = [...(await rebuildFromLog(url, last))]
    const byKey = (a: LongTermPayload, b: LongTermPayload) => (a.agentId + a.entryId < b.agentId + b.entryId ? -1 : 1)
    // Demoted after the kill, recorded before it: what a projection that needed earlier events loses.
    const recordedAt = new Map(
      log.flatMap((r) =>
        r.event?._tag === "EntryRecorded" ? [[`${r.event.agentId}/${r.event.entryId}`, r.seq] as const] : [],
      ),
    )
    const spanningTheKill = demotions.filter(
      (r) =>
        r.seq > killed.killedAtSeq &&
        (recordedAt.get(`${r.event!.agentId}/${"entryId" in r.event! ? r.event.entryId : ""}`) ?? 0) <=
          killed.killedAtSeq,
    )

    expect(stats.failures).toEqual([])
    expect(acked).toBe(RECORDS)
    expect(spanningTheKill.length).toBeGreaterThan(0)
    expect(rebuilt).toHaveLength(demotions.length)
    const missing = rebuilt.filter(
      (r) => !stored.some((s) => s.agentId === r.agentId && s.entryId === r.entryId),
    ).length
    expect(missing, `records missing from the ${target.name} store after the restart`).toBe(0)
    expect(stored.sort(byKey)).toEqual(rebuilt.sort(byKey))

    recordFigures(`longterm-restart-${target.name.replace(/ /g, "-")}`, {
      store: target.name,
      recordsSent: RECORDS,
      acknowledged: acked,
      eventsInLog: last,
      killedAtSeq: killed.killedAtSeq,
      demotedBeforeKill: killed.demotedBeforeKill,
      demotionsInLog: demotions.length,
      demotedAfterKillRecordedBefore: spanningTheKill.length,
      recordsInStoreAfterRestart: stored.length,
      recordsInRebuildFromLog: rebuilt.length,
      missing,
      storeEqualsRebuild: true,
    })
  })
}
