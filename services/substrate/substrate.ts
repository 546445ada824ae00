/**
 * The substrate: the raw text and metadata of every entry ever recorded,
 * durable in a KV bucket (`wm_substrate`, key `<agentId>.<entryId>`), so any
 * entry — working, faded or long since demoted — can be read back by id.
 *
 * It projects EntryRecorded events from its checkpoint: writes are pipelined,
 * and the checkpoint moves only past sequences whose writes are stored, so a
 * restart resumes without losing or re-deriving anything.
 *
 * Each key is written once (a create, never a second revision): a newer
 * revision would only drop the older one from the bucket's index and leave
 * its bytes in the stream's files, where no erasure could reach them. On a
 * tombstone every revision of the forgotten keys is erased in place, retried
 * until it succeeds; the checkpoint moving past the tombstone is the
 * substrate's confirmation that it holds nothing of the forgotten content.
 */
import type { KV } from "@nats-io/kv"
import { Context, Effect, FiberSet, Layer, Schedule } from "effect"
import type { RequestOf } from "../../contracts/api.ts"
import { CHECKPOINT_BUCKET, checkpointKey, SUBSTRATE_BUCKET, substrateKey } from "../../contracts/buckets.ts"
import { NotCaughtUp, UnknownEntries } from "../../contracts/errors.ts"
import type { Tombstone } from "../../domain/forget.ts"
import { serveOperation } from "../platform/api/serve.ts"
import { eraseMessages, storedRecords } from "../platform/log/erase.ts"
import { READ_WAIT, runProjection } from "../platform/log/projection.ts"
import { makeSequenceGate } from "../platform/log/sequence-gate.ts"
import { openBucket } from "../platform/nats/buckets.ts"
import { Nats, type NatsShape } from "../platform/nats/connection.ts"
import { readSubstrate, type SubstrateRecord } from "../platform/substrate-reader.ts"

export interface SubstrateShape {
  readonly get: (agentId: string, entryId: string) => Effect.Effect<SubstrateRecord | null>
  readonly appliedSeq: () => number
  /** Waits until every write up to `seq` is stored. */
  readonly flushedTo: (seq: number) => Effect.Effect<void>
}

const textEncoder = new TextEncoder()
const SUBSTRATE_STREAM = `KV_${SUBSTRATE_BUCKET}`

/** Writes a record once; a record already stored (a replay after a restart) is left as it is. */
const storeOnce = async (kv: KV, key: string, value: Uint8Array) => {
  try {
    await kv.create(key, value)
  } catch (error) {
    const existing = await kv.get(key)
    if (existing?.operation !== "PUT") throw error
  }
}

/** Erases, in place, every stored revision of the keys a tombstone covers. */
const eraseForgotten = (nats: NatsShape, tombstone: Tombstone) =>
  Effect.tryPromise(async () => {
    const filter =
      tombstone._tag === "EntryForgotten"
        ? `$KV.${SUBSTRATE_BUCKET}.${substrateKey(tombstone.agentId, tombstone.entryId)}`
        : `$KV.${SUBSTRATE_BUCKET}.${tombstone.agentId}.>`
    const records = await storedRecords(nats.nc, SUBSTRATE_STREAM, filter)
    return eraseMessages(
      nats.jsm,
      SUBSTRATE_STREAM,
      records.map((r) => r.seq),
    )
  }).pipe(
    Effect.tapError((error) => Effect.logError(`[substrate] erasing ${tombstone.agentId} failed; retrying`, error)),
    Effect.retry(Schedule.min([Schedule.exponential("100 millis", 2), Schedule.spaced("10 seconds")])),
  )

export class Substrate extends Context.Service<Substrate, SubstrateShape>()("wm/Substrate") {
  static readonly layer = Layer.effect(
    Substrate,
    Effect.gen(function* () {
      const nats = yield* Nats
      // Writes finish in promise callbacks: what they log goes through this service's logger.
      const runSync = Effect.runSyncWith(yield* Effect.context<never>())
      // Erasures run until they succeed, and stop with the service.
      const runErasure = yield* FiberSet.makeRuntimePromise()
      const kv = yield* openBucket(SUBSTRATE_BUCKET)
      const checkpoints = yield* openBucket(CHECKPOINT_BUCKET)
      const key = checkpointKey("substrate")
      const stored = yield* Effect.promise(() => checkpoints.get(key))
      const fromSeq = stored ? Number(stored.string()) + 1 : 1

      // Writes in flight, in sequence order; the checkpoint trails the oldest unfinished one.
      const inflight = new Map<number, Promise<unknown>>()
      const flushed = makeSequenceGate(fromSeq - 1)
      let seen = fromSeq - 1
      const advance = () => {
        const oldest = inflight.size > 0 ? Math.min(...inflight.keys()) - 1 : seen
        if (oldest > flushed.current()) {
          void checkpoints.put(key, String(oldest)).catch(() => undefined)
          flushed.advanceTo(oldest)
        }
      }

      const projection = yield* runProjection({
        name: "substrate",
        fromSeq,
        apply: (event, record) => {
          seen = record.seq
          if (event._tag === "EntryRecorded") {
            const value: SubstrateRecord = {
              agentId: event.agentId,
              entryId: event.entryId,
              timestamp: event.timestamp,
              origin: event.origin,
              content: event.content,
              tags: event.tags,
              correlationId: event.correlationId,
              moodSnapshot: event.moodSnapshot,
              emotionalWeight: event.emotionalWeight,
              tokens: event.tokens,
              seq: record.seq,
            }
            const write = storeOnce(
              kv,
              substrateKey(event.agentId, event.entryId),
              textEncoder.encode(JSON.stringify(value)),
            )
            inflight.set(record.seq, write)
            write
              .catch((error: unknown) =>
                runSync(Effect.logError(`[substrate] write of ${event.entryId} failed`, error)),
              )
              .finally(() => {
                inflight.delete(record.seq)
                advance()
              })
          } else if (event._tag === "EntryForgotten" || event._tag === "AgentForgotten") {
            // Forgetting erases the keys and their history, after any write still on its way.
            const earlier = Promise.allSettled([...inflight.values()])
            const erasure = earlier.then(() => runErasure(eraseForgotten(nats, event)))
            inflight.set(record.seq, erasure)
            // Only a finished erasure releases the checkpoint: an interrupted one is redone after a restart.
            erasure.then(
              () => {
                inflight.delete(record.seq)
                advance()
              },
              (error: unknown) =>
                runSync(Effect.logError(`[substrate] forgetting at ${record.seq} did not finish`, error)),
            )
          } else if (inflight.size === 0) advance()
        },
      })
      yield* projection.warmedUp

      // The flushed gate is never closed, so a wait without a timeout cannot fail.
      const flushedTo = (seq: number) => flushed.awaitSeq(seq).pipe(Effect.orDie)

      // A read after `afterSeq` sees every entry recorded up to it, or is told it cannot yet (not "unknown entry").
      const caughtUpTo = (afterSeq: number) =>
        projection.waitFor(afterSeq).pipe(
          Effect.andThen(flushedTo(afterSeq)),
          Effect.timeoutOrElse({
            duration: READ_WAIT,
            orElse: () =>
              Effect.fail(
                new NotCaughtUp({ afterSeq, appliedSeq: Math.min(flushed.current(), projection.appliedSeq()) }),
              ),
          }),
        )

      const getRaw = Effect.fn("Substrate.getRaw")((agentId: string, request: RequestOf<"getRaw">) =>
        Effect.andThen(
          request.afterSeq !== undefined ? caughtUpTo(request.afterSeq) : Effect.void,
          readSubstrate(kv, agentId, request.entryId),
        ).pipe(
          Effect.flatMap((record) =>
            record ? Effect.succeed(record) : Effect.fail(new UnknownEntries({ entryIds: [request.entryId] })),
          ),
        ),
      )

      yield* serveOperation("getRaw", getRaw)

      return {
        get: (agentId, entryId) => readSubstrate(kv, agentId, entryId),
        appliedSeq: projection.appliedSeq,
        flushedTo,
      }
    }),
  )
}
