/**
 * The progress reports (progress.ts) of the partitions this replica answers for: where the service's work
 * on each has got and how many of its records that work is behind, the projection's position and what the
 * log still holds for it, and what the service has left behind the projection (`hooks.behind`). A change is
 * sent within REPORT_PERIOD_MS, except a position that moved while nothing is behind (it moves with every
 * record of any partition): that goes with the report sent at least every third of the lease TTL to keep it
 * live.
 */
import { Clock, Effect } from "effect"
import type { PartitionLeases } from "./leases.ts"
import type { PartitionHooks } from "./partition-hooks.ts"
import { appliedOf, type PartitionState, type PartitionStates } from "./partition-state.ts"
import { encodeProgress } from "./progress.ts"

/** How often a replica looks whether its progress on a partition changed, to report it. */
const REPORT_PERIOD_MS = 500

/** Forks, in the current scope, the fiber reporting the progress of the partitions that answer. */
export const reportProgress = (deps: {
  readonly hooks: PartitionHooks
  readonly states: PartitionStates
  readonly leases: PartitionLeases
  readonly answering: (partition: number) => PartitionState | undefined
  readonly leaseTtlMs: number
}) => {
  const { hooks, states, leases, answering } = deps
  const reportedAt = new Map<number, { seq: number; lag: number; at: number }>()
  const keepAliveMs = Math.max(REPORT_PERIOD_MS, Math.floor(deps.leaseTtlMs / 3))
  return Effect.forkScoped(
    Effect.forever(
      Effect.gen(function* () {
        yield* Effect.sleep(REPORT_PERIOD_MS)
        const now = yield* Clock.currentTimeMillis
        const reports: Promise<void>[] = []
        for (const partition of [...reportedAt.keys()])
          if (answering(partition) === undefined) reportedAt.delete(partition)
        for (const state of states.values()) {
          if (answering(state.partition) !== state || state.projection === null) continue
          const applied = appliedOf(state)
          const behind = hooks.behind?.(state.partition) ?? null
          const seq = Math.max(0, Math.min(applied, behind?.seq ?? applied))
          // Behind the projection, and still in the log for it.
          const lag = Math.max(0, behind?.records ?? 0) + state.pending
          const last = reportedAt.get(state.partition)
          // A position that moved with nothing behind it is news to no one until the report is kept live.
          const unchanged = last !== undefined && last.lag === lag && (lag === 0 || last.seq === seq)
          if (unchanged && now - last.at < keepAliveMs) continue
          reportedAt.set(state.partition, { seq, lag, at: now })
          reports.push(
            leases.report(state.partition, encodeProgress({ replica: leases.replicaId, seq, applied, lag, at: now })),
          )
        }
        if (reports.length > 0) yield* Effect.promise(() => Promise.all(reports))
      }),
    ),
  )
}
