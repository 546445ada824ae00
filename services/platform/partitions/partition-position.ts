/**
 * Where a projection that follows one partition (`wm.evt.<p>.>`) stands
 * against the whole log. It sees only its partition's records, so "applied
 * up to stream sequence N" is proven either by a record at or past N, or,
 * once the stream has stored N, by its consumer: the server has delivered
 * every record of the partition it holds (none pending), and the projection
 * has received and applied every one delivered.
 *
 * The consumer is asked, not the partition's last stored record: finding
 * the last record of a wildcard filter costs the server milliseconds in a
 * long log of many subjects, a consumer's position a lookup.
 */
import { Clock, Duration, Effect } from "effect"
import { NotCaughtUp } from "../../../contracts/errors.ts"
import { EVENTS_STREAM, partitionEvents } from "../../../contracts/subjects.ts"
import { EventLog } from "../log/event-log.ts"
import type { FollowingProjection } from "../log/projection.ts"
import { Nats } from "../nats/connection.ts"

/** The last stored sequence of the partition's subjects (0: none): once, when a partition is taken. */
export const lastSeqOfPartition = (partition: number) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    const last = yield* Effect.tryPromise(() =>
      jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: partitionEvents(partition) }),
    )
    return last?.seq ?? 0
  })

/**
 * Whether the projection has applied every record its filter held when its consumer was asked, which is
 * after `streamLast` was read: then it is complete up to `streamLast`. False when the consumer cannot say.
 */
export const appliedAllStored = (projection: FollowingProjection) =>
  projection.position.pipe(
    Effect.map(({ received, pending }) => pending === 0 && projection.appliedSeq() >= received),
    Effect.orElseSucceed(() => false),
  )

/** How long to wait before asking a consumer that could not answer again. */
const RETRY_POSITION = "20 millis"

/**
 * Waits until the partition's projection has applied every record of the partition up to stream sequence
 * `seq`, and answers a sequence at or past `seq` up to which the partition is proven complete.
 */
export const awaitPartitionApplied = (
  projection: FollowingProjection,
  seq: number,
  timeout: Duration.Input,
): Effect.Effect<number, NotCaughtUp, EventLog> =>
  Effect.gen(function* () {
    if (projection.appliedSeq() >= seq) return projection.appliedSeq()
    const notCaughtUp = () => new NotCaughtUp({ afterSeq: seq, appliedSeq: projection.appliedSeq() })
    if (projection.halted() !== null) return yield* Effect.fail(notCaughtUp())
    const log = yield* EventLog
    // The consumer's position proves something about `seq` only once the stream has stored it, and only
    // when asked after that was seen.
    const streamLast = yield* log.lastSeq.pipe(Effect.orElseSucceed(() => 0))
    if (streamLast < seq) {
      yield* projection.waitFor(seq, timeout)
      return seq
    }
    const deadline = (yield* Clock.currentTimeMillis) + toMillis(timeout)
    while (projection.appliedSeq() < seq) {
      const left = deadline - (yield* Clock.currentTimeMillis)
      if (left <= 0 || projection.halted() !== null) return yield* Effect.fail(notCaughtUp())
      const position = yield* projection.position.pipe(Effect.option)
      if (position._tag === "None") {
        yield* Effect.sleep(RETRY_POSITION)
        continue
      }
      const { received, pending } = position.value
      // A record at or past `seq` was received: applying it applies everything before it.
      if (received >= seq) yield* projection.waitFor(seq, left)
      else if (pending === 0) {
        yield* projection.waitFor(received, left)
        return streamLast
      }
      // More of the partition was stored after the last one delivered: wait for the next, then ask again.
      else yield* projection.waitFor(received + 1, left)
    }
    return projection.appliedSeq()
  })

const toMillis = (duration: Duration.Input) => Duration.toMillis(Duration.fromInputUnsafe(duration))
