/**
 * The position of the partitioned views, and waits on it, per partition: a partition's projection only
 * sees its own records, so "applied up to seq" is proven either by a record at or past seq, or by the
 * partition's last stored sequence (asked of the stream leader) being one it has applied. A tracker
 * proves idle partitions complete by asking for their next record after what they applied, so they do not
 * hold the replica's position back.
 */
import { Clock, Effect } from "effect"
import { NotCaughtUp } from "../../../contracts/errors.ts"
import { partitionOf } from "../../../contracts/partitions.ts"
import type { EventLogShape } from "../log/event-log.ts"
import type { Halt, Projection, WarmUp } from "../log/projection.ts"
import type { PartitionLeases } from "./leases.ts"
import type { PartitionFrontiers } from "./partition-frontiers.ts"
import { appliedOf, type PartitionState, type PartitionStates } from "./partition-state.ts"

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
  /**
   * The agent's partition has applied the record at `seq`, which is one of the agent's own (an event this
   * service appended or read on one of the agent's subjects): its projection reaching `seq` proves it, with
   * no question to the stream leader.
   */
  readonly waitForRecord: (
    seq: number,
    agentId: string,
    timeout?: Parameters<Projection["waitFor"]>[1],
  ) => Effect.Effect<void, NotCaughtUp>
}

/** How often the lagging partitions are asked for: one request to the stream's leader each. */
const TRACK_PERIOD = "1 second"

interface PositionDeps {
  readonly states: PartitionStates
  readonly log: EventLogShape
  readonly lastSeqOf: (partition: number) => Effect.Effect<number, unknown>
}

type TrackerDeps = Pick<PositionDeps, "states"> & {
  /** The stream's last sequence and which stream it is (partition-position.ts). */
  readonly streamEnd: Effect.Effect<{ readonly last: number; readonly stream: string }, unknown>
  readonly nextSeqOf: (partition: number, fromSeq: number) => Effect.Effect<number | null, unknown>
  /** What the process's other services learnt last (partition-frontiers.ts). */
  readonly frontiers: PartitionFrontiers
}

/**
 * Forks, in the current scope, the position tracker: a partition with no record after what it has applied
 * (asked of the stream leader, from there on) is complete up to the stream's end as read before that was
 * asked; one with a later record, up to just before it. One stream read, and one read per lagging partition,
 * every TRACK_PERIOD, each looking only at the records since the partition was last proven; what another
 * service of the process learnt within the period answers instead of a read (partition-frontiers.ts). A read
 * that waits for a sequence asks for its own partition at once (waitInPartition), so only the position
 * without an agent (the progress reports, the operator) waits for the tracker.
 */
export const trackPositions = ({ states, streamEnd, nextSeqOf, frontiers }: TrackerDeps) =>
  Effect.forkScoped(
    Effect.forever(
      Effect.gen(function* () {
        yield* Effect.sleep(TRACK_PERIOD)
        const end = yield* Effect.option(streamEnd)
        if (end._tag === "None") return
        const { last: streamLast, stream } = end.value
        for (const state of states.values()) {
          const projection = state.projection
          if (!state.ready || projection === null || projection.halted() !== null) continue
          const from = appliedOf(state) + 1
          if (from > streamLast) continue
          const complete = yield* frontiers.completeTo(
            stream,
            state.partition,
            from,
            streamLast,
            nextSeqOf(state.partition, from),
          )
          if (complete !== undefined) state.completeTo = Math.max(state.completeTo, complete)
        }
      }),
    ),
  )

export const makePartitionedProjection = (
  deps: PositionDeps & {
    readonly partitions: number
    readonly leases: PartitionLeases
    readonly answering: (partition: number) => PartitionState | undefined
    readonly ready: () => ReadonlyArray<number>
    /** When the service started, the log's position its partitions caught up with, and why one could not. */
    readonly startedAt: number
    readonly caughtUpEvents: () => number
    readonly catchUpFailure: () => unknown
  },
): PartitionedProjection => {
  const { states, log, lastSeqOf, partitions, leases, answering, ready } = deps

  /**
   * Waits until the partition has applied `seq`. When `seq` is one of the partition's own records, its
   * projection reaching it is the proof; otherwise the stream leader is asked what the partition holds.
   */
  const waitInPartition = (
    partition: number,
    seq: number,
    timeout: Parameters<Projection["waitFor"]>[1],
    ownRecord = false,
  ) =>
    Effect.gen(function* () {
      const state = answering(partition)
      if (state === undefined || state.projection === null)
        return yield* Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: 0 }))
      if (appliedOf(state) >= seq) return
      const projection = state.projection
      if (projection.halted() !== null)
        return yield* Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: appliedOf(state) }))
      if (ownRecord) return yield* projection.waitFor(seq, timeout)
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

  return {
    waitForRecord: (seq, agentId, timeout) => waitInPartition(partitionOf(agentId, partitions), seq, timeout, true),
    appliedSeq: (agentId?: string) => {
      if (agentId !== undefined) {
        const state = answering(partitionOf(agentId, partitions))
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
        ? waitInPartition(partitionOf(agentId, partitions), seq, timeout)
        : Effect.forEach(ready(), (p) => waitInPartition(p, seq, timeout), {
            concurrency: "unbounded",
            discard: true,
          }),
    warmedUp: Effect.gen(function* () {
      yield* leases.firstRound
      while ([...states.values()].some((s) => !s.ready)) {
        // Met during warm-up, the service does not start.
        if (deps.catchUpFailure() !== null) return yield* Effect.die(deps.catchUpFailure())
        yield* Effect.sleep("20 millis")
      }
      return {
        events: deps.caughtUpEvents(),
        millis: (yield* Clock.currentTimeMillis) - deps.startedAt,
      } satisfies WarmUp
    }),
    behind: () => ready().reduce((sum, p) => sum + (states.get(p)?.projection?.behind() ?? 0), 0),
    halted: (agentId?: string): Halt | null => {
      if (agentId !== undefined) return states.get(partitionOf(agentId, partitions))?.projection?.halted() ?? null
      for (const s of states.values()) {
        const halt = s.projection?.halted() ?? null
        if (halt !== null) return halt
      }
      return null
    },
  }
}
