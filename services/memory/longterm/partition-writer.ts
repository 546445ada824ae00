/**
 * The single writer of one partition's long-term projection: takes the store writes the fold asked for
 * (longterm-fold.ts) in log order, batches consecutive upserts, retries each write until it is stored,
 * dead-letters a record the store refuses as it is, and moves the partition's checkpoint — in the same
 * transaction for a store that keeps its own, else in the checkpoint bucket once idle.
 */
import { Clock, Effect, Option, Queue, Schedule, type Scope } from "effect"
import { publishDeadLetter } from "../../platform/log/projection.ts"
import type { SequenceGate } from "../../platform/log/sequence-gate.ts"
import type { openBucket } from "../../platform/nats/buckets.ts"
import { Nats } from "../../platform/nats/connection.ts"
import { Metrics } from "../../platform/observability/metrics.ts"
import type { Op } from "./longterm-fold.ts"
import {
  type CheckpointedStore,
  type LongTermRecord,
  LongTermStoreError,
  type LongTermStoreShape,
  type StoreWrite,
} from "./store.ts"

/** How often, at most, an idle partition's checkpoint is moved to where its records are stored. */
const CHECKPOINT_INTERVAL_MS = 1_000
/** 20 ms, doubling, then every second, for as long as it takes. */
const RETRY_UNTIL_STORED = Schedule.min([Schedule.exponential("20 millis"), Schedule.spaced("1 second")])

/** The checkpoint bucket, as the platform opens it. */
type CheckpointBucket = Effect.Success<ReturnType<typeof openBucket>>

export interface PartitionWriterDeps {
  readonly partition: number
  /** The projection's name: where a refused record is dead-lettered. */
  readonly projectionName: string
  readonly store: LongTermStoreShape
  readonly removeAgentRecords: (agentId: string) => Effect.Effect<void, LongTermStoreError>
  /** Where the checkpoint goes: the store's own (with the log it belongs to), a bucket key, or nowhere (in memory). */
  readonly checkpoint:
    | { readonly own: CheckpointedStore; readonly logId: string }
    | { readonly kv: CheckpointBucket; readonly key: string }
    | null
  readonly ops: Queue.Queue<Op>
  /** Moved to each batch's last sequence once it is stored. */
  readonly stored: SequenceGate
}

/** Forks the writer in the scope; its checkpoint is moved when the scope closes. */
export const startPartitionWriter = ({
  partition,
  projectionName,
  store,
  removeAgentRecords,
  checkpoint,
  ops,
  stored,
}: PartitionWriterDeps): Effect.Effect<{ readonly storedOps: () => number }, never, Nats | Scope.Scope> =>
  Effect.gen(function* () {
    const { js } = yield* Nats
    const metrics = yield* Metrics
    const own = checkpoint !== null && "own" in checkpoint ? checkpoint.own : undefined
    const logId = checkpoint !== null && "own" in checkpoint ? checkpoint.logId : ""
    const checkpoints = checkpoint !== null && "kv" in checkpoint ? checkpoint : null
    let storedOps = 0

    const failed = (what: string) => (error: unknown) =>
      Effect.logError(`[longterm] partition ${partition}: ${what} failed`, error)
    const writesOf = (batch: ReadonlyArray<Op>): StoreWrite[] => {
      const writes: StoreWrite[] = []
      const upserts = batch.flatMap((op) => ("upsert" in op ? [op.upsert] : []))
      if (upserts.length > 0) writes.push({ upsert: upserts })
      for (const op of batch) {
        if ("remove" in op) writes.push({ remove: { agentId: op.remove.agentId, entryIds: [op.remove.entryId] } })
        else if ("removeAgent" in op) writes.push({ removeAgent: op.removeAgent })
      }
      return writes
    }
    // A write is retried until it goes through, logged at each failure: moving on would move the
    // checkpoint past records that were never stored. Meanwhile reads waiting for it wait.
    const untilStored =
      (what: string) =>
      <E>(self: Effect.Effect<void, E>): Effect.Effect<void> =>
        self.pipe(Effect.tapError(failed(what)), Effect.retry(RETRY_UNTIL_STORED), Effect.orDie)
    // A store that keeps its own checkpoints takes each batch and the checkpoint in one transaction.
    const commit = (own: CheckpointedStore, writes: ReadonlyArray<StoreWrite>, seq: number) =>
      own.commit(writes, logId, partition, seq).pipe(untilStored(`commit through seq ${seq}`))
    /**
     * Upserts a run of records. When the store refuses a record as it is (`refused`: a vector of another
     * size, a payload it rejects), retrying cannot help: the run is written a record at a time, and each
     * refused one is dead-lettered, with the store's reason, and passed, so the partition goes on. A
     * removal is never passed that way: it is retried until it is stored (a forget must erase).
     */
    const upsertOrDeadLetter = (
      upserts: ReadonlyArray<Extract<Op, { upsert: LongTermRecord }>>,
    ): Effect.Effect<void, LongTermStoreError> =>
      store.upsert(upserts.map((op) => op.upsert)).pipe(
        Effect.tap(() => Effect.sync(() => metrics.longtermWrites.inc({ outcome: "ok" }, upserts.length))),
        Effect.catch((error) => {
          metrics.longtermWrites.inc({ outcome: "error" })
          if (error.refused !== true) return Effect.fail(error)
          if (upserts.length > 1) return Effect.forEach(upserts, (op) => upsertOrDeadLetter([op]), { discard: true })
          const [op] = upserts as [Extract<Op, { upsert: LongTermRecord }>]
          const letter = {
            projection: projectionName,
            seq: op.seq,
            subject: op.subject,
            reason: `the store refused the record: ${error.reason}`,
            // The record's metadata, not its text: a dead letter is stored in clear.
            payload: JSON.stringify({ ...op.upsert.payload, summary: null, keyPoints: null }),
          }
          return Effect.logError(
            `[longterm] partition ${partition}: ${op.upsert.payload.agentId}/${op.upsert.payload.entryId} at seq ${op.seq} dead-lettered (${letter.reason})`,
          ).pipe(
            Effect.andThen(Effect.tryPromise(() => publishDeadLetter(js, letter))),
            Effect.mapError(
              (cause) => new LongTermStoreError({ reason: `dead letter ${op.seq} not stored: ${String(cause)}` }),
            ),
          )
        }),
      )
    // Otherwise: upserts and removals, then the checkpoint in the KV bucket (a durable store) when idle.
    const write = Effect.fnUntraced(function* (batch: ReadonlyArray<Op>) {
      const upserts = batch.flatMap((op) => ("upsert" in op ? [op] : []))
      if (upserts.length > 0) yield* upsertOrDeadLetter(upserts).pipe(untilStored("upsert"))
      const first = batch[0]!
      if ("remove" in first) {
        yield* store.remove(first.remove.agentId, [first.remove.entryId]).pipe(untilStored("remove"))
      } else if ("removeAgent" in first) {
        yield* removeAgentRecords(first.removeAgent).pipe(untilStored("remove of an agent"))
      }
    })

    let checkpointBehind = false
    let checkpointedAt = 0
    // A checkpoint that could not be written stays behind, logged, and is tried again at the next interval:
    // a forget waits for it, and an idle partition has no later write to carry it.
    const moveCheckpoint = Effect.gen(function* () {
      const seq = stored.current()
      let moved = true
      if (own !== undefined) yield* commit(own, [], seq)
      else if (checkpoints)
        moved = yield* Effect.tryPromise(() => checkpoints.kv.put(checkpoints.key, String(seq))).pipe(
          Effect.as(true),
          Effect.catch((error) => Effect.as(failed(`checkpoint at seq ${seq}`)(error), false)),
        )
      checkpointBehind = !moved
      checkpointedAt = yield* Clock.currentTimeMillis
    })
    // The single writer: batches consecutive upserts, keeps log order, then moves the checkpoint.
    const writer = Effect.gen(function* () {
      // Taken from the queue, not yet written.
      const queue: Op[] = []
      while (true) {
        queue.push(...(yield* Queue.clear(ops)))
        if (queue.length === 0) {
          // Idle: the checkpoint catches up, at most once per interval (a commit syncs the disk, and an
          // older checkpoint only means a restart replays a few more events).
          if (checkpointBehind) {
            const wait = checkpointedAt + CHECKPOINT_INTERVAL_MS - (yield* Clock.currentTimeMillis)
            const more = wait > 0 ? yield* Queue.takeAll(ops).pipe(Effect.timeoutOption(wait)) : Option.none()
            if (Option.isSome(more)) queue.push(...more.value)
            else yield* moveCheckpoint
            // Not written: tried again after the interval, unless more comes first.
            if (queue.length === 0 && checkpointBehind) continue
          }
          if (queue.length === 0) queue.push(...(yield* Queue.takeAll(ops)))
        }
        // A run of upserts goes in one batch; a removal waits for what came before it.
        let n = 0
        while (n < queue.length && n < 256 && !("remove" in queue[n]!) && !("removeAgent" in queue[n]!)) n++
        const batch = queue.splice(0, Math.max(1, n))
        const seq = batch[batch.length - 1]!.seq
        const writes = writesOf(batch)
        if (own !== undefined && writes.length > 0) {
          yield* commit(own, writes, seq)
          checkpointBehind = false
        } else {
          // Events that change no record (and every batch of a KV-checkpointed store) move the checkpoint when idle.
          if (own === undefined) yield* write(batch)
          checkpointBehind = true
        }
        stored.advanceTo(seq)
        storedOps += batch.length
      }
    })
    yield* Effect.forkScoped(writer)
    // A partition released or stopped keeps the position it reached (the writer is idle by then or gone).
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => (checkpointBehind ? moveCheckpoint : Effect.void)).pipe(
        Effect.timeout("2 seconds"),
        Effect.ignore,
      ),
    )
    return { storedOps: () => storedOps }
  })
