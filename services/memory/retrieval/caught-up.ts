/**
 * Reads at a position of the log: a request naming `afterSeq` is answered once both tiers of the agent's
 * partition (its views and its long-term records) have applied it, or refused with NotCaughtUp within
 * READ_WAIT (inside one SDK attempt).
 */
import { Effect } from "effect"
import { NotCaughtUp } from "../../../contracts/errors.ts"
import { partitionOf } from "../../../contracts/partitions.ts"
import type { EventLogShape } from "../../platform/log/event-log.ts"
import { knownView } from "../../platform/log/known-view.ts"
import { READ_WAIT } from "../../platform/log/projection.ts"
import type { PartitionedViews } from "../../platform/partitions/partitioned-views.ts"
import type { LongTermShape } from "../longterm/longterm.ts"

export interface CaughtUpDependencies {
  readonly views: PartitionedViews
  readonly longTerm: LongTermShape
  readonly log: Pick<EventLogShape, "lastSeq">
}

export const makeCaughtUpReads = ({ views, longTerm, log }: CaughtUpDependencies) => {
  const projection = views.projection

  /** Both tiers have applied `afterSeq`, or the read is told NotCaughtUp within READ_WAIT. */
  const caughtUpTo = (afterSeq: number, agentId: string) =>
    Effect.all([projection.waitFor(afterSeq, READ_WAIT, agentId), longTerm.waitFor(afterSeq, agentId)], {
      concurrency: 2,
      discard: true,
    }).pipe(
      Effect.timeoutOrElse({
        duration: READ_WAIT,
        orElse: () =>
          Effect.fail(
            new NotCaughtUp({
              afterSeq,
              appliedSeq: Math.min(
                projection.appliedSeq(agentId),
                longTerm.partitions().get(partitionOf(agentId))?.storedSeq() ?? 0,
              ),
            }),
          ),
      }),
    )

  /** The agent's view once both tiers have applied `afterSeq` (when given); known-view.ts when not held. */
  const viewAfter = Effect.fnUntraced(function* (agentId: string, afterSeq?: number) {
    if (afterSeq !== undefined) yield* caughtUpTo(afterSeq, agentId)
    return yield* knownView({ get: views.get, waitFor: projection.waitFor }, log, agentId)
  })

  return { caughtUpTo, viewAfter }
}

export type CaughtUpReads = ReturnType<typeof makeCaughtUpReads>
