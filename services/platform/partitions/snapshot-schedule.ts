/**
 * When a partition's snapshot (snapshots.ts) is written: every WM_SNAPSHOT_INTERVAL_MS once its projection
 * has moved past the last one, and of every partition at shutdown. Only the lease holder writes one, and
 * only of a caught-up view. A forget tombstone erases the partition's snapshot at once instead (so no
 * snapshot keeps what was forgotten), and the partition is snapshotted again only once a replica has
 * rebuilt it from the log.
 */
import { Clock, Effect } from "effect"
import type { MetricsShape } from "../observability/metrics.ts"
import type { PartitionHooks } from "./partition-hooks.ts"
import type { PartitionState, PartitionStates } from "./partition-state.ts"
import type { SnapshotAgent, SnapshotStore } from "./snapshots.ts"

export const makeSnapshotSchedule = (deps: {
  readonly service: string
  readonly hooks: PartitionHooks
  readonly states: PartitionStates
  readonly snapshots: SnapshotStore
  readonly holds: (partition: number) => boolean
  readonly snapshotIntervalMs: number
  readonly metrics: MetricsShape
  readonly clock: Clock.Clock
}) => {
  const { service, hooks, states, snapshots, metrics, clock } = deps

  const snapshot = (state: PartitionState) =>
    Effect.suspend(() => {
      const projection = state.projection
      if (!state.ready || projection === null || !deps.holds(state.partition)) return Effect.void
      if (state.forgotten) {
        state.forgotten = false
        state.tainted = true
        return snapshots.drop(state.partition).pipe(
          Effect.catch((error) =>
            Effect.andThen(
              Effect.sync(() => {
                state.forgotten = true
              }),
              Effect.logError(`[${service}] ${error.message}`),
            ),
          ),
        )
      }
      if (state.tainted) return Effect.void
      // Taken in one synchronous step, so views and kept state are both at `seq`.
      const seq = projection.appliedSeq()
      const kept = hooks.state
      const agents =
        kept === undefined
          ? state.views.snapshotAgents()
          : [...state.views.entries()].map(([id, view]): readonly [string, SnapshotAgent] => [
              id,
              { view, state: kept.take(id) },
            ])
      const forgotten = state.forgotten
      state.forgotten = false
      const began = performance.now()
      return snapshots.save(state.partition, seq, agents).pipe(
        Effect.tap((manifest) =>
          Effect.sync(() => {
            if (manifest === null) return
            metrics.snapshotDuration.observe({ service }, (performance.now() - began) / 1000)
            state.snapshotSeq = Math.max(state.snapshotSeq, seq)
            state.snapshotAt = clock.currentTimeMillisUnsafe()
            state.snapshotWrittenAt = manifest.at
            state.snapshotBytes = manifest.bytes
          }),
        ),
        Effect.catch((error) =>
          Effect.andThen(
            Effect.sync(() => {
              state.forgotten ||= forgotten
            }),
            Effect.logError(`[${service}] ${error.message}`),
          ),
        ),
      )
    })

  /** Snapshots every partition that answers now. */
  const snapshotAll = Effect.suspend(() =>
    Effect.forEach([...states.values()], snapshot, { concurrency: 4, discard: true }),
  )

  const due = (state: PartitionState, now: number) =>
    state.forgotten ||
    (deps.snapshotIntervalMs > 0 &&
      now - state.snapshotAt >= deps.snapshotIntervalMs &&
      (state.projection?.appliedSeq() ?? 0) > state.snapshotSeq)

  /** Forks, in the current scope, the fiber writing the snapshots that are due. */
  const start = Effect.forkScoped(
    Effect.forever(
      Effect.gen(function* () {
        yield* Effect.sleep("100 millis")
        const now = yield* Clock.currentTimeMillis
        yield* Effect.forEach(
          [...states.values()].filter((s) => due(s, now)),
          snapshot,
          { discard: true },
        )
      }),
    ),
  )

  return { snapshotAll, start }
}
