/**
 * What a partitioned service shows of itself to those that run it (its entry point, the tests): the
 * views it answers from, the partitions it holds and answers for, and its position on the log. Each
 * service's shape carries these operations, built from its partitioned views by `inspectionOf`; the
 * views themselves stay inside the service.
 */
import type { Effect } from "effect"
import type { NotCaughtUp } from "../../../contracts/errors.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import type { Halt } from "../log/projection.ts"
import type { CatchUp } from "./catch-up.ts"
import type { PartitionedViews } from "./partitioned-views.ts"

export interface PartitionedServiceInspection {
  /** The agent's view, while this replica answers for the agent's partition; undefined otherwise. */
  readonly view: (agentId: string) => AgentView | undefined
  /** The agents whose views this replica answers from now. */
  readonly agents: () => ReadonlyArray<string>
  /** This replica holds the agent's partition and has caught up on it: it may answer for the agent. */
  readonly owns: (agentId: string) => boolean
  /** The partitions that answer now. */
  readonly answeringPartitions: () => ReadonlyArray<number>
  /** The partitions whose lease this replica holds: a lapsed one it may still renew counts, a lost one does not. */
  readonly heldPartitions: () => ReadonlyArray<number>
  /** How each partition this replica took was caught up. */
  readonly catchUps: () => ReadonlyArray<CatchUp>
  /** The least position over every partition this replica holds, 0 for one that does not answer now. */
  readonly appliedSeq: () => number
  /**
   * Completes once the agent's partition has applied `seq` (without an agent: every partition that answers
   * now); fails with NotCaughtUp when the partition does not answer here, stopped before `seq`, or has not
   * reached it within the projection's read wait.
   */
  readonly waitApplied: (seq: number, agentId?: string) => Effect.Effect<void, NotCaughtUp>
  /** Where the agent's partition stopped (without an agent: the first partition that did), if it did. */
  readonly halted: (agentId?: string) => Halt | null
}

export const inspectionOf = (views: PartitionedViews): PartitionedServiceInspection => ({
  view: (agentId) => views.get(agentId),
  agents: () => [...views.all().keys()],
  owns: (agentId) => views.owns(agentId),
  answeringPartitions: () => views.ready(),
  heldPartitions: () => views.leases.held(),
  catchUps: () => views.catchUps(),
  appliedSeq: () => views.projection.appliedSeq(),
  waitApplied: (seq, agentId) => views.projection.waitFor(seq, undefined, agentId),
  halted: (agentId) => views.projection.halted(agentId),
})
