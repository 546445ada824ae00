/**
 * The forget eraser: finishes every forget whose tombstone is in the log,
 * whoever started it and whatever crashed in between. Substrate replicas
 * divide the partitions by lease (service `eraser`); for each partition it
 * holds, a replica follows the partition's events from the partition's own
 * checkpoint, and for each tombstone erases the log records,
 * waits for every durable projection to confirm (its checkpoint past the
 * tombstone) and the partition's snapshots to be erased or retaken, erases
 * the dead letters and the records of the retired `wm_substrate` bucket of
 * an upgraded deployment, and retries until all of it is done;
 * only then does its checkpoint move past the tombstone, so a restart
 * resumes the forgets that were not finished.
 *
 * It also guards the dead letters: a letter stored after a forget's sweep
 * (a projection that was still catching up) is erased as it arrives when
 * its record is gone from the log. It runs beside the substrate
 * (`substrateService`), whose user may erase messages (infra/auth.ts).
 */
import { Context, Duration, Effect, Exit, FiberSet, Layer, Queue, Schedule, Scope } from "effect"
import { CHECKPOINT_BUCKET } from "../../contracts/buckets.ts"
import { decodeEvent } from "../../contracts/decode.ts"
import { partitionEvents } from "../../contracts/subjects.ts"
import type { Tombstone } from "../../domain/forget.ts"
import { completeErasure, type ErasureReport, guardDeadLetters, sweepDeadLetters } from "../platform/log/erase.ts"
import { EventLog } from "../platform/log/event-log.ts"
import { openBucket } from "../platform/nats/buckets.ts"
import { Nats } from "../platform/nats/connection.ts"
import { Metrics } from "../platform/observability/metrics.ts"
import { holdPartitionLeases } from "../platform/partitions/leases.ts"

/**
 * Not under `projection.`: the eraser is not one of the projections a forget waits for. One per partition;
 * the whole log's, of a deployment from before partitions, is where a partition without its own resumes.
 */
export const ERASER_CHECKPOINT = "eraser.forget"
const eraserCheckpoint = (partition: number) => `${ERASER_CHECKPOINT}.p${partition}`

export interface ForgetEraserShape {
  /** Forgets finished since the service started, in log order. */
  readonly completed: () => ReadonlyArray<ErasureReport>
  /** Tombstones whose erasure is not finished yet. */
  readonly unfinished: () => number
}

interface Job {
  readonly tombstone: Tombstone
  readonly seq: number
}

/** How long one attempt waits for the projections before the eraser tries again. */
const ATTEMPT_WAIT_MS = 10_000
const MARKER = Buffer.from('Forgotten"')

export class ForgetEraser extends Context.Service<ForgetEraser, ForgetEraserShape>()("wm/ForgetEraser") {
  static readonly make = Effect.gen(function* () {
    const { nc, js, jsm } = yield* Nats
    // Dead letters arrive in callbacks: what they log goes through this service's logger.
    const runSync = Effect.runSyncWith(yield* Effect.context<never>())
    const log = yield* EventLog
    const checkpoints = yield* openBucket(CHECKPOINT_BUCKET)
    const runFork = yield* FiberSet.makeRuntime<never>()
    const completed: ErasureReport[] = []
    const running = new Map<number, { readonly scope: Scope.Closeable; readonly queue: Job[] }>()
    const metrics = yield* Metrics
    // The tombstones of the partitions this replica erases for, not yet complete.
    yield* metrics.collect(() => {
      let pending = 0
      for (const { queue } of running.values()) pending += queue.length
      metrics.forgetsPending.set(pending)
    })

    const attempt = (job: Job) =>
      Effect.tryPromise({
        try: () => completeErasure(nc, job.tombstone, job.seq, { waitMs: ATTEMPT_WAIT_MS }),
        catch: (cause) => (cause instanceof Error ? cause : new Error(String(cause))),
      }).pipe(
        Effect.flatMap((report) =>
          report.complete
            ? Effect.succeed(report)
            : Effect.fail(new Error(`waiting for ${report.pending.join(", ") || "the log"} to confirm`)),
        ),
        Effect.tapError((error) =>
          Effect.andThen(
            Effect.sync(() => metrics.errors.inc({ service: "substrate", kind: "forget" })),
            Effect.logError(
              `[forget] erasure for the tombstone at ${job.seq} (${job.tombstone.agentId}) not finished: ${String(error)}`,
            ),
          ),
        ),
        Effect.retry(Schedule.min([Schedule.exponential("1 second", 2), Schedule.spaced("30 seconds")])),
      )

    /**
     * One partition's tombstones, from its own checkpoint (a deployment from before partitions: the whole
     * log's), on a consumer filtered to the partition, so a replica reads only its partitions' events.
     */
    const followPartition = (partition: number, scope: Scope.Scope, queue: Job[]) =>
      Effect.gen(function* () {
        const key = eraserCheckpoint(partition)
        const stored =
          (yield* Effect.promise(() => checkpoints.get(key))) ??
          (yield* Effect.promise(() => checkpoints.get(ERASER_CHECKPOINT)))
        const fromSeq = stored && stored.operation === "PUT" ? Number(stored.string()) + 1 : 1
        let seen = fromSeq - 1
        let saved = seen
        // Says the partition moved on since the worker last looked; one signal stands for any number of records.
        const logMoved = yield* Queue.sliding<true>(1)
        const subscription = yield* log.follow({
          filter: partitionEvents(partition),
          fromSeq,
          onRecord: (record) => {
            seen = record.seq
            // Only a tombstone is decoded; the rest of the partition is passed over.
            if (Buffer.from(record.data.buffer, record.data.byteOffset, record.data.byteLength).indexOf(MARKER) >= 0) {
              const decoded = decodeEvent(record.data)
              if (decoded.ok && (decoded.event._tag === "EntryForgotten" || decoded.event._tag === "AgentForgotten"))
                queue.push({ tombstone: decoded.event, seq: record.seq })
            }
            Queue.offerUnsafe(logMoved, true)
          },
        })
        yield* Scope.addFinalizer(
          scope,
          Effect.promise(() => subscription.stop()),
        )

        const save = (seq: number) =>
          seq <= saved
            ? Effect.void
            : Effect.tryPromise(() => checkpoints.put(key, String(seq))).pipe(
                Effect.tap(() =>
                  Effect.sync(() => {
                    saved = Math.max(saved, seq)
                  }),
                ),
                Effect.ignore,
              )

        const worker = Effect.gen(function* () {
          while (true) {
            const job = queue[0]
            if (job === undefined) {
              yield* save(seen)
              yield* Queue.take(logMoved)
              // Under steady traffic the checkpoint is written about once a second, not once per record.
              yield* Effect.sleep(Duration.seconds(1))
              continue
            }
            const report = yield* attempt(job)
            completed.push(report)
            queue.shift()
            yield* save(queue[0] !== undefined ? queue[0].seq - 1 : seen)
          }
        })
        yield* Effect.forkIn(worker, scope)
      })

    // Substrate replicas divide the partitions' forgets by lease, as the projections divide their views.
    yield* holdPartitionLeases("eraser", {
      acquired: (partition) => {
        if (running.has(partition)) return
        const scope = Scope.makeUnsafe()
        const queue: Job[] = []
        running.set(partition, { scope, queue })
        runFork(
          followPartition(partition, scope, queue).pipe(
            Effect.catchCause((cause) => Effect.logError(`[forget] partition ${partition} not followed`, cause)),
          ),
        )
      },
      lost: (partition) => {
        const held = running.get(partition)
        if (held === undefined) return
        running.delete(partition)
        // An unfinished forget stays before the partition's checkpoint: its next owner finishes it.
        runFork(Scope.close(held.scope, Exit.void))
      },
    })
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...running.values()], (held) => Scope.close(held.scope, Exit.void), { discard: true }),
    )

    // Letters stored after a forget's sweep, and any left by a forget that ran before this guard.
    const guard = yield* Effect.tryPromise(() =>
      guardDeadLetters(js, jsm, (seq, error) =>
        runSync(Effect.logError(`[forget] dead letter ${seq} not checked`, error)),
      ),
    ).pipe(Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo({ duration: "60 seconds" }))), Effect.orDie)
    yield* Effect.addFinalizer(() => Effect.promise(guard.stop))
    yield* Effect.forkScoped(
      Effect.tryPromise(() => sweepDeadLetters(nc)).pipe(
        Effect.retry(Schedule.spaced("5 seconds").pipe(Schedule.upTo({ duration: "5 minutes" }))),
        Effect.catch((error) => Effect.logError("[forget] sweep of the dead letters failed", error)),
      ),
    )

    return {
      completed: () => completed,
      unfinished: () => [...running.values()].reduce((n, held) => n + held.queue.length, 0),
    } satisfies ForgetEraserShape
  })

  static readonly layer = Layer.effect(ForgetEraser, ForgetEraser.make)
}
