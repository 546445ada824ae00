/**
 * The working views of the partitions this replica owns. Each owned
 * partition runs its own projection, an ordered consumer filtered to
 * `wm.evt.<p>.>`, so a replica decodes only its share of the log; a
 * partition answers once its projection has caught up with the partition as
 * it stood when the lease was taken, and its views are dropped when the
 * lease is lost.
 *
 * A partition starts from its latest snapshot (services/platform/partitions/snapshots.ts) and replays
 * only the tail after it. A views-only service (working, gateway) keeps the snapshot's views as their
 * lines and answers at once; each is decoded when its agent is first used, the rest behind, a batch at a
 * time. A line that does not decode makes the partition drop that snapshot and rebuild from the log. The
 * snapshots of the partitions a starting replica expects to take are read while it settles (leases.ts).
 *
 * Snapshots are written every WM_SNAPSHOT_INTERVAL_MS and at shutdown; a forget tombstone erases the
 * partition's snapshot at once (so no snapshot keeps what was forgotten), and the partition is
 * snapshotted again only after a replica rebuilds it from the log.
 *
 * Each partition that answers reports where the service's work on it has got and how many of its records
 * that work is behind (progress.ts): the projection's position and what the log still holds for it, and
 * what the service has left behind the projection (`hooks.behind`).
 *
 * Waiting for a stream sequence is per partition: a partition's projection
 * only sees its own records, so "applied up to seq" is proven either by a
 * record at or past seq, or by the partition's last stored sequence (asked of
 * the stream leader) being one it has applied.
 */
import { Cause, Clock, Deferred, Effect, Exit, Fiber, FiberSet, Scope } from "effect"
import { NotCaughtUp } from "../../../contracts/errors.ts"
import type { MemoryEvent } from "../../../contracts/events.ts"
import type { Placement } from "../../../contracts/partition-pins.ts"
import { allPartitions, deploymentPlacement, partitionOf } from "../../../contracts/partitions.ts"
import {
  ALL_EVENTS,
  agentEventsInAnyPartition,
  agentIdOfEventSubject,
  EVENTS_STREAM,
  partitionEvents,
  relocatedSubject,
  upgradeLegacySubject,
} from "../../../contracts/subjects.ts"
import { type AgentView, evolve, skipUndecodable } from "../../../domain/agent-view.ts"
import { EventLog, type LogRecord } from "../log/event-log.ts"
import { type Halt, type Projection, runProjection, type WarmUp } from "../log/projection.ts"
import { Nats } from "../nats/connection.ts"
import { Metrics } from "../observability/metrics.ts"
import { Readiness } from "../observability/readiness.ts"
import type { AgentViews } from "../views/agent-views.ts"
import { holdPartitionLeases, type PartitionLeases } from "./leases.ts"
import { lastSeqOfPartition } from "./partition-position.ts"
import { PartitionViewMap } from "./partition-view-map.ts"
import { encodeProgress } from "./progress.ts"
import { PartitionSettings } from "./settings.ts"
import { openSnapshotStore, type ReadSnapshot, type SnapshotAgent, type SnapshotState } from "./snapshots.ts"

/** A projection whose waits and position can be asked for one agent's partition. */
export interface PartitionedProjection extends Projection {
  /** Without an agent: the least over every partition this replica holds, 0 for one that does not answer now. */
  readonly appliedSeq: (agentId?: string) => number
  /** With an agent: where the agent's partition stopped (an event newer than this code reads), if it did. */
  readonly halted: (agentId?: string) => Halt | null
  /** Without an agent: every partition this replica owns has applied `seq`. */
  readonly waitFor: (
    seq: number,
    timeout?: Parameters<Projection["waitFor"]>[1],
    agentId?: string,
  ) => Effect.Effect<void, NotCaughtUp>
}

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

export interface CatchUp {
  readonly partition: number
  /** The sequence the snapshot it started from covers (0: none, rebuilt from the log). */
  readonly snapshotSeq: number
  /** How long reading and decoding its snapshot took (0: none was read). */
  readonly snapshotMillis: number
  readonly millis: number
}

interface PartitionState {
  readonly partition: number
  readonly views: PartitionViewMap
  readonly scope: Scope.Closeable
  projection: Projection | null
  ready: boolean
  /** The partition has no record after this applied position up to this sequence (proven by asking). */
  completeTo: number
  fiber: Fiber.Fiber<unknown, unknown> | null
  /** The sequence the last snapshot written or loaded covers, and when. */
  snapshotSeq: number
  snapshotAt: number
  /** A forget was applied since the last snapshot: the snapshot must be erased. */
  forgotten: boolean
  /** Its views hold what a forget erased from the log: no snapshot of them until it is rebuilt. */
  tainted: boolean
  /** A line of its snapshot did not decode: it is being dropped, to be rebuilt from the log. */
  rebuilding: boolean
  /** Records of the partition the log held after the last one delivered to its projection. */
  pending: number
  /** When the snapshot last written or loaded was written (0: none), and its size. */
  snapshotWrittenAt: number
  snapshotBytes: number
}

/** A snapshot being read for a partition the replica expects to take (null: none, or one that does not decode). */
type Prefetch = Deferred.Deferred<ReadSnapshot | null>

/** How often a replica looks whether its progress on a partition changed, to report it. */
const REPORT_PERIOD_MS = 500

/** Snapshot lines decoded behind the partitions that answer: a batch at a time, for a slice of time at most. */
const DECODE_BATCH = 4
const DECODE_SLICE_MS = 5

/**
 * The log must be of this deployment's layout: a log of the layout before partitions needs
 * `wm migrate`, and one written with another WM_PARTITIONS or WM_PARTITION_PINS would route agents to
 * partitions whose events are elsewhere (`wm migrate` moves them). Checked on the last record of the
 * log, of each partition and of each pinned agent, one direct get each: a change of the count or of the
 * pins moves some partition's last writer, or a pinned agent, unless the log has no events of them.
 */
export const checkLogLayout = (partitions: number) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    const lastOf = (filter: string) =>
      Effect.tryPromise(() => jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: filter })).pipe(
        Effect.map((m) => m?.subject ?? null),
        Effect.orElseSucceed(() => null),
      )
    const last = yield* lastOf(ALL_EVENTS)
    if (last === null) return
    if (upgradeLegacySubject(last) !== null)
      return yield* Effect.die(
        new Error(`the event log is of the layout before partitions (${last}): run \`wm migrate\` first`),
      )
    const placement = deploymentPlacement(partitions)
    const filters = [
      ...allPartitions(partitions).map(partitionEvents),
      ...placement.pinnedAgents.map(agentEventsInAnyPartition),
    ]
    const subjects = [last, ...(yield* Effect.forEach(filters, lastOf, { concurrency: 16 }))]
    const misplaced = subjects.find((subject) => subject !== null && relocatedSubject(subject) !== null)
    if (misplaced !== undefined && misplaced !== null) {
      const pins = placement.pins.map((p) => `${p.tenant}=${p.partitions.join(",")}`).join(";") || "none"
      return yield* Effect.die(
        new Error(
          `the event log was written with another placement than WM_PARTITIONS=${partitions}, WM_PARTITION_PINS=${pins} (${misplaced} belongs in ${relocatedSubject(misplaced)}): run \`wm migrate\` first`,
        ),
      )
    }
  })

/** What a service keeps per agent beside the view, carried by its partitions' snapshots. */
export interface KeptState<S> extends SnapshotState<S> {
  /** The agent's state as a snapshot carries it, now: JSON-ready, and a copy of anything that changes later. */
  readonly take: (agentId: string) => unknown
  /** Puts an agent's decoded state back, before the partition's tail is replayed. */
  readonly restore: (agentId: string, state: S) => void
}

/** A service's kept state, for the hooks (the decoded state's type stays the service's). */
export const keptState = <S>(kept: KeptState<S>): KeptState<unknown> => kept as KeptState<unknown>

/** What a service keeps beside the views of its partitions, told as the views change. */
export interface PartitionHooks {
  /** What the service keeps per agent beside the views: snapshots carry it too. */
  readonly state?: KeptState<unknown>
  /** After each event applied to an agent's view (`after` undefined: the view was removed). */
  readonly applied?: (
    event: MemoryEvent,
    before: AgentView | undefined,
    after: AgentView | undefined,
    record: LogRecord,
  ) => void
  /** After a record of the partition was dead-lettered (its sequence still counts as applied). */
  readonly deadLettered?: (partition: number, seq: number) => void
  /**
   * Work the service still has on the partition behind its projection (fade's evaluations, memory's
   * long-term writes): the stream sequence that work is done to, and how many of the partition's records
   * after it are not done with yet. Null: none. Its progress report (progress.ts) says so.
   */
  readonly behind?: (partition: number) => { readonly seq: number; readonly records: number } | null
  /**
   * The partition was taken: runs before its projection starts, in the partition's scope (closed when
   * the partition is lost or the service stops); what it starts there is the partition's.
   */
  readonly opened?: (partition: number, scope: Scope.Scope) => Effect.Effect<void>
  /** Once the projection has caught up, and before the partition answers: what else must have caught up. */
  readonly settled?: (partition: number) => Effect.Effect<void>
  /** The partition answers now (caught up); `agents` are the agents it holds, `view` reads theirs. */
  readonly ready?: (
    partition: number,
    agents: ReadonlyArray<string>,
    view: (agentId: string) => AgentView | undefined,
  ) => void
  /** The partition is no longer this replica's: drop what is kept for its agents. */
  readonly lost?: (partition: number, agents: ReadonlyArray<string>) => void
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
    let caughtUpEvents = 0
    const catchUps: CatchUp[] = []
    /** Why a partition taken at start could not catch up (e.g. an event newer than this code reads). */
    let catchUpFailure: unknown = null
    yield* checkLogLayout(settings.partitions)
    const snapshots = yield* openSnapshotStore(service, settings.partitions, hooks.state)

    const lastSeqOf = (partition: number) => lastSeqOfPartition(partition).pipe(Effect.provideService(Nats, nats))

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

    // The snapshots' lines not used yet, decoded behind the partitions that answer: one fiber for them
    // all, a few milliseconds at a time, so requests and events are taken in between. A slice bounds the
    // processor time actually spent, so it is measured on the monotonic timer, not on the Clock (a clock
    // that stands still, as a test's may, would never end one).
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function* () {
          const until = performance.now() + DECODE_SLICE_MS
          let decoding = false
          for (const state of states.values()) {
            if (!state.ready || state.rebuilding) continue
            while (state.views.decodeSome(DECODE_BATCH) > 0 && performance.now() < until) decoding = true
            if (performance.now() >= until) break
          }
          yield* Effect.sleep(decoding ? 0 : 50)
        }),
      ),
    )

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
          yield* snapshots
            .drop(partition)
            .pipe(Effect.catch((error) => Effect.logError(`[${service}] ${error.message}`)))
          // Still held (a lapsed lease is renewed, never taken again, so `holds` would not do here).
          if (leases.held().includes(partition)) acquired(partition, true)
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
      const state: PartitionState = {
        partition,
        views: new PartitionViewMap((agentId, reason) => undecodable(state)(agentId, reason)),
        scope,
        projection: null,
        ready: false,
        completeTo: 0,
        fiber: null,
        snapshotSeq: 0,
        snapshotAt: clock.currentTimeMillisUnsafe(),
        forgotten: false,
        tainted: false,
        rebuilding: false,
        pending: 0,
        snapshotWrittenAt: 0,
        snapshotBytes: 0,
      }
      states.set(partition, state)
      takenChanged()
      state.fiber = runFork(
        catchUp(state, prefetch, fromLog).pipe(
          Effect.catchCause((cause) =>
            Effect.andThen(
              Effect.sync(() => {
                metrics.errors.inc({ service, kind: "catch-up" })
                catchUpFailure ??= Cause.squash(cause)
              }),
              Effect.logError(`[${service}] partition ${partition} did not catch up`, cause),
            ),
          ),
        ),
      )
    }

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

    const leases = yield* holdPartitionLeases(service, { acquired, lost, settling })
    // What is read for partitions another replica took is not kept.
    yield* Effect.forkScoped(
      Effect.andThen(
        leases.firstRound,
        Effect.sync(() => prefetches.clear()),
      ),
    )
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...states.values()], (s) => Scope.close(s.scope, Exit.void), {
        discard: true,
      }),
    )

    /** Only the lease holder writes a partition's snapshot, and only of a caught-up view. */
    const snapshot = (state: PartitionState) =>
      Effect.suspend(() => {
        const projection = state.projection
        if (!state.ready || projection === null || !leases.holds(state.partition)) return Effect.void
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
    const snapshotAll = Effect.suspend(() =>
      Effect.forEach([...states.values()], snapshot, { concurrency: 4, discard: true }),
    )
    const due = (state: PartitionState, now: number) =>
      state.forgotten ||
      (settings.snapshotIntervalMs > 0 &&
        now - state.snapshotAt >= settings.snapshotIntervalMs &&
        (state.projection?.appliedSeq() ?? 0) > state.snapshotSeq)
    yield* Effect.forkScoped(
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
    // At shutdown, before the leases are released (finalizers run last-added first).
    yield* Effect.addFinalizer(() => snapshotAll)

    const answering = (partition: number): PartitionState | undefined => {
      const state = states.get(partition)
      return state?.ready && leases.holds(partition) ? state : undefined
    }

    /** How far the partition is known complete: its last applied record, what the tracker proved, or just before a halt. */
    const appliedOf = (state: PartitionState) => {
      const halt = state.projection?.halted() ?? null
      if (halt !== null) return halt.seq - 1
      return Math.max(state.projection?.appliedSeq() ?? 0, state.completeTo)
    }

    // The position tracker: a partition that has applied its last record is complete up to the stream's
    // end as read before that record was asked for, so an idle partition does not hold the replica's
    // position back. One stream read, and one read per lagging partition, every 250 ms.
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function* () {
          yield* Effect.sleep("250 millis")
          const streamLast = yield* log.lastSeq.pipe(Effect.orElseSucceed(() => 0))
          for (const state of states.values()) {
            const projection = state.projection
            if (!state.ready || projection === null || projection.halted() !== null) continue
            if (appliedOf(state) >= streamLast) continue
            const last = yield* lastSeqOf(state.partition).pipe(Effect.orElseSucceed(() => Number.MAX_SAFE_INTEGER))
            if (projection.appliedSeq() >= last) state.completeTo = Math.max(state.completeTo, streamLast)
          }
        }),
      ),
    )

    // Progress reports (progress.ts): each partition that answers says where its work has got and how many
    // records it is behind, when that changed, at most every REPORT_PERIOD_MS, and at least every third of
    // the lease TTL so it stays live.
    const reportedAt = new Map<number, { seq: number; lag: number; at: number }>()
    const keepAliveMs = Math.max(REPORT_PERIOD_MS, Math.floor(settings.leaseTtlMs / 3))
    yield* Effect.forkScoped(
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
            if (last !== undefined && last.seq === seq && last.lag === lag && now - last.at < keepAliveMs) continue
            reportedAt.set(state.partition, { seq, lag, at: now })
            reports.push(
              leases.report(state.partition, encodeProgress({ replica: leases.replicaId, seq, applied, lag, at: now })),
            )
          }
          if (reports.length > 0) yield* Effect.promise(() => Promise.all(reports))
        }),
      ),
    )

    const waitInPartition = (partition: number, seq: number, timeout: Parameters<Projection["waitFor"]>[1]) =>
      Effect.gen(function* () {
        const state = answering(partition)
        if (state === undefined || state.projection === null)
          return yield* Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: 0 }))
        if (appliedOf(state) >= seq) return
        const projection = state.projection
        if (projection.halted() !== null)
          return yield* Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: appliedOf(state) }))
        // The partition's last sequence proves something about `seq` only once the stream has reached it,
        // and only when read after that was seen.
        const streamLast = yield* log.lastSeq.pipe(Effect.orElseSucceed(() => 0))
        if (streamLast < seq) return yield* projection.waitFor(seq, timeout)
        const last = yield* lastSeqOf(partition).pipe(Effect.orElseSucceed(() => seq))
        const target = Math.min(seq, last)
        if (projection.appliedSeq() < target) yield* projection.waitFor(target, timeout)
        // Everything of the partition up to `last` is applied, and `last` was read after `seq` was stored.
        if (last <= projection.appliedSeq()) state.completeTo = Math.max(state.completeTo, seq)
      })

    const ready = () => allPartitions(settings.partitions).filter((p) => answering(p) !== undefined)

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
    // Every partition it holds must have caught up, and read on (not stopped before an event it cannot read).
    yield* readiness.register(() =>
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

    const projection: PartitionedProjection = {
      appliedSeq: (agentId?: string) => {
        if (agentId !== undefined) {
          const state = answering(partitionOf(agentId, settings.partitions))
          return state === undefined ? 0 : appliedOf(state)
        }
        // Every partition this replica holds counts, and one that does not answer now (catching up, its
        // lease suspended) has applied nothing it may answer from.
        const held = leases.held()
        if (held.length === 0) return 0
        return Math.min(
          ...held.map((p) => {
            const state = answering(p)
            return state === undefined ? 0 : appliedOf(state)
          }),
        )
      },
      waitFor: (seq, timeout, agentId) =>
        agentId !== undefined
          ? waitInPartition(partitionOf(agentId, settings.partitions), seq, timeout)
          : Effect.forEach(ready(), (p) => waitInPartition(p, seq, timeout), {
              concurrency: "unbounded",
              discard: true,
            }),
      warmedUp: Effect.gen(function* () {
        yield* leases.firstRound
        while ([...states.values()].some((s) => !s.ready)) {
          // Met during warm-up, the service does not start.
          if (catchUpFailure !== null) return yield* Effect.die(catchUpFailure)
          yield* Effect.sleep("20 millis")
        }
        return { events: caughtUpEvents, millis: (yield* Clock.currentTimeMillis) - startedAt } satisfies WarmUp
      }),
      behind: () => ready().reduce((sum, p) => sum + (states.get(p)?.projection?.behind() ?? 0), 0),
      halted: (agentId?: string): Halt | null => {
        if (agentId !== undefined)
          return states.get(partitionOf(agentId, settings.partitions))?.projection?.halted() ?? null
        for (const s of states.values()) {
          const halt = s.projection?.halted() ?? null
          if (halt !== null) return halt
        }
        return null
      },
    }

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
      catchUps: () => catchUps,
      snapshotAll,
      decoded: Effect.gen(function* () {
        yield* projection.warmedUp
        while ([...states.values()].some((s) => s.ready && s.views.undecoded > 0)) yield* Effect.sleep("20 millis")
      }),
    } satisfies PartitionedViews
  })
