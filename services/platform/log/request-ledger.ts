/**
 * The request ledger, in the `wm_requests` KV bucket: one record per agent
 * registration, operation and request id (domain/requests.ts). A request is
 * reserved before it is decided (create: exactly one attempt of a request id
 * wins the reservation), and settled with its answer once its event is
 * stored, before the reply leaves; so every acknowledged write has its
 * answer here, at any age.
 */
import { Effect, Schedule } from "effect"
import { REQUEST_BUCKET } from "../../../contracts/buckets.ts"
import { decodeEvent } from "../../../contracts/decode.ts"
import { Unavailable } from "../../../contracts/errors.ts"
import type { MemoryEvent } from "../../../contracts/events.ts"
import { EVENTS_STREAM } from "../../../contracts/subjects.ts"
import type { LedgerRecord, PendingRequest, SettledRequest } from "../../../domain/requests.ts"
import { ContentKeys } from "../keys/content-keys.ts"
import { openBucket } from "../nats/buckets.ts"
import { Nats } from "../nats/connection.ts"

export type Reservation =
  | { readonly _tag: "Reserved"; readonly revision: number }
  | { readonly _tag: "Settled"; readonly record: SettledRequest }
  | { readonly _tag: "Pending"; readonly record: PendingRequest; readonly revision: number }

export interface RequestLedger {
  /** Reserves the key for a new request, or returns what an earlier attempt left there. */
  readonly reserve: (key: string, pending: PendingRequest) => Effect.Effect<Reservation, Unavailable>
  /** Takes over the reservation of an attempt that died (compare-and-set on its revision). */
  readonly takeOver: (key: string, pending: PendingRequest, revision: number) => Effect.Effect<number, Unavailable>
  /** Records the answer. */
  readonly settle: (key: string, record: SettledRequest) => Effect.Effect<void, Unavailable>
  /** The answer recorded under the key, if any. */
  readonly settled: (key: string) => Effect.Effect<SettledRequest | null, Unavailable>
  /** Frees the reservation of a request that was refused: nothing was written, a retry decides again. */
  readonly release: (key: string) => Effect.Effect<void>
  /** Looks for a stored event by id on `subject` after `afterSeq` (an attempt that stored its event, then died). */
  readonly findEvent: (
    subject: string,
    afterSeq: number,
    eventId: string,
  ) => Effect.Effect<{ readonly event: MemoryEvent; readonly seq: number } | null, Unavailable>
}

const textEncoder = new TextEncoder()
const encode = (record: LedgerRecord) => textEncoder.encode(JSON.stringify(record))
const unavailable = (what: string) => (error: unknown) =>
  new Unavailable({ reason: `request ledger: ${what}: ${error instanceof Error ? error.message : String(error)}` })
const retrying = Schedule.spaced("200 millis").pipe(Schedule.upTo({ duration: "10 seconds" }))
/** How far a lost attempt's event is looked for. */
const MAX_SCAN = 10_000

export const openRequestLedger = Effect.gen(function* () {
  const kv = yield* openBucket(REQUEST_BUCKET)
  const { jsm } = yield* Nats
  const keys = yield* ContentKeys

  const current = (key: string) =>
    Effect.tryPromise({ try: () => kv.get(key), catch: unavailable("read") }).pipe(
      Effect.map((entry) =>
        entry === null || entry.operation !== "PUT"
          ? null
          : { record: entry.json<LedgerRecord>(), revision: entry.revision },
      ),
    )

  const reserve = (key: string, pending: PendingRequest): Effect.Effect<Reservation, Unavailable> =>
    Effect.tryPromise({ try: () => kv.create(key, encode(pending)), catch: (error) => error }).pipe(
      Effect.map((revision): Reservation => ({ _tag: "Reserved", revision })),
      Effect.catch((createError) =>
        Effect.flatMap(current(key), (found): Effect.Effect<Reservation, Unavailable> => {
          if (found === null) return Effect.fail(unavailable("reserve")(createError))
          return Effect.succeed(
            found.record.state === "done"
              ? { _tag: "Settled", record: found.record }
              : { _tag: "Pending", record: found.record, revision: found.revision },
          )
        }),
      ),
      Effect.retry({ schedule: retrying, while: (e) => e._tag === "Unavailable" }),
    )

  const takeOver = (key: string, pending: PendingRequest, revision: number) =>
    Effect.tryPromise({ try: () => kv.update(key, encode(pending), revision), catch: unavailable("take over") })

  const settle = (key: string, record: SettledRequest) =>
    Effect.tryPromise({ try: () => kv.put(key, encode(record)), catch: unavailable("settle") }).pipe(
      Effect.retry({ schedule: retrying }),
      Effect.asVoid,
    )

  const release = (key: string) =>
    Effect.tryPromise({ try: () => kv.delete(key), catch: unavailable("release") }).pipe(
      Effect.retry({ schedule: retrying }),
      Effect.catch((error) => Effect.logError(`[ledger] ${error.reason}`)),
    )

  const findEvent = (subject: string, afterSeq: number, eventId: string) =>
    Effect.tryPromise({
      try: async () => {
        let seq = afterSeq + 1
        for (let scanned = 0; scanned < MAX_SCAN; scanned++) {
          const stored = await jsm.direct.getMessage(EVENTS_STREAM, { next_by_subj: subject, seq })
          if (stored === null) return null
          await keys.load(stored.data, stored.subject)
          const decoded = decodeEvent(stored.data, keys.unseal)
          if (decoded.ok && decoded.event.eventId === eventId) return { event: decoded.event, seq: stored.seq }
          seq = stored.seq + 1
        }
        return null
      },
      catch: (error) =>
        // "no message found" is how direct get says the subject has nothing further.
        error instanceof Error && /no message found/i.test(error.message) ? null : unavailable("look up")(error),
    }).pipe(Effect.catch((e) => (e === null ? Effect.succeed(null) : Effect.fail(e as Unavailable))))

  const settled = (key: string) =>
    Effect.map(current(key), (found) => (found !== null && found.record.state === "done" ? found.record : null))

  return { reserve, takeOver, settle, settled, release, findEvent } satisfies RequestLedger
})
