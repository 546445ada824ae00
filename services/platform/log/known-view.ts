/**
 * The view of the agent a request names. When the views do not hold it, they are caught up with the log
 * as it stands and looked in again: the refusal `AgentNotFound` is given only by views that have applied
 * the whole log and still do not know the agent. Views that cannot catch up at this moment (the agent's
 * partition is catching up here, moving away, or its lease is renewing after a stalled event loop) refuse
 * with `NotCaughtUp`, which the SDKs retry: a registered agent is never refused as unknown.
 */
import { type Duration, Effect } from "effect"
import { AgentNotFound, type NotCaughtUp, type Unavailable } from "../../../contracts/errors.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import type { EventLogShape } from "./event-log.ts"
import { READ_WAIT } from "./projection.ts"

/** Views that can be read and waited for; a partitioned source waits in the agent's partition only. */
export interface WaitableViews {
  readonly get: (agentId: string) => AgentView | undefined
  readonly waitFor: (seq: number, timeout?: Duration.Input, agentId?: string) => Effect.Effect<void, NotCaughtUp>
}

/**
 * Waits until the views (the agent's partition, when partitioned) have applied the log as it stands now;
 * NotCaughtUp when they cannot within one SDK attempt (READ_WAIT, as every read's wait): the caller hears the
 * typed answer, not a timeout. What such views lack is never taken for what the log lacks.
 */
export const catchUpWithLog = (
  views: Pick<WaitableViews, "waitFor">,
  log: Pick<EventLogShape, "lastSeq">,
  agentId: string,
): Effect.Effect<void, NotCaughtUp | Unavailable> =>
  Effect.flatMap(log.lastSeq, (end) => views.waitFor(end, READ_WAIT, agentId))

export const knownView = (
  views: WaitableViews,
  log: Pick<EventLogShape, "lastSeq">,
  agentId: string,
): Effect.Effect<AgentView, AgentNotFound | NotCaughtUp | Unavailable> => {
  const view = views.get(agentId)
  if (view !== undefined) return Effect.succeed(view)
  return Effect.gen(function* () {
    yield* catchUpWithLog(views, log, agentId)
    const caughtUp = views.get(agentId)
    if (caughtUp === undefined) return yield* Effect.fail(new AgentNotFound({ agentId }))
    return caughtUp
  })
}
