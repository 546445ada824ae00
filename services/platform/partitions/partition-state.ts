/**
 * What a replica holds for each partition it has taken (partitioned-views.ts): its views, its projection
 * and the fiber catching it up, the scope its work runs in, whether it answers, how far it is known
 * complete, and where its snapshot stands. Every part of the partitioned views reads and updates these
 * in place, from the one map of the partitions taken.
 */
import type { Deferred, Fiber, Scope } from "effect"
import type { Projection } from "../log/projection.ts"
import { PartitionViewMap } from "./partition-view-map.ts"
import type { ReadSnapshot } from "./snapshots.ts"

export interface PartitionState {
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

/** The partitions taken, by number. */
export type PartitionStates = Map<number, PartitionState>

/** A snapshot being read for a partition the replica expects to take (null: none, or one that does not decode). */
export type Prefetch = Deferred.Deferred<ReadSnapshot | null>

/** A partition just taken: nothing applied, no snapshot; `undecodable` is told of a snapshot line that does not decode. */
export const newPartitionState = (
  partition: number,
  scope: Scope.Closeable,
  now: number,
  undecodable: (state: PartitionState) => (agentId: string, reason: string) => void,
): PartitionState => {
  const state: PartitionState = {
    partition,
    views: new PartitionViewMap((agentId, reason) => undecodable(state)(agentId, reason)),
    scope,
    projection: null,
    ready: false,
    completeTo: 0,
    fiber: null,
    snapshotSeq: 0,
    snapshotAt: now,
    forgotten: false,
    tainted: false,
    rebuilding: false,
    pending: 0,
    snapshotWrittenAt: 0,
    snapshotBytes: 0,
  }
  return state
}

/** How far the partition is known complete: its last applied record, what the tracker proved, or just before a halt. */
export const appliedOf = (state: PartitionState) => {
  const halt = state.projection?.halted() ?? null
  if (halt !== null) return halt.seq - 1
  return Math.max(state.projection?.appliedSeq() ?? 0, state.completeTo)
}
