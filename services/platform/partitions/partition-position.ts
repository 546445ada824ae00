/**
 * Where a projection that follows one partition (`wm.evt.<p>.>`) stands
 * against the whole log. It sees only its partition's records, so "applied
 * up to stream sequence N" is proven either by a record at or past N, or by
 * the partition's last stored sequence (asked of the stream leader, after N
 * was stored) being one it has applied.
 */
import type { MsgRequest } from "@nats-io/jetstream"
import { type Duration, Effect } from "effect"
import { NotCaughtUp } from "../../../contracts/errors.ts"
import { EVENTS_STREAM, partitionEvents } from "../../../contracts/subjects.ts"
import { EventLog } from "../log/event-log.ts"
import type { Projection } from "../log/projection.ts"
import { Nats } from "../nats/connection.ts"

/** The stream's last sequence, and which stream it is (the server answering, the stream's creation). */
export const streamEnd = Effect.gen(function* () {
  const { nc, jsm } = yield* Nats
  const info = yield* Effect.tryPromise(() => jsm.streams.info(EVENTS_STREAM))
  return { last: info.state.last_seq, stream: `${nc.info?.server_id ?? ""}/${info.created}` }
})

/** The last stored sequence of the partition's subjects (0: none). */
export const lastSeqOfPartition = (partition: number) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    const last = yield* Effect.tryPromise(() =>
      jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: partitionEvents(partition) }),
    )
    return last?.seq ?? 0
  })

/**
 * The sequence of the partition's first record at or after `fromSeq` (null: none), asked of the stream leader.
 * From a recent sequence this looks only at the records since: finding the partition's last record instead
 * searches from the log's end, which costs the server milliseconds in a long log of many subjects.
 */
export const nextSeqOfPartition = (partition: number, fromSeq: number) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    // The server's message get takes `next_by_subj` with `seq` (nats-server 2.9+); the client's type omits it.
    const request = { seq: fromSeq, next_by_subj: partitionEvents(partition) } as unknown as MsgRequest
    const next = yield* Effect.tryPromise(() => jsm.streams.getMessage(EVENTS_STREAM, request))
    return next?.seq ?? null
  })

/** Waits until the partition's projection has applied every record of the partition up to stream sequence `seq`. */
export const awaitPartitionApplied = (
  partition: number,
  projection: Projection,
  seq: number,
  timeout: Duration.Input,
): Effect.Effect<void, NotCaughtUp, EventLog | Nats> =>
  Effect.gen(function* () {
    if (projection.appliedSeq() >= seq) return
    if (projection.halted() !== null)
      return yield* Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: projection.appliedSeq() }))
    const log = yield* EventLog
    // The partition's last sequence proves something about `seq` only once the stream has reached it,
    // and only when read after that was seen.
    const streamLast = yield* log.lastSeq.pipe(Effect.orElseSucceed(() => 0))
    if (streamLast < seq) return yield* projection.waitFor(seq, timeout)
    const last = yield* lastSeqOfPartition(partition).pipe(Effect.orElseSucceed(() => seq))
    const target = Math.min(seq, last)
    if (projection.appliedSeq() < target) yield* projection.waitFor(target, timeout)
  })
