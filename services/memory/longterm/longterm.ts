/**
 * The long-term projection: every entry that demotes out of working becomes
 * a record in the long-term store — its embedding (computed once, carried by
 * the EntryDemoted event), the lexical terms of its raw text, and a payload
 * with its origin, tags, correlation id, mood, emotional weight, timestamps
 * and the best summary working had.
 *
 * It runs per partition, for the partitions the memory replica owns: each
 * opened partition follows its own events (`wm.evt.<p>.>`) with a writer of
 * its own, applied in log order. A durable store resumes each partition
 * from that partition's checkpoint: the durable embedded store keeps them
 * itself, written in the same transaction as the records; for Qdrant they
 * are in the checkpoint bucket (`projection.longterm-qdrant.p<p>`), moved
 * once the records before them are stored. The in-memory embedded store
 * rebuilds an opened partition from the log. A store local to the process
 * (the embedded ones) drops a partition's records when the partition goes to
 * another replica, so a replica's disk holds only what it serves; Qdrant,
 * shared by every replica, keeps them for the next owner.
 *
 * Resuming needs nothing from before the checkpoint: an EntryDemoted (v2)
 * carries everything its record holds. Only a v1 demotion (written before
 * v2) takes its facts from the entry's earlier events, which a rebuild
 * from the start of the log has seen.
 */
import { Context, type Duration, Effect, Fiber, FiberSet, Layer, Queue, Scope } from "effect"
import { CHECKPOINT_BUCKET, checkpointKey } from "../../../contracts/buckets.ts"
import { NotCaughtUp } from "../../../contracts/errors.ts"
import { allPartitions, partitionOf } from "../../../contracts/partitions.ts"
import { EVENTS_STREAM, partitionEvents } from "../../../contracts/subjects.ts"
import type { EventLog } from "../../platform/log/event-log.ts"
import { type Projection, READ_WAIT, runProjection } from "../../platform/log/projection.ts"
import { makeSequenceGate } from "../../platform/log/sequence-gate.ts"
import { openBucket } from "../../platform/nats/buckets.ts"
import { Nats } from "../../platform/nats/connection.ts"
import { Metrics } from "../../platform/observability/metrics.ts"
import { awaitPartitionApplied, lastSeqOfPartition } from "../../platform/partitions/partition-position.ts"
import { makeLongTermFold, type Op } from "./longterm-fold.ts"
import { startPartitionWriter } from "./partition-writer.ts"
import { LongTermStore } from "./store.ts"

/** The long-term writer's queue: records taken from the log and not yet in the store. */
const LONGTERM_QUEUE = { service: "memory", queue: "longterm" }

/** The long-term projection of one partition this replica owns. */
export interface LongTermPartition {
  readonly partition: number
  /** Every record of the partition up to this sequence was in the store when the partition was opened. */
  readonly resumedFrom: number
  /** Sequence up to which every record of the partition is in the store. */
  readonly storedSeq: () => number
  /** Records of the partition after `storedSeq` not yet in the store: taken from the log, or still in it. */
  readonly backlog: () => number
  /** Waits until every record of the partition up to stream sequence `seq` is in the store. */
  readonly waitFor: (seq: number, timeout?: Duration.Input) => Effect.Effect<void, NotCaughtUp>
  /** The partition's events as they stood when it was opened are in the store. */
  readonly caughtUp: Effect.Effect<void>
  readonly projection: Projection
  /** Entries whose facts are kept for their demotion: recorded, not yet demoted or forgotten. */
  readonly trackedEntries: () => number
}

export interface LongTermShape {
  /** Starts the partition's projection in `scope` (the partition's: closed when it is lost or at shutdown). */
  readonly open: (partition: number, scope: Scope.Scope) => Effect.Effect<LongTermPartition>
  /** The partition went to another replica: a store local to this process drops its records. */
  readonly release: (partition: number) => Effect.Effect<void>
  /** The partitions opened now. */
  readonly partitions: () => ReadonlyMap<number, LongTermPartition>
  /** Every opened partition (or the agent's) has stored every record up to `seq`. */
  readonly waitFor: (seq: number, agentId?: string) => Effect.Effect<void, NotCaughtUp>
  readonly trackedEntries: () => number
}

export class LongTerm extends Context.Service<LongTerm, LongTermShape>()("wm/LongTerm") {
  static readonly make = (options: { readonly durable: boolean }) =>
    Effect.gen(function* () {
      const store = yield* LongTermStore
      const metrics = yield* Metrics
      const context = yield* Effect.context<EventLog | Nats>()
      // Projected events arrive in callbacks: what they log goes through this service's logger.
      const runSync = Effect.runSyncWith(context)
      const { jsm } = yield* Nats
      const own = store.checkpointed
      // The log the checkpoints belong to: the event stream, by its creation time.
      const stream = own ? yield* Effect.promise(() => jsm.streams.info(EVENTS_STREAM)) : null
      const logId = stream ? `${EVENTS_STREAM}@${stream.created}` : ""
      const checkpoints = !own && options.durable ? yield* openBucket(CHECKPOINT_BUCKET) : null
      const keyOf = (partition: number) => checkpointKey(`longterm-${store.name}.p${partition}`)
      // The checkpoint of the whole log, from before partitions: every partition's records up to it are stored.
      const wholeLogKey = checkpointKey(`longterm-${store.name}`)
      const opened = new Map<number, LongTermPartition>()
      /** Per partition, a release under way: opening the partition again waits for it. */
      const releasing = new Map<number, Fiber.Fiber<void>>()

      /** Every record of one agent, removed. */
      const removeAgentRecords = (agentId: string) =>
        store.removeAgent !== undefined
          ? store.removeAgent(agentId)
          : Effect.flatMap(store.list({ agentId }), (records) =>
              store.remove(
                agentId,
                records.map((r) => r.entryId),
              ),
            )

      /** The agents that have records in the partition (the store is asked; rarely needed). */
      const agentsIn = (partition: number) =>
        Effect.map(
          store.list({}),
          (records) => new Set(records.map((r) => r.agentId).filter((id) => partitionOf(id) === partition)),
        )

      const resumeFrom = Effect.fnUntraced(function* (partition: number) {
        if (own !== undefined) {
          const lastSeq = (yield* Effect.promise(() => jsm.streams.info(EVENTS_STREAM))).state.last_seq
          return yield* own.resume(logId, partition, lastSeq).pipe(Effect.orDie)
        }
        if (checkpoints !== null) {
          const stored =
            (yield* Effect.promise(() => checkpoints.get(keyOf(partition)))) ??
            (yield* Effect.promise(() => checkpoints.get(wholeLogKey)))
          return stored ? Number(stored.string()) : 0
        }
        // The in-memory store is rebuilt: nothing of the partition may be left from an earlier owner.
        if (!store.shared)
          for (const agentId of yield* agentsIn(partition).pipe(Effect.orDie))
            yield* removeAgentRecords(agentId).pipe(Effect.orDie)
        return 0
      })

      const open = (partition: number, scope: Scope.Scope) =>
        Effect.gen(function* () {
          const pending = releasing.get(partition)
          if (pending !== undefined) yield* Fiber.join(pending)
          const checkpoint = yield* resumeFrom(partition)
          const fold = makeLongTermFold()
          // What the projection asks of the store, in log order, for the partition's single writer.
          const ops = yield* Queue.unbounded<Op>()
          const stored = makeSequenceGate(checkpoint)

          // Records taken from the log and not yet in the store, and what the log still held after the last
          // one delivered: how far behind the store is (`backlog`).
          let enqueued = 0
          let deliveryPending = 0
          const enqueue = (op: Op) => {
            enqueued++
            Queue.offerUnsafe(ops, op)
          }

          const target = yield* lastSeqOfPartition(partition).pipe(Effect.orDie)
          const projectionName = `longterm-${store.name}`
          const projection = yield* runProjection({
            name: projectionName,
            filter: partitionEvents(partition),
            fromSeq: checkpoint + 1,
            target,
            apply: (event, record) => {
              deliveryPending = record.pending
              const { op, problem } = fold.apply(event, record.seq, record.subject)
              if (problem !== undefined) runSync(Effect.logError(`[longterm] ${problem}`))
              enqueue(op)
            },
            // A record no one can read still moves the store's position past it: otherwise every wait for
            // a later sequence, the warm-up's included, would wait for it for ever.
            onDeadLetter: (letter) => enqueue({ seq: letter.seq, checkpointOnly: true }),
          }).pipe(Scope.provide(scope))

          const writer = yield* startPartitionWriter({
            partition,
            projectionName,
            store,
            removeAgentRecords,
            checkpoint:
              own !== undefined
                ? { own, logId }
                : checkpoints !== null
                  ? { kv: checkpoints, key: keyOf(partition) }
                  : null,
            ops,
            stored,
          }).pipe(Scope.provide(scope))
          yield* metrics
            .collect(() => metrics.backgroundQueueDepth.inc(LONGTERM_QUEUE, enqueued - writer.storedOps()))
            .pipe(Scope.provide(scope))
          // The stored gate is never closed, so a wait without a timeout cannot fail.
          const storedTo = (seq: number) => stored.awaitSeq(seq).pipe(Effect.orDie)

          const longTermPartition: LongTermPartition = {
            partition,
            resumedFrom: checkpoint,
            storedSeq: stored.current,
            backlog: () => enqueued - writer.storedOps() + deliveryPending,
            waitFor: (seq, timeout = READ_WAIT) =>
              stored.current() >= seq
                ? Effect.void
                : awaitPartitionApplied(partition, projection, seq, timeout).pipe(
                    Effect.provideContext(context),
                    // Every record of the partition up to `seq` is applied: the last of them is the one to store.
                    Effect.andThen(() => storedTo(Math.min(seq, projection.appliedSeq()))),
                  ),
            caughtUp: Effect.andThen(projection.warmedUp, () => storedTo(projection.appliedSeq())),
            projection,
            trackedEntries: fold.trackedEntries,
          }
          opened.set(partition, longTermPartition)
          yield* Scope.addFinalizer(
            scope,
            Effect.sync(() => {
              if (opened.get(partition) === longTermPartition) opened.delete(partition)
            }),
          )
          return longTermPartition
        }).pipe(Effect.orDie, Effect.provideContext(context))

      /** A local store drops the partition's records (and checkpoint); Qdrant keeps them for the next owner. */
      const dropPartition = Effect.fnUntraced(function* (partition: number) {
        if (store.shared) return
        const agents = yield* agentsIn(partition).pipe(Effect.orDie)
        if (own !== undefined) return yield* own.release(partition, [...agents]).pipe(Effect.orDie)
        for (const agentId of agents) yield* removeAgentRecords(agentId).pipe(Effect.orDie)
      })
      const runFork = yield* FiberSet.makeRuntime<never>()
      const release = (partition: number) =>
        Effect.suspend(() => {
          const previous = releasing.get(partition)
          const done = Effect.andThen(previous ? Fiber.join(previous) : Effect.void, dropPartition(partition)).pipe(
            Effect.catchCause((cause) => Effect.logError(`[longterm] partition ${partition} not dropped`, cause)),
          )
          const fiber = runFork(done)
          releasing.set(partition, fiber)
          return Fiber.join(fiber).pipe(
            Effect.ensuring(
              Effect.sync(() => {
                if (releasing.get(partition) === fiber) releasing.delete(partition)
              }),
            ),
          )
        })

      return {
        open,
        release,
        partitions: () => opened,
        waitFor: (seq, agentId) =>
          agentId !== undefined
            ? (opened.get(partitionOf(agentId))?.waitFor(seq) ??
              Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: 0 })))
            : Effect.forEach([...opened.values()], (p) => p.waitFor(seq), {
                concurrency: "unbounded",
                discard: true,
              }),
        trackedEntries: () => [...opened.values()].reduce((n, p) => n + p.trackedEntries(), 0),
      } satisfies LongTermShape
    })

  static readonly layer = (options: { readonly durable: boolean }) => Layer.effect(LongTerm, LongTerm.make(options))

  /**
   * The projection over every partition, without leases: for a process that is the only one holding
   * long-term (a rebuild, a test of the projection itself).
   */
  static readonly everyPartition = (options: { readonly durable: boolean }) =>
    Layer.effect(
      LongTerm,
      Effect.gen(function* () {
        const longTerm = yield* LongTerm
        const scope = yield* Effect.scope
        const partitions = yield* Effect.forEach(allPartitions(), (p) => longTerm.open(p, scope), {
          concurrency: 8,
        })
        yield* Effect.forEach(partitions, (p) => p.caughtUp, { concurrency: "unbounded", discard: true })
        return longTerm
      }),
    ).pipe(Layer.provide(LongTerm.layer(options)))
}
