/**
 * The durable embedded long-term store on disk: records and checkpoint are
 * one transaction and survive a reopen; a store opened against another log
 * starts from nothing; removing a record erases its bytes from every file
 * the store writes.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import type { LongTermPayload } from "../../contracts/longterm.ts"
import { allPartitions, partitionOf } from "../../contracts/partitions.ts"
import { DURABLE_STORE_FILE, GROUP_COMMIT_MS, makeDurableStore } from "../../services/memory/longterm/durable-store.ts"
import type { LongTermRecord } from "../../services/memory/longterm/store.ts"
import { eventually } from "../support/eventually.ts"

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "wm-durable-"))
  dirs.push(dir)
  return dir
}
/** The partitions of the agents "a" and "b" (the checkpoints are per partition). */
const PA = partitionOf("a")
const PB = partitionOf("b")
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

const record = (agentId: string, entryId: string, summary: string): LongTermRecord => {
  const payload: LongTermPayload = {
    agentId,
    entryId,
    origin: "USER",
    tags: ["t"],
    correlationId: null,
    moodSnapshot: null,
    emotionalWeight: 0,
    timestamp: 1_000,
    demotedAt: 2_000,
    summary,
    summaryForm: "summary",
    summaryTokens: 9,
    keyPoints: `${summary} (key points)`,
    keyPointsTokens: 12,
    rawTokens: 30,
    citationCount: 1,
    model: "test-model",
  }
  return { payload, vector: Float32Array.from([0.6, 0.8, 0]) }
}

/** Another connection in the middle of a read: a write of the store gets as far as its commit, which fails. */
const readerHolding = (dir: string) => {
  const reader = new DatabaseSync(join(dir, DURABLE_STORE_FILE))
  reader.exec("BEGIN")
  reader.prepare("SELECT count(*) FROM records").get()
  return {
    release: () => {
      reader.exec("ROLLBACK")
      reader.close()
    },
  }
}

/** Every file under the store's directory, as bytes. */
const filesContain = (dir: string, text: string) =>
  readdirSync(dir).filter((name) => readFileSync(join(dir, name)).includes(Buffer.from(text, "utf8")))

describe("the durable embedded store", () => {
  it("keeps records and its checkpoint across a reopen, and resumes from the checkpoint", async () => {
    const dir = freshDir()
    const first = makeDurableStore(dir)
    expect(await run(first.checkpointed.resume("log-a", PA, 100))).toBe(0)
    await run(
      first.checkpointed.commit([{ upsert: [record("a", "e1", "one"), record("a", "e2", "two")] }], "log-a", PA, 41),
    )
    await run(first.checkpointed.commit([{ remove: { agentId: "a", entryIds: ["e1"] } }], "log-a", PA, 42))
    first.close()

    const reopened = makeDurableStore(dir)
    expect(await run(reopened.checkpointed.resume("log-a", PA, 100))).toBe(42)
    expect((await run(reopened.list({}))).map((p) => p.entryId)).toEqual(["e2"])
    const hits = await run(reopened.searchDense("a", "test-model", Float32Array.from([0.6, 0.8, 0]), 5))
    expect(hits.map((h) => h.payload.entryId)).toEqual(["e2"])
    expect(hits[0]!.score).toBeCloseTo(1, 5)
    reopened.close()
  })

  it("searches committed upserts at once and writes them to the file together, with the checkpoint they move", async () => {
    const dir = freshDir()
    const store = makeDurableStore(dir)
    const checkpointOnDisk = () => {
      const reader = new DatabaseSync(join(dir, DURABLE_STORE_FILE), { readOnly: true })
      try {
        return (reader.prepare("SELECT seq FROM partition_checkpoints WHERE partition = ?").get(PA) as { seq: number })
          ?.seq
      } finally {
        reader.close()
      }
    }
    await run(store.checkpointed.commit([{ upsert: [record("a", "e1", "the first demotion")] }], "log", PA, 7))
    await run(store.checkpointed.commit([{ upsert: [record("a", "e2", "the second demotion")] }], "log", PA, 8))
    const hits = await run(store.searchDense("a", "test-model", Float32Array.from([0.6, 0.8, 0]), 5))
    expect(hits.map((h) => h.payload.entryId).sort()).toEqual(["e1", "e2"])
    await eventually("both upserts and their checkpoint on disk", () => checkpointOnDisk() === 8, 5_000)
    expect(filesContain(dir, "the first demotion")).not.toEqual([])
    expect(filesContain(dir, "the second demotion")).not.toEqual([])
    store.close()
  })

  it("writes the upserts waiting before a removal in the removal's transaction, and what waits at close", async () => {
    const dir = freshDir()
    const store = makeDurableStore(dir)
    await run(store.checkpointed.commit([{ upsert: [record("a", "e1", "kept before the removal")] }], "log", PA, 5))
    await run(store.checkpointed.commit([{ upsert: [record("a", "e2", "removed at once")] }], "log", PA, 6))
    await run(store.checkpointed.commit([{ remove: { agentId: "a", entryIds: ["e2"] } }], "log", PA, 7))
    // No wait: the removal's commit wrote what came before it.
    expect(filesContain(dir, "kept before the removal")).not.toEqual([])
    expect(filesContain(dir, "removed at once")).toEqual([])
    await run(store.checkpointed.commit([{ upsert: [record("a", "e3", "written at close")] }], "log", PA, 9))
    store.close()
    const reopened = makeDurableStore(dir)
    expect(await run(reopened.checkpointed.resume("log", PA, 100))).toBe(9)
    expect((await run(reopened.list({}))).map((p) => p.entryId).sort()).toEqual(["e1", "e3"])
    reopened.close()
  })

  it("keeps what waits through a failed write: a reader holding the file fails the group write's commit and the commits after it, and nothing is lost once it lets go", async () => {
    const dir = freshDir()
    const store = makeDurableStore(dir)
    await run(store.checkpointed.commit([{ upsert: [record("a", "e0", "stored first")] }], "log", PA, 1))
    store.close()
    const reopened = makeDurableStore(dir)
    await run(reopened.checkpointed.commit([{ upsert: [record("a", "e1", "waiting for the lock")] }], "log", PA, 5))
    const locker = readerHolding(dir)
    // The removal fails at its commit, and what waits with it: the commits after it are written at once, and fail.
    const refused = await Effect.runPromiseExit(
      reopened.checkpointed.commit([{ remove: { agentId: "a", entryIds: ["e0"] } }], "log", PA, 6),
    )
    expect(refused._tag).toBe("Failure")
    const alsoRefused = await Effect.runPromiseExit(
      reopened.checkpointed.commit([{ upsert: [record("a", "e2", "after the failure")] }], "log", PA, 7),
    )
    expect(alsoRefused._tag).toBe("Failure")
    locker.release()
    // The writer retries what failed; what waited before it is written with it.
    await run(reopened.checkpointed.commit([{ remove: { agentId: "a", entryIds: ["e0"] } }], "log", PA, 6))
    await run(reopened.checkpointed.commit([{ upsert: [record("a", "e2", "after the failure")] }], "log", PA, 7))
    reopened.close()
    const last = makeDurableStore(dir)
    expect(await run(last.checkpointed.resume("log", PA, 100))).toBe(7)
    expect((await run(last.list({}))).map((p) => p.entryId).sort()).toEqual(["e1", "e2"])
    last.close()
  })

  it("a failed commit retried as it was made writes what waits when it runs again, not what waited when it was made", async () => {
    const dir = freshDir()
    const store = makeDurableStore(dir)
    await run(store.checkpointed.commit([{ upsert: [record("b", "x", "to be removed")] }], "log", PB, 2))
    await run(store.checkpointed.commit([{ upsert: [record("a", "e1", "first")] }], "log", PA, 10))
    const locker = readerHolding(dir)
    // Time for the group write to fail too (the removal's failure below is enough for what this test checks).
    await new Promise((resolve) => setTimeout(resolve, 3 * GROUP_COMMIT_MS))
    // One effect, as a writer retries it.
    const removal = store.checkpointed.commit([{ remove: { agentId: "b", entryIds: ["x"] } }], "log", PB, 20)
    expect((await Effect.runPromiseExit(removal))._tag).toBe("Failure")
    locker.release()
    await run(store.checkpointed.commit([{ upsert: [record("a", "e2", "second")] }], "log", PA, 11))
    await run(store.checkpointed.commit([{ upsert: [record("a", "e3", "third, waiting")] }], "log", PA, 12))
    await run(removal)
    store.close()
    const reopened = makeDurableStore(dir)
    expect(await run(reopened.checkpointed.resume("log", PA, 100))).toBe(12)
    expect(await run(reopened.checkpointed.resume("log", PB, 100))).toBe(20)
    expect((await run(reopened.list({}))).map((p) => p.entryId).sort()).toEqual(["e1", "e2", "e3"])
    reopened.close()
  })

  it("opened against another log, or one shorter than its checkpoint, starts again from nothing", async () => {
    const dir = freshDir()
    const store = makeDurableStore(dir)
    await run(store.checkpointed.commit([{ upsert: [record("a", "e1", "one")] }], "log-a", PA, 10))
    expect(await run(store.checkpointed.resume("log-b", PA, 100))).toBe(0)
    expect(await run(store.list({}))).toEqual([])
    await run(store.checkpointed.commit([{ upsert: [record("a", "e1", "one")] }], "log-b", PA, 10))
    expect(await run(store.checkpointed.resume("log-b", PA, 5))).toBe(0)
    expect(await run(store.list({}))).toEqual([])
    store.close()
  })

  it("erases a removed record's bytes from every file it writes, for one entry and for a whole agent", async () => {
    const dir = freshDir()
    const store = makeDurableStore(dir)
    const secret = "the vault code is 4417-ZEBRA"
    const agentSecret = "the other agent's passphrase is OCTOPUS-99"
    await run(
      store.checkpointed.commit(
        [
          {
            upsert: [
              record("a", "secret", secret),
              record("a", "kept", "nothing to hide"),
              record("b", "x", agentSecret),
              record("b", "y", agentSecret),
            ],
          },
        ],
        "log",
        PA,
        3,
      ),
    )
    await eventually("the upserts on disk", () => filesContain(dir, secret).length > 0, 5_000)
    expect(filesContain(dir, agentSecret)).not.toEqual([])

    await run(store.remove("a", ["secret"]))
    expect(filesContain(dir, secret)).toEqual([])
    await run(store.checkpointed.commit([{ removeAgent: "b" }], "log", PA, 4))
    expect(filesContain(dir, agentSecret)).toEqual([])

    expect((await run(store.list({}))).map((p) => p.entryId)).toEqual(["kept"])
    expect(filesContain(dir, "nothing to hide")).not.toEqual([])
    store.close()
    expect(readdirSync(dir)).toEqual(["longterm.sqlite"])
  })

  it("keeps one checkpoint per partition: each resumes on its own, and one reset leaves the others", async () => {
    expect(PA).not.toBe(PB)
    const dir = freshDir()
    const store = makeDurableStore(dir)
    await run(store.checkpointed.commit([{ upsert: [record("a", "e1", "one")] }], "log", PA, 10))
    await run(store.checkpointed.commit([{ upsert: [record("b", "e2", "two")] }], "log", PB, 20))
    store.close()
    const reopened = makeDurableStore(dir)
    expect(await run(reopened.checkpointed.resume("log", PA, 100))).toBe(10)
    expect(await run(reopened.checkpointed.resume("log", PB, 100))).toBe(20)
    // A partition whose checkpoint is past the log's end starts again; the other keeps its records.
    expect(await run(reopened.checkpointed.resume("log", PB, 15))).toBe(0)
    expect((await run(reopened.list({}))).map((p) => p.entryId)).toEqual(["e1"])
    reopened.close()
  })

  it("a released partition leaves no record of its agents in any file, and its checkpoint is gone", async () => {
    const dir = freshDir()
    const store = makeDurableStore(dir)
    const secret = "partition secret 7731-HERON"
    await run(store.checkpointed.commit([{ upsert: [record("a", "e1", secret)] }], "log", PA, 10))
    await run(store.checkpointed.commit([{ upsert: [record("b", "e2", "kept")] }], "log", PB, 11))
    await run(store.checkpointed.release(PA, ["a"]))
    expect(filesContain(dir, secret)).toEqual([])
    expect((await run(store.list({}))).map((p) => p.entryId)).toEqual(["e2"])
    store.close()
    const reopened = makeDurableStore(dir)
    expect(await run(reopened.checkpointed.resume("log", PA, 100))).toBe(0)
    expect(await run(reopened.checkpointed.resume("log", PB, 100))).toBe(11)
    reopened.close()
  })

  it("a file from before partitions resumes every partition from its one checkpoint", async () => {
    const dir = freshDir()
    const old = new DatabaseSync(join(dir, DURABLE_STORE_FILE))
    old.exec(`
      CREATE TABLE records (agent_id TEXT NOT NULL, entry_id TEXT NOT NULL, payload TEXT NOT NULL,
        vector BLOB NOT NULL, PRIMARY KEY (agent_id, entry_id)) WITHOUT ROWID;
      CREATE TABLE checkpoint (id INTEGER PRIMARY KEY CHECK (id = 1), log TEXT NOT NULL, seq INTEGER NOT NULL);
      INSERT INTO checkpoint (id, log, seq) VALUES (1, 'log', 77);
    `)
    const r = record("a", "e1", "from the old layout")
    old
      .prepare("INSERT INTO records VALUES (?, ?, ?, ?)")
      .run("a", "e1", JSON.stringify(r.payload), new Uint8Array(r.vector.buffer))
    old.close()
    const store = makeDurableStore(dir)
    for (const p of allPartitions()) expect(await run(store.checkpointed.resume("log", p, 100))).toBe(77)
    expect((await run(store.list({}))).map((p) => p.entryId)).toEqual(["e1"])
    store.close()
  })
})
