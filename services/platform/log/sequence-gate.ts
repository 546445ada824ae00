/**
 * How far a projection (or a writer behind it) has got in the log, and a
 * way to wait until it gets to a sequence: readers wait to see their own
 * writes. `advanceTo` is synchronous, so a projection's `apply` can move it
 * as it goes; each waited-for sequence is one Deferred, completed when the
 * position reaches it. A gate closed (the projection stopped for good)
 * refuses every waiter, now and later.
 */
import { Deferred, type Duration, Effect } from "effect"
import { NotCaughtUp } from "../../../contracts/errors.ts"

export interface SequenceGate {
  /** The last sequence reached. */
  readonly current: () => number
  /** Moves the position forward to `seq` (never back) and releases whoever waited for it. */
  readonly advanceTo: (seq: number) => void
  /** Refuses every waiter from now on: the position will not move again. */
  readonly close: () => void
  /**
   * Waits until `seq` is reached; with a timeout, fails with NotCaughtUp
   * when it is not reached in time. A closed gate fails at once.
   */
  readonly awaitSeq: (seq: number, timeout?: Duration.Input) => Effect.Effect<void, NotCaughtUp>
}

export const makeSequenceGate = (start: number): SequenceGate => {
  let position = start
  let closed = false
  const pending = new Map<number, Deferred.Deferred<void, NotCaughtUp>>()
  const notCaughtUp = (seq: number) => new NotCaughtUp({ afterSeq: seq, appliedSeq: position })

  const advanceTo = (seq: number) => {
    if (seq <= position) return
    position = seq
    for (const [waited, deferred] of pending) {
      if (waited > position) continue
      pending.delete(waited)
      Deferred.doneUnsafe(deferred, Effect.void)
    }
  }

  const close = () => {
    closed = true
    for (const [waited, deferred] of pending) Deferred.doneUnsafe(deferred, Effect.fail(notCaughtUp(waited)))
    pending.clear()
  }

  const deferredFor = (seq: number) => {
    let deferred = pending.get(seq)
    if (deferred === undefined) {
      deferred = Deferred.makeUnsafe<void, NotCaughtUp>()
      pending.set(seq, deferred)
    }
    return deferred
  }

  const awaitSeq = (seq: number, timeout?: Duration.Input): Effect.Effect<void, NotCaughtUp> =>
    Effect.suspend(() => {
      if (seq <= position) return Effect.void
      if (closed) return Effect.fail(notCaughtUp(seq))
      const reached = Deferred.await(deferredFor(seq))
      return timeout === undefined
        ? reached
        : reached.pipe(Effect.timeoutOrElse({ duration: timeout, orElse: () => Effect.fail(notCaughtUp(seq)) }))
    })

  return { current: () => position, advanceTo, close, awaitSeq }
}
