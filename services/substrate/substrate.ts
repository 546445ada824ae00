/**
 * The substrate: the raw text and metadata of every entry ever recorded,
 * durable in a KV bucket (`wm_substrate`, key `<agentId>.<entryId>`), so any
 * entry — working, faded or long since demoted — can be read back by id.
 *
 * It projects EntryRecorded events from its checkpoint: writes are pipelined,
 * and the checkpoint moves only past sequences whose writes are stored, so a
 * restart resumes without losing or re-deriving anything (a re-put of the
 * same record is harmless).
 */
import type { KV } from "@nats-io/kv"
import { Context, Effect, Layer } from "effect"
import type { ResponseOf } from "../../contracts/api.ts"
import { UnknownEntries } from "../../contracts/errors.ts"
import { serveOperation } from "../api/serve.ts"
import { runProjection } from "../log/projection.ts"
import { CHECKPOINT_BUCKET, checkpointKey, openBucket, SUBSTRATE_BUCKET } from "../nats/buckets.ts"

export type SubstrateRecord = ResponseOf<"getRaw">

export interface SubstrateShape {
  readonly get: (agentId: string, entryId: string) => Effect.Effect<SubstrateRecord | null>
  readonly appliedSeq: () => number
  /** Waits until every write up to `seq` is stored. */
  readonly flushedTo: (seq: number) => Effect.Effect<void>
}

const textEncoder = new TextEncoder()
const substrateKey = (agentId: string, entryId: string) => `${agentId}.${entryId}`

export const readSubstrate = (kv: KV, agentId: string, entryId: string) =>
  Effect.promise(async () => {
    const entry = await kv.get(substrateKey(agentId, entryId))
    return entry && entry.operation === "PUT" && entry.value.length > 0 ? (entry.json() as SubstrateRecord) : null
  })

export class Substrate extends Context.Service<Substrate, SubstrateShape>()("wm/Substrate") {
  static readonly layer = Layer.effect(
    Substrate,
    Effect.gen(function* () {
      const kv = yield* openBucket(SUBSTRATE_BUCKET)
      const checkpoints = yield* openBucket(CHECKPOINT_BUCKET)
      const key = checkpointKey("substrate")
      const stored = yield* Effect.promise(() => checkpoints.get(key))
      const fromSeq = stored ? Number(stored.string()) + 1 : 1

      // Writes in flight, in sequence order; the checkpoint trails the oldest unfinished one.
      const inflight = new Map<number, Promise<unknown>>()
      let flushed = fromSeq - 1
      let seen = fromSeq - 1
      const waiters: Array<{ seq: number; resolve: () => void }> = []
      const advance = () => {
        const oldest = inflight.size > 0 ? Math.min(...inflight.keys()) - 1 : seen
        if (oldest > flushed) {
          flushed = oldest
          void checkpoints.put(key, String(flushed)).catch(() => undefined)
          for (let i = waiters.length - 1; i >= 0; i--) if (waiters[i]!.seq <= flushed) waiters.splice(i, 1)[0]!.resolve()
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
            const write = kv.put(substrateKey(event.agentId, event.entryId), textEncoder.encode(JSON.stringify(value)))
            inflight.set(record.seq, write)
            write
              .catch((error: unknown) => console.error(`[substrate] write of ${event.entryId} failed`, error))
              .finally(() => {
                inflight.delete(record.seq)
                advance()
              })
          } else if (event._tag === "EntryForgotten" || event._tag === "AgentForgotten") {
            // Forgetting purges the key and its history, after any write still on its way.
            const earlier = Promise.allSettled([...inflight.values()])
            const purge = earlier.then(async () => {
              const keys =
                event._tag === "EntryForgotten"
                  ? [substrateKey(event.agentId, event.entryId)]
                  : await (async () => {
                      const found: string[] = []
                      for await (const k of await kv.keys(`${event.agentId}.>`)) found.push(k)
                      return found
                    })()
              for (const k of keys) await kv.purge(k)
            })
            inflight.set(record.seq, purge)
            purge
              .catch((error: unknown) => console.error(`[substrate] forgetting at ${record.seq} failed`, error))
              .finally(() => {
                inflight.delete(record.seq)
                advance()
              })
          } else if (inflight.size === 0) advance()
        },
      })
      yield* projection.warmedUp

      const flushedTo = (seq: number) =>
        seq <= flushed ? Effect.void : Effect.callback<void>((resume) => void waiters.push({ seq, resolve: () => resume(Effect.void) }))

      yield* serveOperation("getRaw", (agentId, request) =>
        Effect.andThen(
          request.afterSeq !== undefined ? projection.waitFor(request.afterSeq).pipe(Effect.andThen(flushedTo(request.afterSeq)), Effect.timeout("10 seconds"), Effect.ignore) : Effect.void,
          readSubstrate(kv, agentId, request.entryId),
        ).pipe(
          Effect.flatMap((record) => (record ? Effect.succeed(record) : Effect.fail(new UnknownEntries({ entryIds: [request.entryId] })))),
        ),
      )

      return { get: (agentId, entryId) => readSubstrate(kv, agentId, entryId), appliedSeq: projection.appliedSeq, flushedTo }
    }),
  )
}
