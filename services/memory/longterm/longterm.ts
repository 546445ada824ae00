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
import { Clock, Context, type Duration, Effect, Fiber, FiberSet, Layer, Option, Queue, Schedule, Scope } from "effect"
import { CHECKPOINT_BUCKET, checkpointKey } from "../../../contracts/buckets.ts"
import type { RepresentationKind } from "../../../contracts/entry.ts"
import { NotCaughtUp } from "../../../contracts/errors.ts"
import type { DemotedEntry, EventOf, MemoryEvent } from "../../../contracts/events.ts"
import type { LongTermPayload } from "../../../contracts/longterm.ts"
import { allPartitions, partitionOf } from "../../../contracts/partitions.ts"
import { EVENTS_STREAM, partitionEvents } from "../../../contracts/subjects.ts"
import { decodeVector } from "../../platform/embedding/embedder.ts"
import type { EventLog } from "../../platform/log/event-log.ts"
import { type Projection, publishDeadLetter, READ_WAIT, runProjection } from "../../platform/log/projection.ts"
import { makeSequenceGate } from "../../platform/log/sequence-gate.ts"
import { openBucket } from "../../platform/nats/buckets.ts"
import { Nats } from "../../platform/nats/connection.ts"
import { Metrics } from "../../platform/observability/metrics.ts"
import { awaitPartitionApplied, lastSeqOfPartition } from "../../platform/partitions/partition-position.ts"
import {
  type CheckpointedStore,
  type LongTermRecord,
  LongTermStore,
  LongTermStoreError,
  type StoreWrite,
} from "./store.ts"

interface EntryFacts {
  agentId: string
  entryId: string
  origin: LongTermPayload["origin"]
  tags: ReadonlyArray<string>
  correlationId: string | null
  moodSnapshot: LongTermPayload["moodSnapshot"]
  emotionalWeight: number
  timestamp: number
  rawTokens: number
  keyPoints: { text: string; tokens: number } | null
  summary: { text: string; tokens: number } | null
  citations: number
}

/** What a v1 demotion (upcast with `entry: null`) left, as far as the entry's earlier events told. */
const demotedEntryOf = (f: EntryFacts | undefined): DemotedEntry | null =>
  f === undefined
    ? null
    : {
        timestamp: f.timestamp,
        origin: f.origin,
        correlationId: f.correlationId,
        tags: f.tags,
        moodSnapshot: f.moodSnapshot,
        emotionalWeight: f.emotionalWeight,
        rawTokens: f.rawTokens,
        keyPoints: f.keyPoints,
        summary: f.summary,
        citationCount: f.citations,
      }

type Op = { readonly seq: number } & (
  | { readonly upsert: LongTermRecord; readonly subject: string }
  | { readonly remove: { readonly agentId: string; readonly entryId: string } }
  | { readonly removeAgent: string }
  | { readonly checkpointOnly: true }
)

/** How often, at most, an idle partition's checkpoint is moved to where its records are stored. */
const CHECKPOINT_INTERVAL_MS = 1_000
/** 20 ms, doubling, then every second, for as long as it takes. */
const RETRY_UNTIL_STORED = Schedule.min([Schedule.exponential("20 millis"), Schedule.spaced("1 second")])

const best = (f: DemotedEntry): { text: string; tokens: number; form: RepresentationKind } =>
  f.summary
    ? { ...f.summary, form: "summary" }
    : f.keyPoints
      ? { ...f.keyPoints, form: "keyPoints" }
      : { text: "", tokens: 0, form: "summary" }

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
      const { jsm, js } = yield* Nats
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
          const facts = new Map<string, EntryFacts>()
          // What the projection asks of the store, in log order, for the partition's single writer.
          const ops = yield* Queue.unbounded<Op>()
          const stored = makeSequenceGate(checkpoint)

          const factsOf = (event: MemoryEvent): EntryFacts | undefined =>
            "entryId" in event ? facts.get(`${event.agentId}/${event.entryId}`) : undefined

          /**
           * The record of a demotion: from the event itself (v2 carries what the entry left), else — a v1
           * event, upcast without it — from the entry's earlier events, when this projection has seen them.
           */
          const payloadOf = (event: EventOf<"EntryDemoted">): LongTermPayload | null => {
            const left: DemotedEntry | null = event.entry ?? demotedEntryOf(factsOf(event))
            if (left === null) return null
            const summary = best(left)
            return {
              agentId: event.agentId,
              entryId: event.entryId,
              demotedAt: event.score.now,
              model: event.embedding.model,
              origin: left.origin,
              tags: [...left.tags],
              correlationId: left.correlationId,
              moodSnapshot: left.moodSnapshot,
              emotionalWeight: left.emotionalWeight,
              timestamp: left.timestamp,
              summary: summary.text,
              summaryForm: summary.form,
              summaryTokens: summary.tokens,
              keyPoints: left.keyPoints?.text ?? null,
              keyPointsTokens: left.keyPoints?.tokens ?? null,
              rawTokens: left.rawTokens,
              citationCount: left.citationCount,
            }
          }

          // Records taken from the log and not yet in the store, and what the log still held after the last
          // one delivered: how far behind the store is (`backlog`).
          let enqueued = 0
          let storedOps = 0
          let deliveryPending = 0
          const enqueue = (op: Op) => {
            enqueued++
            Queue.offerUnsafe(ops, op)
          }
          yield* metrics
            .collect(() => metrics.backgroundQueueDepth.inc(LONGTERM_QUEUE, enqueued - storedOps))
            .pipe(Scope.provide(scope))

          const target = yield* lastSeqOfPartition(partition).pipe(Effect.orDie)
          const projectionName = `longterm-${store.name}`
          const projection = yield* runProjection({
            name: projectionName,
            filter: partitionEvents(partition),
            fromSeq: checkpoint + 1,
            target,
            apply: (event, record) => {
              deliveryPending = record.pending
              switch (event._tag) {
                case "EntryRecorded":
                  facts.set(`${event.agentId}/${event.entryId}`, {
                    agentId: event.agentId,
                    entryId: event.entryId,
                    origin: event.origin,
                    tags: event.tags,
                    correlationId: event.correlationId,
                    moodSnapshot: event.moodSnapshot,
                    emotionalWeight: event.emotionalWeight,
                    timestamp: event.timestamp,
                    rawTokens: event.tokens,
                    keyPoints: null,
                    summary: null,
                    citations: 0,
                  })
                  break
                case "RungChanged": {
                  const f = factsOf(event)
                  if (f) {
                    if (event.to === 1) f.keyPoints = { text: event.text, tokens: event.tokens }
                    else f.summary = { text: event.text, tokens: event.tokens }
                  }
                  break
                }
                case "EntriesReferenced":
                  for (const id of event.entryIds) {
                    const f = facts.get(`${event.agentId}/${id}`)
                    if (f) f.citations++
                  }
                  break
                case "EntryForgotten":
                  facts.delete(`${event.agentId}/${event.entryId}`)
                  enqueue({ seq: record.seq, remove: { agentId: event.agentId, entryId: event.entryId } })
                  return
                case "AgentForgotten":
                  for (const key of facts.keys()) if (key.startsWith(`${event.agentId}/`)) facts.delete(key)
                  enqueue({ seq: record.seq, removeAgent: event.agentId })
                  return
                case "EntryDemoted": {
                  const payload = payloadOf(event)
                  if (payload === null) {
                    runSync(
                      Effect.logError(
                        `[longterm] ${event.agentId}/${event.entryId} at seq ${record.seq}: a v1 demotion of an entry recorded before this projection's checkpoint; rebuild the store from the log`,
                      ),
                    )
                    break
                  }
                  // A demotion that carries the entry's facts (every one written since v2) ends the need for
                  // them: a promoted cue's next demotion carries them again. Kept, they would grow with the
                  // agent's whole history. A v1 log keeps them, as a re-demotion there reads them.
                  if (event.entry !== null) facts.delete(`${event.agentId}/${event.entryId}`)
                  enqueue({
                    seq: record.seq,
                    subject: record.subject,
                    upsert: { payload, vector: decodeVector(event.embedding.vector) },
                  })
                  return
                }
              }
              enqueue({ seq: record.seq, checkpointOnly: true })
            },
            // A record no one can read still moves the store's position past it: otherwise every wait for
            // a later sequence, the warm-up's included, would wait for it for ever.
            onDeadLetter: (letter) => enqueue({ seq: letter.seq, checkpointOnly: true }),
          }).pipe(Scope.provide(scope))

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
                if (upserts.length > 1)
                  return Effect.forEach(upserts, (op) => upsertOrDeadLetter([op]), { discard: true })
                const [op] = upserts as [Extract<Op, { upsert: LongTermRecord }>]
                const letter = {
                  projection: projectionName,
                  seq: op.seq,
                  subject: op.subject,
                  reason: `the store refused the record: ${error.reason}`,
                  payload: JSON.stringify(op.upsert.payload),
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
          const moveCheckpoint = Effect.gen(function* () {
            const seq = stored.current()
            if (own !== undefined) yield* commit(own, [], seq)
            else if (checkpoints)
              yield* Effect.promise(() => checkpoints.put(keyOf(partition), String(seq)).catch(() => 0))
            checkpointBehind = false
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
          yield* Effect.forkIn(writer, scope)
          // A partition released or stopped keeps the position it reached (the writer is idle by then or gone).
          yield* Scope.addFinalizer(
            scope,
            Effect.suspend(() => (checkpointBehind ? moveCheckpoint : Effect.void)).pipe(
              Effect.timeout("2 seconds"),
              Effect.ignore,
            ),
          )
          // The stored gate is never closed, so a wait without a timeout cannot fail.
          const storedTo = (seq: number) => stored.awaitSeq(seq).pipe(Effect.orDie)

          const longTermPartition: LongTermPartition = {
            partition,
            resumedFrom: checkpoint,
            storedSeq: stored.current,
            backlog: () => enqueued - storedOps + deliveryPending,
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
            trackedEntries: () => facts.size,
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
