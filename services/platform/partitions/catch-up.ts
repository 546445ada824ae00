/**
 * How a partition just taken catches up: from its latest snapshot (or, when one of that snapshot's lines
 * did not decode, from nothing) and then the partition's tail of the log, by its own projection filtered
 * to `wm.evt.<p>.>`, up to the partition's last record as it stood when the lease was taken. Only then
 * does it answer. What each catch-up took is kept for the operator, and the first failure for warm-up.
 */
import { Cause, Clock, Deferred, Effect, Scope } from "effect"
import { agentIdOfEventSubject, partitionEvents } from "../../../contracts/subjects.ts"
import { evolve, skipUndecodable } from "../../../domain/agent-view.ts"
import type { EventLogShape } from "../log/event-log.ts"
import { runProjection } from "../log/projection.ts"
import type { MetricsShape } from "../observability/metrics.ts"
import type { PartitionHooks } from "./partition-hooks.ts"
import type { PartitionState, Prefetch } from "./partition-state.ts"
import type { SnapshotStore } from "./snapshots.ts"

export interface CatchUp {
  readonly partition: number
  /** The sequence the snapshot it started from covers (0: none, rebuilt from the log). */
  readonly snapshotSeq: number
  /** How long reading and decoding its snapshot took (0: none was read). */
  readonly snapshotMillis: number
  readonly millis: number
}

export const makeCatchUps = (deps: {
  readonly service: string
  readonly hooks: PartitionHooks
  readonly log: EventLogShape
  readonly snapshots: SnapshotStore
  readonly metrics: MetricsShape
  readonly lastSeqOf: (partition: number) => Effect.Effect<number, unknown>
}) => {
  const { service, hooks, log, snapshots, metrics, lastSeqOf } = deps
  let caughtUpEvents = 0
  const catchUps: CatchUp[] = []
  /** Why a partition taken at start could not catch up (e.g. an event newer than this code reads). */
  let catchUpFailure: unknown = null

  /** `prefetch`: the snapshot being read while settling; `fromLog`: no snapshot (one of its lines did not decode). */
  const catchUp = (state: PartitionState, prefetch: Prefetch | undefined, fromLog: boolean) =>
    Effect.gen(function* () {
      const began = yield* Clock.currentTimeMillis
      if (hooks.opened !== undefined) yield* hooks.opened(state.partition, state.scope)
      const prefetched = prefetch === undefined || fromLog ? undefined : yield* Deferred.await(prefetch)
      const snapshot = fromLog ? null : yield* snapshots.load(state.partition, prefetched)
      const snapshotMillis = (yield* Clock.currentTimeMillis) - began
      if (snapshot !== null) {
        state.views.addLines(snapshot.lines)
        for (const [id, view] of snapshot.views) state.views.set(id, view)
        if (hooks.state !== undefined) for (const [id, kept] of snapshot.states) hooks.state.restore(id, kept)
        state.snapshotSeq = snapshot.manifest.seq
        state.snapshotAt = yield* Clock.currentTimeMillis
        state.snapshotWrittenAt = snapshot.manifest.at
        state.snapshotBytes = snapshot.manifest.bytes
      }
      // Read before the partition's last: once caught up with that, the partition is complete up to here.
      const streamAtStart = yield* log.lastSeq.pipe(Effect.orElseSucceed(() => 0))
      const target = yield* lastSeqOf(state.partition).pipe(Effect.orDie)
      const projection = yield* runProjection({
        name: service,
        filter: partitionEvents(state.partition),
        fromSeq: state.snapshotSeq + 1,
        target,
        apply: (event, record) => {
          if (event._tag === "AgentForgotten" || event._tag === "EntryForgotten") state.forgotten = true
          const before = state.views.get(event.agentId)
          const next = evolve(before, event, record)
          if (next !== undefined) state.views.set(event.agentId, next)
          else state.views.delete(event.agentId)
          hooks.applied?.(event, before, next, record)
          state.pending = record.pending
        },
        onDeadLetter: (letter) => {
          const agentId = agentIdOfEventSubject(letter.subject)
          const view = state.views.get(agentId)
          if (view !== undefined) state.views.set(agentId, skipUndecodable(view, letter.subject, letter.seq))
          hooks.deadLettered?.(state.partition, letter.seq)
          metrics.deadLetters.inc({ service })
        },
      }).pipe(Scope.provide(state.scope))
      state.projection = projection
      const warm = yield* projection.warmedUp
      if (hooks.settled !== undefined) yield* hooks.settled(state.partition)
      // The log's position the replica caught up with (each partition's target is a stream sequence).
      caughtUpEvents = Math.max(caughtUpEvents, warm.events)
      catchUps.push({
        partition: state.partition,
        snapshotSeq: snapshot?.manifest.seq ?? 0,
        snapshotMillis,
        millis: (yield* Clock.currentTimeMillis) - began,
      })
      state.completeTo = Math.max(state.completeTo, streamAtStart)
      state.ready = true
      hooks.ready?.(state.partition, [...state.views.keys()], (agentId) => state.views.get(agentId))
    })

  return {
    /** Catches the partition up; a failure is counted, logged and kept, and the partition does not answer. */
    run: (state: PartitionState, prefetch: Prefetch | undefined, fromLog: boolean) =>
      catchUp(state, prefetch, fromLog).pipe(
        Effect.catchCause((cause) =>
          Effect.andThen(
            Effect.sync(() => {
              metrics.errors.inc({ service, kind: "catch-up" })
              catchUpFailure ??= Cause.squash(cause)
            }),
            Effect.logError(`[${service}] partition ${state.partition} did not catch up`, cause),
          ),
        ),
      ),
    /** How each partition this replica took was caught up. */
    catchUps: (): ReadonlyArray<CatchUp> => catchUps,
    /** The log's position the replica caught up with. */
    events: () => caughtUpEvents,
    failure: () => catchUpFailure,
  }
}
