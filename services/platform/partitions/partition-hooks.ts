/**
 * What a partitioned service keeps beside the views of its partitions (partitioned-views.ts), and the
 * hooks through which it is told as the views change: a partition taken, caught up, answering, lost,
 * each event applied, each record dead-lettered, and how far its own work lags behind the projection.
 */
import type { Effect, Scope } from "effect"
import type { MemoryEvent } from "../../../contracts/events.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import type { LogRecord } from "../log/event-log.ts"
import type { SnapshotState } from "./snapshots.ts"

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
