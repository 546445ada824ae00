/**
 * Taking and giving up partitions, as the leases (leases.ts) tell: a partition taken gets its state and a
 * fiber catching it up, from the snapshot read for it while the replica settled if there is one; a
 * partition lost stops its projection and drops what it held. A line of a partition's snapshot that does
 * not decode makes the partition drop its views and that snapshot and be taken again, from the log.
 */
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import type { EventLog } from "../log/event-log.ts"
import type { Nats } from "../nats/connection.ts"
import type { PartitionHooks } from "./partition-hooks.ts"
import { newPartitionState, type PartitionState, type PartitionStates, type Prefetch } from "./partition-state.ts"
import type { ReadSnapshot, SnapshotStore } from "./snapshots.ts"

/** Forks an effect in the service's fiber set. */
export type RunFork = <XE, XA>(effect: Effect.Effect<XA, XE, EventLog | Nats>) => Fiber.Fiber<XA, XE>

export const makeTakenPartitions = (deps: {
  readonly service: string
  readonly hooks: PartitionHooks
  /** Shared with every part of the partitioned views; this is what adds and removes partitions. */
  readonly states: PartitionStates
  /** Tells the watchers of the partitions taken. */
  readonly takenChanged: () => void
  readonly runFork: RunFork
  readonly snapshots: SnapshotStore
  readonly now: () => number
  readonly catchUp: (
    state: PartitionState,
    prefetch: Prefetch | undefined,
    fromLog: boolean,
  ) => Effect.Effect<void, never, EventLog | Nats>
  /** The lease of the partition is still held (a lapsed lease is renewed, never taken again). */
  readonly stillHeld: (partition: number) => boolean
}) => {
  const { service, hooks, states, takenChanged, runFork, snapshots } = deps

  /** Stops the partition's projection and drops what it held. */
  const release = (state: PartitionState) =>
    Effect.gen(function* () {
      state.ready = false
      if (states.get(state.partition) === state) states.delete(state.partition)
      takenChanged()
      hooks.lost?.(state.partition, [...state.views.keys()])
      if (state.fiber !== null) yield* Fiber.interrupt(state.fiber)
      yield* Scope.close(state.scope, Exit.void)
    })

  /**
   * A line of the partition's snapshot did not decode: the partition stops answering, drops its views
   * and that snapshot (which a forget applied since may also have to erase), and is rebuilt from the log.
   */
  const undecodable = (state: PartitionState) => (agentId: string, reason: string) => {
    if (state.rebuilding || states.get(state.partition) !== state) return
    state.rebuilding = true
    state.ready = false
    const partition = state.partition
    runFork(
      Effect.gen(function* () {
        yield* Effect.logError(
          `[${service}] snapshot of partition ${partition} ignored (the view of ${agentId} does not decode: ${reason}): rebuilding from the log`,
        )
        yield* release(state)
        yield* snapshots.drop(partition).pipe(Effect.catch((error) => Effect.logError(`[${service}] ${error.message}`)))
        if (deps.stillHeld(partition)) acquired(partition, true)
      }),
    )
  }

  /** Snapshots read while this replica settles, for the partitions it expects to take. */
  const prefetches = new Map<number, Prefetch>()

  const acquired = (partition: number, fromLog = false) => {
    if (states.has(partition)) return
    const scope = Scope.makeUnsafe()
    const prefetch = prefetches.get(partition)
    prefetches.delete(partition)
    const state = newPartitionState(partition, scope, deps.now(), undecodable)
    states.set(partition, state)
    takenChanged()
    state.fiber = runFork(deps.catchUp(state, prefetch, fromLog))
  }

  const lost = (partition: number) => {
    const state = states.get(partition)
    if (state !== undefined) runFork(release(state))
  }

  /** Reads the snapshots of the partitions this replica expects to take, while it settles. */
  const settling = (expected: ReadonlyArray<number>) =>
    Effect.gen(function* () {
      const reads = expected.map((p) => {
        const read = Deferred.makeUnsafe<ReadSnapshot | null>()
        prefetches.set(p, read)
        return [p, read] as const
      })
      yield* Effect.forEach(
        reads,
        ([p, read]) => Effect.flatMap(snapshots.prefetch(p), (snapshot) => Deferred.succeed(read, snapshot)),
        { concurrency: 4, discard: true },
      ).pipe(
        // Whatever stopped the reads, a partition taken meanwhile waits for none of them: it loads its own.
        Effect.ensuring(Effect.forEach(reads, ([, read]) => Deferred.succeed(read, null), { discard: true })),
      )
    })

  return {
    acquired: (partition: number) => acquired(partition),
    lost,
    settling,
    weight: (partition: number) => states.get(partition)?.views.size ?? 0,
    /** Drops the snapshots read for partitions another replica took. */
    forgetPrefetches: () => prefetches.clear(),
  }
}
