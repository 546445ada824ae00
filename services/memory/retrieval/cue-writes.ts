/**
 * How retrieval writes cue events: each decided on this service's views and appended through its command
 * handler only while what it was decided on still holds (the step is open, working does not hold the
 * entry in full), retaken after a lost race. Cues promoted and dropped are counted.
 */
import { type Clock, Effect, HashMap, Option } from "effect"
import { type EventOf, entryIdOf, type MemoryEvent } from "../../../contracts/events.ts"
import { eventSubject } from "../../../contracts/subjects.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import { type CueTrigger, decidePromotion, dropsStillDue, type Recalled } from "../../../domain/cue-decide.ts"
import { accept, type Decision } from "../../../domain/decision.ts"
import type { CommandHandler } from "../../platform/log/command-handler.ts"
import type { MetricsShape } from "../../platform/observability/metrics.ts"

export const stepOpen = (stepId: string) => (view: AgentView) => view.step?.stepId === stepId

/** A cue brings back what working does not hold in full: not a native entry below rung 2. */
export const notHeldInFull = (entryId: string) => (view: AgentView) => {
  const native = Option.getOrUndefined(HashMap.get(view.entries, entryId))
  return native === undefined || native.rung >= 2
}

/** The events a cue decider accepted; a refusal here is a defect (the caller checked the step). */
export const decided = <E>(decision: Decision<E>): Effect.Effect<E> =>
  decision.ok ? Effect.succeed(decision.event) : Effect.die(decision.error)

export interface CueWritesDependencies {
  readonly commands: CommandHandler
  readonly metrics: MetricsShape
  readonly clock: Clock.Clock
}

export const makeCueWrites = ({ commands, metrics, clock }: CueWritesDependencies) => {
  /**
   * Appends `event` unless, on the view as it stands, `holds` no longer does; retaken after a lost race. An event
   * on the agent's step subject takes its turn there and is applied before the next one decides.
   */
  const appendWhile = (agentId: string, event: MemoryEvent, holds: (view: AgentView) => boolean) =>
    commands.handle({
      agentId,
      operation: event._tag,
      ...(entryIdOf(event) === null ? { subject: eventSubject(event) } : {}),
      decide: (view) => accept(holds(view) ? event : null),
      reply: (outcome) => {
        if (outcome.recorded && event._tag === "CuePromoted") metrics.cuesPromoted.inc()
        return { seq: outcome.seq }
      },
    })

  /** Makes the entry a native working entry again, with fresh fade tracking, unless working holds it in full. */
  const promote = (
    view: AgentView,
    stepId: string | null,
    entryId: string,
    trigger: CueTrigger,
    recalled: Recalled,
    key: string,
  ) =>
    decided(
      decidePromotion(view, { stepId, entryId, trigger, recalled, key }, { at: clock.currentTimeMillisUnsafe() }),
    ).pipe(
      Effect.flatMap((event) => appendWhile(view.config.id, event, notHeldInFull(entryId))),
      Effect.orDie,
    )

  /** Records a step's drops, less any cue promoted since (native now); retaken after a lost race. */
  const drop = (agentId: string, drops: EventOf<"CuesDropped">) =>
    commands.handle({
      agentId,
      operation: drops._tag,
      decide: (view) => accept(dropsStillDue(drops, view)),
      reply: (outcome) => {
        if (outcome.recorded && !outcome.duplicate && outcome.decided !== null)
          metrics.cuesDropped.inc(outcome.decided.entryIds.length)
      },
    })

  return { appendWhile, promote, drop }
}

export type CueWrites = ReturnType<typeof makeCueWrites>
