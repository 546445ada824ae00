/**
 * The long-term projection: every entry that demotes out of working becomes
 * a record in the long-term store — its embedding (computed once, carried by
 * the EntryDemoted event), the lexical terms of its raw text, and a payload
 * with its origin, tags, correlation id, mood, emotional weight, timestamps
 * and the best summary working had.
 *
 * Writes are applied in log order by one writer. A durable store resumes
 * from its checkpoint: the durable embedded store keeps it itself, written
 * in the same transaction as the records; for Qdrant it is in the
 * checkpoint bucket, moved once the records before it are stored. The
 * in-memory embedded store is rebuilt from the log.
 *
 * Resuming needs nothing from before the checkpoint: an EntryDemoted (v2)
 * carries everything its record holds. Only a v1 demotion (written before
 * v2) takes its facts from the entry's earlier events, which a rebuild
 * from the start of the log has seen.
 */
import { Context, Effect, Layer, Queue, Schedule } from "effect"
import { CHECKPOINT_BUCKET, checkpointKey } from "../../../contracts/buckets.ts"
import type { RepresentationKind } from "../../../contracts/entry.ts"
import type { DemotedEntry, EventOf, MemoryEvent } from "../../../contracts/events.ts"
import type { LongTermPayload } from "../../../contracts/longterm.ts"
import { EVENTS_STREAM } from "../../../contracts/subjects.ts"
import { decodeVector } from "../../platform/embedding/embedder.ts"
import { type Projection, runProjection } from "../../platform/log/projection.ts"
import { makeSequenceGate } from "../../platform/log/sequence-gate.ts"
import { openBucket } from "../../platform/nats/buckets.ts"
import { Nats } from "../../platform/nats/connection.ts"
import { type CheckpointedStore, type LongTermRecord, LongTermStore, type StoreWrite } from "./store.ts"

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
  | { readonly upsert: LongTermRecord }
  | { readonly remove: { readonly agentId: string; readonly entryId: string } }
  | { readonly removeAgent: string }
  | { readonly checkpointOnly: true }
)

/** 20 ms, doubling, then every second, for as long as it takes. */
const RETRY_UNTIL_STORED = Schedule.min([Schedule.exponential("20 millis"), Schedule.spaced("1 second")])

export interface LongTermShape {
  /** Sequence up to which every record is in the store. */
  readonly storedSeq: () => number
  readonly waitFor: (seq: number) => Effect.Effect<void>
  readonly projection: Projection
  /** Entries whose facts the projection keeps for their demotion: recorded, not yet demoted or forgotten. */
  readonly trackedEntries: () => number
}

export class LongTerm extends Context.Service<LongTerm, LongTermShape>()("wm/LongTerm") {
  static readonly layer = (options: { readonly durable: boolean }) =>
    Layer.effect(
      LongTerm,
      Effect.gen(function* () {
        const store = yield* LongTermStore
        // Projected events arrive in callbacks: what they log goes through this service's logger.
        const runSync = Effect.runSyncWith(yield* Effect.context<never>())
        const { jsm } = yield* Nats
        const own = store.checkpointed
        // The log the checkpoint belongs to: the event stream, by its creation time.
        const stream = own ? yield* Effect.promise(() => jsm.streams.info(EVENTS_STREAM)) : null
        const logId = stream ? `${EVENTS_STREAM}@${stream.created}` : ""
        const checkpoints = !own && options.durable ? yield* openBucket(CHECKPOINT_BUCKET) : null
        const key = checkpointKey(`longterm-${store.name}`)
        const fromSeq = own
          ? (yield* own.resume(logId, stream!.state.last_seq).pipe(Effect.orDie)) + 1
          : checkpoints
            ? yield* Effect.map(
                Effect.promise(() => checkpoints.get(key)),
                (stored) => (stored ? Number(stored.string()) + 1 : 1),
              )
            : 1

        const facts = new Map<string, EntryFacts>()
        // What the projection asks of the store, in log order, for the single writer.
        const ops = yield* Queue.unbounded<Op>()
        const stored = makeSequenceGate(fromSeq - 1)

        const best = (f: DemotedEntry): { text: string; tokens: number; form: RepresentationKind } =>
          f.summary
            ? { ...f.summary, form: "summary" }
            : f.keyPoints
              ? { ...f.keyPoints, form: "keyPoints" }
              : { text: "", tokens: 0, form: "summary" }

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

        const enqueue = (op: Op) => {
          Queue.offerUnsafe(ops, op)
        }

        const projection = yield* runProjection({
          name: `longterm-${store.name}`,
          fromSeq,
          apply: (event, record) => {
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
                enqueue({ seq: record.seq, upsert: { payload, vector: decodeVector(event.embedding.vector) } })
                return
              }
            }
            enqueue({ seq: record.seq, checkpointOnly: true })
          },
          // A record no one can read still moves the store's position past it: otherwise every wait for
          // a later sequence, the warm-up's included, would wait for it for ever.
          onDeadLetter: (letter) => enqueue({ seq: letter.seq, checkpointOnly: true }),
        })

        const failed = (what: string) => (error: unknown) => Effect.logError(`[longterm] ${what} failed`, error)
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
        // A store that keeps its own checkpoint takes each batch and the checkpoint in one transaction.
        const commit = (own: CheckpointedStore, writes: ReadonlyArray<StoreWrite>, seq: number) =>
          own.commit(writes, logId, seq).pipe(untilStored(`commit through seq ${seq}`))
        // Otherwise: upserts and removals, then the checkpoint in the KV bucket (a durable store) when idle.
        const write = (batch: ReadonlyArray<Op>) =>
          Effect.gen(function* () {
            const upserts = batch.flatMap((op) => ("upsert" in op ? [op.upsert] : []))
            if (upserts.length > 0) yield* store.upsert(upserts).pipe(untilStored("upsert"))
            const first = batch[0]!
            if ("remove" in first) {
              yield* store.remove(first.remove.agentId, [first.remove.entryId]).pipe(untilStored("remove"))
            } else if ("removeAgent" in first) {
              yield* Effect.flatMap(store.list({ agentId: first.removeAgent }), (records) =>
                store.remove(
                  first.removeAgent,
                  records.map((r) => r.entryId),
                ),
              ).pipe(untilStored("remove of an agent"))
            }
          })

        // The single writer: batches consecutive upserts, keeps log order, then moves the checkpoint.
        const writer = Effect.gen(function* () {
          let checkpointBehind = false
          // Taken from the queue, not yet written.
          const queue: Op[] = []
          while (true) {
            queue.push(...(yield* Queue.clear(ops)))
            if (queue.length === 0) {
              if (checkpointBehind) {
                const seq = stored.current()
                if (own !== undefined) yield* commit(own, [], seq)
                else if (checkpoints) yield* Effect.promise(() => checkpoints.put(key, String(seq)).catch(() => 0))
                checkpointBehind = false
              }
              queue.push(...(yield* Queue.takeAll(ops)))
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
          }
        })
        yield* Effect.forkScoped(writer)
        yield* projection.warmedUp
        // The stored gate is never closed, so a wait without a timeout cannot fail.
        const storedTo = (seq: number) => stored.awaitSeq(seq).pipe(Effect.orDie)
        yield* Effect.flatMap(
          Effect.sync(() => projection.appliedSeq()),
          storedTo,
        )

        return {
          storedSeq: stored.current,
          waitFor: (seq) => Effect.andThen(projection.waitFor(seq).pipe(Effect.ignore), storedTo(seq)),
          projection,
          trackedEntries: () => facts.size,
        }
      }),
    )
}
