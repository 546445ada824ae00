/**
 * The working views of the partitions this replica owns. Each owned
 * partition runs its own projection, an ordered consumer filtered to
 * `wm.evt.<p>.>`, so a replica decodes only its share of the log; a
 * partition answers once its projection has caught up with the partition as
 * it stood when the lease was taken, and its views are dropped when the
 * lease is lost.
 *
 * Composed of: the partitions taken and given up (taken-partitions.ts), each one's state
 * (partition-state.ts) and catch-up from its latest snapshot and the log's tail after it (catch-up.ts),
 * the snapshot lines decoded behind the partitions that answer (snapshot-decoder.ts), the snapshots
 * written (snapshot-schedule.ts), the progress reports (progress-reports.ts), metrics and readiness
 * (partition-health.ts), and the position and its waits, per partition (partitioned-projection.ts). The
 * snapshots of the partitions a starting replica expects to take are read while it settles (leases.ts).
 */
import { Clock, Effect, Exit, FiberSet, Scope } from "effect"
import type { Placement } from "../../../contracts/partition-pins.ts"
import { allPartitions, deploymentPlacement, partitionOf } from "../../../contracts/partitions.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import { EventLog } from "../log/event-log.ts"
import { Nats } from "../nats/connection.ts"
import { Metrics } from "../observability/metrics.ts"
import { Readiness } from "../observability/readiness.ts"
import type { AgentViews } from "../views/agent-views.ts"
import { type CatchUp, makeCatchUps } from "./catch-up.ts"
import { holdPartitionLeases, type PartitionLeases } from "./leases.ts"
import { checkLogLayout } from "./log-layout.ts"
import { processFrontiers } from "./partition-frontiers.ts"
import { reportPartitionHealth } from "./partition-health.ts"
import type { PartitionHooks } from "./partition-hooks.ts"
import { lastSeqOfPartition, nextSeqOfPartition, streamEnd } from "./partition-position.ts"
import type { PartitionState } from "./partition-state.ts"
import { makePartitionedProjection, type PartitionedProjection, trackPositions } from "./partitioned-projection.ts"
import { reportProgress } from "./progress-reports.ts"
import { PartitionSettings } from "./settings.ts"
import { decodeSnapshotLines } from "./snapshot-decoder.ts"
import { makeSnapshotSchedule } from "./snapshot-schedule.ts"
import { openSnapshotStore } from "./snapshots.ts"
import { makeTakenPartitions } from "./taken-partitions.ts"

export type { CatchUp } from "./catch-up.ts"
export { checkLogLayout } from "./log-layout.ts"
export { type KeptState, keptState, type PartitionHooks } from "./partition-hooks.ts"
export type { PartitionedProjection } from "./partitioned-projection.ts"

export interface PartitionedViews extends AgentViews {
  readonly projection: PartitionedProjection
  /** This replica holds the agent's partition and has caught up on it: it may answer for the agent. */
  readonly owns: (agentId: string) => boolean
  /** This replica has taken the agent's partition and not given it up: it answers for it, or will. */
  readonly takes: (agentId: string) => boolean
  readonly leases: PartitionLeases
  /** Which partitions each agent hashes over. */
  readonly placement: Placement
  /** The partitions that answer now. */
  readonly ready: () => ReadonlyArray<number>
  /**
   * The partitions this replica has taken and not given up: those that answer, those still catching up, and
   * those whose lease lapsed for a moment (a stalled event loop) and answer again once it is renewed, which
   * tells no watcher.
   */
  readonly taken: () => ReadonlyArray<number>
  /** Calls `watcher` whenever a partition is taken or given up (`taken` changes); returns what stops it. */
  readonly watchTaken: (watcher: () => void) => () => void
  /** How each partition this replica took was caught up. */
  readonly catchUps: () => ReadonlyArray<CatchUp>
  /** Snapshots every partition that answers now. */
  readonly snapshotAll: Effect.Effect<void>
  /** Completes once warm-up has ended and every partition that answers has decoded every view of its snapshot. */
  readonly decoded: Effect.Effect<void>
}

export const projectPartitionedViews = (service: string, hooks: PartitionHooks = {}) =>
  Effect.gen(function* () {
    const nats = yield* Nats
    const log = yield* EventLog
    const settings = yield* PartitionSettings
    const runFork = yield* FiberSet.makeRuntime<EventLog | Nats>()
    const metrics = yield* Metrics
    const readiness = yield* Readiness
    const clock = yield* Clock.Clock
    const states = new Map<number, PartitionState>()
    const takenWatchers = new Set<() => void>()
    const takenChanged = () => {
      for (const watcher of takenWatchers) watcher()
    }
    const startedAt = clock.currentTimeMillisUnsafe()
    yield* checkLogLayout(settings.partitions)
    const snapshots = yield* openSnapshotStore(service, settings.partitions, hooks.state)

    const lastSeqOf = (partition: number) => lastSeqOfPartition(partition).pipe(Effect.provideService(Nats, nats))
    const nextSeqOf = (partition: number, fromSeq: number) =>
      nextSeqOfPartition(partition, fromSeq).pipe(Effect.provideService(Nats, nats))
    const catchUps = makeCatchUps({ service, hooks, log, snapshots, metrics, lastSeqOf })

    yield* decodeSnapshotLines(states)

    const taken = makeTakenPartitions({
      service,
      hooks,
      states,
      takenChanged,
      runFork,
      snapshots,
      now: () => clock.currentTimeMillisUnsafe(),
      catchUp: catchUps.run,
      // Still held (a lapsed lease is renewed, never taken again, so `holds` would not do here).
      stillHeld: (partition) => leases.held().includes(partition),
    })
    const leases = yield* holdPartitionLeases(service, taken)
    // What is read for partitions another replica took is not kept.
    yield* Effect.forkScoped(Effect.andThen(leases.firstRound, Effect.sync(taken.forgetPrefetches)))
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...states.values()], (s) => Scope.close(s.scope, Exit.void), {
        discard: true,
      }),
    )

    const { snapshotAll, start: startSnapshots } = makeSnapshotSchedule({
      service,
      hooks,
      states,
      snapshots,
      holds: leases.holds,
      snapshotIntervalMs: settings.snapshotIntervalMs,
      metrics,
      clock,
    })
    yield* startSnapshots
    // At shutdown, before the leases are released (finalizers run last-added first).
    yield* Effect.addFinalizer(() => snapshotAll)

    const answering = (partition: number): PartitionState | undefined => {
      const state = states.get(partition)
      return state?.ready && leases.holds(partition) ? state : undefined
    }
    const ready = () => allPartitions(settings.partitions).filter((p) => answering(p) !== undefined)

    yield* trackPositions({
      states,
      streamEnd: streamEnd.pipe(Effect.provideService(Nats, nats)),
      nextSeqOf,
      frontiers: processFrontiers,
    })
    yield* reportProgress({ hooks, states, leases, answering, leaseTtlMs: settings.leaseTtlMs })
    yield* reportPartitionHealth({ service, states, leases, metrics, readiness, clock })

    const projection = makePartitionedProjection({
      states,
      log,
      lastSeqOf,
      partitions: settings.partitions,
      leases,
      answering,
      ready,
      startedAt,
      caughtUpEvents: catchUps.events,
      catchUpFailure: catchUps.failure,
    })

    return {
      get: (agentId: string) => answering(partitionOf(agentId, settings.partitions))?.views.get(agentId),
      all: () => {
        const all = new Map<string, AgentView>()
        for (const p of ready()) for (const [id, view] of states.get(p)!.views.entries()) all.set(id, view)
        return all
      },
      projection,
      owns: (agentId: string) => answering(partitionOf(agentId, settings.partitions)) !== undefined,
      takes: (agentId: string) => states.has(partitionOf(agentId, settings.partitions)),
      leases,
      placement: deploymentPlacement(settings.partitions),
      ready,
      taken: () => [...states.keys()],
      watchTaken: (watcher) => {
        takenWatchers.add(watcher)
        return () => takenWatchers.delete(watcher)
      },
      catchUps: catchUps.catchUps,
      snapshotAll,
      decoded: Effect.gen(function* () {
        yield* projection.warmedUp
        while ([...states.values()].some((s) => s.ready && s.views.undecoded > 0)) yield* Effect.sleep("20 millis")
      }),
    } satisfies PartitionedViews
  })
