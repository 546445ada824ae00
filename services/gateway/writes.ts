/**
 * What every gateway write shares: the stamp (event id, time, causation) a request is given, the
 * guarded write through the command handler, the catch-up with the log before a refusal for an agent
 * this replica does not know yet, and the refusal of every write on a partition whose projection
 * stopped at an event newer than this code reads.
 */
import { nuid } from "@nats-io/nuid"
import { type Clock, Effect } from "effect"
import type { OperationName, RequestOf, ResponseOf } from "../../contracts/api.ts"
import { Unavailable } from "../../contracts/errors.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import type { Decision, Stamp } from "../../domain/decide.ts"
import type { EntryFacts } from "../../domain/entry-standing.ts"
import { replyOfEvent } from "../../domain/requests.ts"
import type { CommandHandler, Outcome } from "../platform/log/command-handler.ts"
import type { EventLogShape } from "../platform/log/event-log.ts"
import { catchUpWithLog, knownView as knownViewOf } from "../platform/log/known-view.ts"
import type { PartitionedViews } from "../platform/partitions/partitioned-views.ts"

export const makeWrites = (
  log: EventLogShape,
  views: PartitionedViews,
  commands: CommandHandler,
  clock: Clock.Clock,
) => {
  /** Waits until the agent's partition has applied the log as it stands now, else NotCaughtUp (known-view.ts). */
  const catchUp = (agentId: string) => catchUpWithLog(views.projection, log, agentId)

  const stamp = (
    agentId: string,
    operation: OperationName,
    request: { readonly requestId?: string },
    correlationId: string | null = null,
  ): Stamp => {
    const requestId = request.requestId ?? nuid.next()
    return {
      eventId: `${agentId}:${operation}:${requestId}`,
      agentId,
      at: clock.currentTimeMillisUnsafe(),
      causationId: requestId,
      correlationId,
    }
  }

  /** A gateway write: decided on the gateway's view, guarded on its subject, kept in the request ledger. */
  const write = <O extends OperationName, E extends MemoryEvent | null, A>(
    agentId: string,
    operation: O,
    request: RequestOf<O> & { readonly requestId?: string },
    subject: string,
    decide: (view: AgentView, s: Stamp, known: EntryFacts) => Decision<E>,
    reply: (outcome: Outcome<E>) => A,
    lookUp?: (view: AgentView) => Iterable<string>,
  ) => {
    const s = stamp(agentId, operation, request)
    return commands.handle<E, A>({
      agentId,
      operation,
      requestId: request.requestId,
      request,
      eventId: s.eventId,
      subject,
      ...(lookUp ? { lookUp } : {}),
      decide: (view, known) => decide(view, s, known),
      reply,
      // An attempt that stored its event and died before answering: the reply follows from the event.
      fromEvent: (event, seq, view) => replyOfEvent(view, event, seq) as A,
    })
  }

  /** The agent's view, caught up with the log first when this replica does not know the agent yet (known-view.ts). */
  const knownView = (agentId: string) =>
    knownViewOf({ get: views.get, waitFor: views.projection.waitFor }, log, agentId)

  /**
   * A partition whose projection stopped at an event newer than this code reads has a stale view: a
   * write decided on it could break what that event changed, so every write for its agents is refused
   * until a gateway that reads it (an upgraded one) takes the partition.
   */
  const decidingOnCurrentLog =
    <Rq, A, E, R>(handler: (agentId: string, request: Rq) => Effect.Effect<A, E, R>) =>
    (agentId: string, request: Rq): Effect.Effect<A, E | Unavailable, R> =>
      Effect.suspend((): Effect.Effect<A, E | Unavailable, R> => {
        const halt = views.projection.halted(agentId)
        if (halt === null) return handler(agentId, request)
        return Effect.fail(
          new Unavailable({
            reason: `this gateway stopped before seq ${halt.seq} of the log: ${halt.error.eventType} v${halt.error.version} is newer than it reads (up to v${halt.error.understood}); upgrade the gateway`,
          }),
        )
      })

  /** The answer stored for the request's id, null when there is none (or the request has no id). */
  const storedAnswer = <O extends OperationName>(
    agentId: string,
    operation: O,
    request: RequestOf<O> & { readonly requestId?: string },
  ) => {
    const requestId = request.requestId
    if (requestId === undefined) return Effect.succeed(null)
    return Effect.flatMap(knownView(agentId), (view) =>
      Effect.map(commands.answered(agentId, view.registeredSeq, operation, requestId, request), (earlier) =>
        earlier === null ? null : (earlier.reply as ResponseOf<O>),
      ),
    )
  }

  return { catchUp, stamp, write, knownView, storedAnswer, decidingOnCurrentLog }
}

export type Writes = ReturnType<typeof makeWrites>
