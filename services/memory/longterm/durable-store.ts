/**
 * The durable embedded long-term store: the embedded store's exact search
 * in memory, over records kept on disk in one SQLite file
 * (`<dir>/longterm.sqlite`, Node's built-in `node:sqlite`). The records and
 * the long-term projection's checkpoint are written in one transaction, so
 * after any crash the file holds exactly the records of the log up to its
 * checkpoint, and the projection resumes from there — the same path a
 * Qdrant store takes.
 *
 * Removal erases: `secure_delete` overwrites a deleted record's bytes in
 * the file, and the rollback journal (`longterm.sqlite-journal`, present
 * only while a transaction runs; not WAL, which would keep old page images
 * after the commit) is deleted at each commit. A forgotten entry's text is
 * then in no file this store writes.
 *
 * Each partition's checkpoint names the log it belongs to (the event
 * stream's creation time): opened against another log, or one shorter than
 * the checkpoint, the partition's records are dropped and the projection
 * rebuilds them from the start. A file from before partitions (one
 * checkpoint for the whole log) counts as that checkpoint for every
 * partition.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Effect, Layer, Schema } from "effect"
import { LongTermPayload } from "../../../contracts/longterm.ts"
import { allPartitions, partitionOf } from "../../../contracts/partitions.ts"
import { makeEmbeddedStore } from "./embedded-store.ts"
import {
  type CheckpointedStore,
  type LongTermRecord,
  LongTermStore,
  LongTermStoreError,
  type LongTermStoreShape,
  type StoreWrite,
} from "./store.ts"

export const DURABLE_STORE_FILE = "longterm.sqlite"

/** How long, at most, committed upserts wait in memory (searched already) before they are on disk. */
export const GROUP_COMMIT_MS = 100
/** How long a failed group write waits before it is tried again, when no commit comes first. */
const GROUP_RETRY_MS = 1_000

const decodePayload = Schema.decodeUnknownSync(Schema.fromJsonString(LongTermPayload))

const vectorBytes = (v: Float32Array) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
const vectorOf = (bytes: Uint8Array) =>
  new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))

export const makeDurableStore = (
  dir: string,
): LongTermStoreShape & { readonly checkpointed: CheckpointedStore; readonly close: () => void } => {
  mkdirSync(dir, { recursive: true })
  const db = new DatabaseSync(join(dir, DURABLE_STORE_FILE))
  db.exec(`
    PRAGMA secure_delete = ON;
    PRAGMA journal_mode = DELETE;
    PRAGMA synchronous = FULL;
    CREATE TABLE IF NOT EXISTS records (
      agent_id TEXT NOT NULL,
      entry_id TEXT NOT NULL,
      payload TEXT NOT NULL,
      vector BLOB NOT NULL,
      PRIMARY KEY (agent_id, entry_id)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS checkpoint (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      log TEXT NOT NULL,
      seq INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS partition_checkpoints (
      partition INTEGER PRIMARY KEY,
      log TEXT NOT NULL,
      seq INTEGER NOT NULL
    );
  `)
  const putRecord = db.prepare(
    "INSERT OR REPLACE INTO records (agent_id, entry_id, payload, vector) VALUES (?, ?, ?, ?)",
  )
  const deleteRecord = db.prepare("DELETE FROM records WHERE agent_id = ? AND entry_id = ?")
  const deleteAgent = db.prepare("DELETE FROM records WHERE agent_id = ?")
  const readCheckpoint = db.prepare("SELECT log, seq FROM partition_checkpoints WHERE partition = ?")
  const putCheckpoint = db.prepare(
    "INSERT OR REPLACE INTO partition_checkpoints (partition, log, seq) VALUES (?, ?, ?)",
  )
  const deleteCheckpoint = db.prepare("DELETE FROM partition_checkpoints WHERE partition = ?")
  // A file from before partitions: its whole-log checkpoint becomes every partition's.
  const wholeLog = db.prepare("SELECT log, seq FROM checkpoint WHERE id = 1").get() as
    | { log: string; seq: number }
    | undefined
  if (wholeLog !== undefined) {
    db.exec("BEGIN IMMEDIATE")
    for (const partition of allPartitions()) putCheckpoint.run(partition, wholeLog.log, wholeLog.seq)
    db.exec("DELETE FROM checkpoint")
    db.exec("COMMIT")
  }

  // The search index: every stored record, loaded once.
  const memory = makeEmbeddedStore()
  const loaded: LongTermRecord[] = []
  for (const row of db.prepare("SELECT payload, vector FROM records").iterate()) {
    loaded.push({ payload: decodePayload(row.payload as string), vector: vectorOf(row.vector as Uint8Array) })
  }
  Effect.runSync(memory.upsert(loaded))

  /** Runs `body` in one transaction: all of it is on disk, or none; `committed` runs right after the commit. */
  const transaction = (what: string, body: () => void, committed?: () => void) =>
    Effect.try({
      try: () => {
        db.exec("BEGIN IMMEDIATE")
        try {
          body()
          db.exec("COMMIT")
        } catch (error) {
          db.exec("ROLLBACK")
          throw error
        }
        committed?.()
      },
      catch: (error) =>
        new LongTermStoreError({ reason: `${what}: ${error instanceof Error ? error.message : String(error)}` }),
    })

  const writeOnDisk = (write: StoreWrite) => {
    if ("upsert" in write)
      for (const r of write.upsert)
        putRecord.run(r.payload.agentId, r.payload.entryId, JSON.stringify(r.payload), vectorBytes(r.vector))
    else if ("remove" in write) for (const id of write.remove.entryIds) deleteRecord.run(write.remove.agentId, id)
    else deleteAgent.run(write.removeAgent)
  }
  const writeInMemory = (write: StoreWrite) =>
    "upsert" in write
      ? memory.upsert(write.upsert)
      : "remove" in write
        ? memory.remove(write.remove.agentId, write.remove.entryIds)
        : Effect.flatMap(memory.list({ agentId: write.removeAgent }), (records) =>
            memory.remove(
              write.removeAgent,
              records.map((r) => r.entryId),
            ),
          )

  // Upserts are searched at once and written to the file together, at most GROUP_COMMIT_MS later, in one
  // transaction with the checkpoints they move: a commit syncs the disk, and one per demotion held the event
  // loop. A removal, and anything else that reads or changes the file, writes what waits first, with itself.
  // While a group write fails, commits are written at once again, so their failure reaches the writer, which
  // retries them and holds back its reads, as before.
  const waiting: StoreWrite[] = []
  const waitingCheckpoints = new Map<number, { readonly log: string; readonly seq: number }>()
  let flushTimer: ReturnType<typeof setTimeout> | undefined
  let groupFailing = false
  let closed = false
  /**
   * Runs `body` in one transaction with what waits; what waits is let go only once it is committed. Taken,
   * written and let go in one synchronous run: no other write comes between.
   */
  const withWaiting = (what: string, body: () => void) => {
    let written = 0
    let checkpoints: Array<[number, { readonly log: string; readonly seq: number }]> = []
    return transaction(
      what,
      () => {
        written = waiting.length
        checkpoints = [...waitingCheckpoints]
        for (let i = 0; i < written; i++) writeOnDisk(waiting[i]!)
        for (const [partition, { log, seq }] of checkpoints) putCheckpoint.run(partition, log, seq)
        body()
      },
      () => {
        waiting.splice(0, written)
        for (const [partition, checkpoint] of checkpoints)
          if (waitingCheckpoints.get(partition) === checkpoint) waitingCheckpoints.delete(partition)
        groupFailing = false
      },
    ).pipe(
      // What waits did not reach the file either: until a write succeeds, commits are written at once.
      Effect.tapError(() =>
        Effect.sync(() => {
          if (waiting.length > 0 || waitingCheckpoints.size > 0) groupFailing = true
        }),
      ),
    )
  }
  const flushLater = (delay = GROUP_COMMIT_MS) => {
    if (closed) return
    flushTimer ??= setTimeout(() => {
      flushTimer = undefined
      // Written meanwhile with a removal, a drop or a commit written at once: nothing left to write.
      if (waiting.length === 0 && waitingCheckpoints.size === 0) return
      Effect.runSync(
        withWaiting("group commit", () => undefined).pipe(
          Effect.catch((error) =>
            Effect.andThen(
              Effect.logError("[longterm] the durable store's group write failed; the next commit retries it", error),
              Effect.sync(() => {
                groupFailing = true
                // An idle store tries again on its own; a commit meanwhile writes what waits with itself.
                flushLater(GROUP_RETRY_MS)
              }),
            ),
          ),
        ),
      )
    }, delay)
    flushTimer.unref?.()
  }

  const apply = (
    what: string,
    writes: ReadonlyArray<StoreWrite>,
    checkpoint?: { readonly log: string; readonly partition: number; readonly seq: number },
  ) =>
    // Decided when it runs, not when it is made: a writer retries the same effect.
    Effect.suspend(() => {
      if (closed) return Effect.fail(new LongTermStoreError({ reason: `${what}: the store is closed` }))
      if (checkpoint !== undefined && !groupFailing && writes.every((w) => "upsert" in w))
        return Effect.andThen(
          Effect.forEach(writes, writeInMemory, { discard: true }),
          Effect.sync(() => {
            waiting.push(...writes)
            waitingCheckpoints.set(checkpoint.partition, { log: checkpoint.log, seq: checkpoint.seq })
            flushLater()
          }),
        )
      return Effect.andThen(
        withWaiting(what, () => {
          for (const w of writes) writeOnDisk(w)
          if (checkpoint) putCheckpoint.run(checkpoint.partition, checkpoint.log, checkpoint.seq)
        }),
        Effect.forEach(writes, writeInMemory, { discard: true }),
      )
    })

  /** The partition's agents' records and its checkpoint, gone from the file and the index. */
  const dropPartition = (partition: number, agents: ReadonlyArray<string>, then?: { log: string }) =>
    Effect.andThen(
      withWaiting(`drop partition ${partition}`, () => {
        for (const agentId of agents) deleteAgent.run(agentId)
        if (then) putCheckpoint.run(partition, then.log, 0)
        else deleteCheckpoint.run(partition)
      }),
      Effect.forEach(agents, (removeAgent) => writeInMemory({ removeAgent }), { discard: true }),
    )
  const agentsOf = (partition: number) =>
    Effect.map(memory.list({}), (records) => [
      ...new Set(records.map((r) => r.agentId).filter((id) => partitionOf(id) === partition)),
    ])

  const checkpointed: CheckpointedStore = {
    resume: (log, partition, lastSeq) =>
      Effect.gen(function* () {
        yield* withWaiting(`resume partition ${partition}`, () => undefined)
        const row = readCheckpoint.get(partition) as { log: string; seq: number } | undefined
        if (row !== undefined && row.log === log && row.seq <= lastSeq) return row.seq
        // Another log, or one shorter than the checkpoint: the partition starts again from nothing.
        yield* dropPartition(partition, yield* agentsOf(partition), { log })
        return 0
      }),
    commit: (writes, log, partition, seq) => apply(`commit through seq ${seq}`, writes, { log, partition, seq }),
    release: (partition, agents) => dropPartition(partition, agents),
  }

  return {
    ...memory,
    name: "durable",
    upsert: (records) => apply("upsert", [{ upsert: records }]),
    remove: (agentId, entryIds) => apply("remove", [{ remove: { agentId, entryIds } }]),
    checkpointed,
    close: () => {
      clearTimeout(flushTimer)
      flushTimer = undefined
      closed = true
      // What could not be written stays behind the checkpoint on disk: the projection replays it at the next start.
      Effect.runSync(
        withWaiting("close", () => undefined).pipe(
          Effect.catch((error) => Effect.logError("[longterm] the durable store's last group write failed", error)),
        ),
      )
      db.close()
    },
  }
}

/** The durable store under `dir`, closed with its scope. */
export const durableStoreLayer = (dir: string): Layer.Layer<LongTermStore> =>
  Layer.effect(
    LongTermStore,
    Effect.acquireRelease(
      Effect.sync(() => makeDurableStore(dir)),
      (store) => Effect.sync(() => store.close()),
    ),
  )
