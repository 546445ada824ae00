/**
 * Registering an agent: once, whoever races. The registration is appended expecting the agent's config
 * subject as it was (empty, or ending in a forgotten agent's tombstone), so two racing registrations
 * store one event; a retry with the same request id is answered as it was first, whatever changed since.
 * A replica whose views cannot catch up at the moment answers NotCaughtUp, and one that loses the race a
 * second time answers Unavailable: both are asked again by the SDKs, and neither calls a registered agent
 * unknown.
 */
import { Effect } from "effect"
import type { AgentConfig } from "../../contracts/agent.ts"
import type { RequestOf, ResponseOf } from "../../contracts/api.ts"
import { Unavailable } from "../../contracts/errors.ts"
import { agentConfigSubject } from "../../contracts/subjects.ts"
import { decideRegister } from "../../domain/decide.ts"
import { preloadEncoding } from "../../domain/tokens.ts"
import type { CommandHandler } from "../platform/log/command-handler.ts"
import type { EventLogShape } from "../platform/log/event-log.ts"
import type { PartitionedViews } from "../platform/partitions/partitioned-views.ts"
import type { Writes } from "./writes.ts"

export const makeRegistration = (
  log: EventLogShape,
  views: PartitionedViews,
  commands: CommandHandler,
  { stamp, catchUp }: Writes,
) => {
  const registerAgent = Effect.fn("Gateway.registerAgent")(function* (
    agentId: string,
    request: RequestOf<"registerAgent">,
  ) {
    const s = stamp(agentId, "registerAgent", request)
    /** The sequence a new registration must follow: 0, or a forgotten agent's tombstone. */
    const registrationBase = log.lastOnSubject(agentConfigSubject(agentId)).pipe(
      Effect.map((last) => {
        if (last === null) return 0
        const decoded = log.decode(last.data)
        return decoded.ok && decoded.event._tag === "AgentForgotten" ? last.seq : 0
      }),
    )
    const appendRegistration = Effect.fnUntraced(function* (base: number) {
      const current = views.get(agentId)
      // A registration retried is answered as it was, whatever changed since.
      const earlier =
        current !== undefined && request.requestId !== undefined
          ? yield* commands.answered(agentId, current.registeredSeq, "registerAgent", request.requestId, request)
          : null
      if (earlier !== null) return earlier.reply as { config: AgentConfig; budget: number; seq: number }
      const decision = decideRegister(current, request, s)
      if (!decision.ok) return yield* Effect.fail(decision.error)
      if (decision.event === null)
        return { config: current!.config, budget: current!.budgetInForce, seq: current!.registeredSeq }
      preloadEncoding(decision.event.config.encoding)
      // Expecting the subject as it was makes registration happen once, whoever races.
      const appended = yield* log.append(decision.event, { expectLastSubjectSeq: base })
      const registration = {
        config: decision.event.config,
        budget: decision.event.config.budget,
        seq: appended.seq,
      }
      if (request.requestId !== undefined)
        yield* commands.answer(
          agentId,
          appended.seq,
          "registerAgent",
          request.requestId,
          request,
          appended.seq,
          registration,
        )
      return registration
    })
    const result = yield* appendRegistration(0).pipe(
      Effect.catchTag("SequenceConflict", () =>
        Effect.andThen(
          catchUp(agentId),
          Effect.flatMap(registrationBase, (base) => appendRegistration(base)),
        ),
      ),
      // Lost again, to a registration or forget that landed after the catch-up: nothing was stored.
      Effect.catchTag("SequenceConflict", () =>
        Effect.fail(
          new Unavailable({
            reason: `agent '${agentId}' was registered or forgotten meanwhile; nothing was stored, retry with the same requestId`,
          }),
        ),
      ),
    )
    return { agent: result.config, budget: result.budget, seq: result.seq } satisfies ResponseOf<"registerAgent">
  })

  return { registerAgent }
}
