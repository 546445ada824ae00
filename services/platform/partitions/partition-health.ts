/**
 * What the partitions this replica holds tell the operator: each one's projection lag and the age and
 * size of its snapshot, as metrics, and readiness only once every partition it holds has caught up and
 * reads on (not stopped before an event it cannot read).
 */
import { type Clock, Effect } from "effect"
import type { MetricsShape } from "../observability/metrics.ts"
import type { ReadinessShape } from "../observability/readiness.ts"
import type { PartitionLeases } from "./leases.ts"
import type { PartitionStates } from "./partition-state.ts"

/** Registers, in the current scope, the partitions' metrics and their readiness check. */
export const reportPartitionHealth = (deps: {
  readonly service: string
  readonly states: PartitionStates
  readonly leases: PartitionLeases
  readonly metrics: MetricsShape
  readonly readiness: ReadinessShape
  readonly clock: Clock.Clock
}) =>
  Effect.gen(function* () {
    const { service, states, leases, metrics, clock } = deps
    yield* metrics.collect(() => {
      const now = clock.currentTimeMillisUnsafe()
      for (const state of states.values()) {
        const labels = { service, partition: String(state.partition) }
        metrics.projectionLag.set(labels, state.projection?.behind() ?? 0)
        if (state.snapshotWrittenAt === 0) continue
        metrics.snapshotAge.set(labels, Math.max(0, now - state.snapshotWrittenAt) / 1000)
        metrics.snapshotBytes.set(labels, state.snapshotBytes)
      }
    })
    yield* deps.readiness.register(() =>
      leases.held().flatMap((partition) => {
        const state = states.get(partition)
        const halt = state?.projection?.halted() ?? null
        if (halt !== null)
          return [`${service}: partition ${partition} stopped before seq ${halt.seq}: ${halt.error.message}`]
        if (state?.ready === true) return []
        const projection = state?.projection ?? null
        if (projection === null) return [`${service}: partition ${partition} loading`]
        return [`${service}: partition ${partition} behind by ${projection.behind()} events`]
      }),
    )
  })
