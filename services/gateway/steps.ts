/**
 * An agent's steps: beginning one, setting its focus, referencing entries (by id, or by quotes of their
 * text, quotes.ts), ending it. Each is a guarded write on the agent's step subject; entries a reference
 * names that the view holds neither in working nor in cues are looked up in the log (long-term).
 */
import { nuid } from "@nats-io/nuid"
import { Effect, HashMap } from "effect"
import type { RequestOf, ResponseOf } from "../../contracts/api.ts"
import { ValidationError } from "../../contracts/errors.ts"
import { agentStepSubject } from "../../contracts/subjects.ts"
import { decideBeginStep, decideEndStep, decideFocus, decideReference } from "../../domain/decide.ts"
import type { makeQuoteResolver } from "./quotes.ts"
import type { Writes } from "./writes.ts"

export const makeSteps = (
  resolveQuotes: Effect.Success<typeof makeQuoteResolver>,
  { write, knownView, storedAnswer }: Writes,
) => {
  const beginStep = Effect.fn("Gateway.beginStep")((agentId: string, request: RequestOf<"beginStep">) => {
    const stepId = request.stepId ?? request.requestId ?? nuid.next()
    return write(
      agentId,
      "beginStep",
      request,
      agentStepSubject(agentId),
      (view, s) => decideBeginStep(view, request, s, stepId),
      // Beginning the step that is already open answers with the step as it began.
      ({ view, seq, recorded }): ResponseOf<"beginStep"> => ({
        stepId,
        seq: recorded ? seq : (view.step?.startedSeq ?? seq),
      }),
    )
  })

  const setFocus = Effect.fn("Gateway.setFocus")((agentId: string, request: RequestOf<"setFocus">) =>
    write(
      agentId,
      "setFocus",
      request,
      agentStepSubject(agentId),
      (view, s) => decideFocus(view, request, s),
      ({ decided, seq }): ResponseOf<"setFocus"> => ({ transition: decided.transition, seq }),
    ),
  )

  const referenceEntries = Effect.fn("Gateway.referenceEntries")(function* (
    agentId: string,
    request: RequestOf<"referenceEntries">,
  ) {
    const resolved = request.quotes
      ? yield* resolveQuotes(yield* knownView(agentId), request.quotes).pipe(
          Effect.map((ids) => ({ ids })),
          // A retry of a reference already stored is answered as it was, whether or not its quotes can be looked
          // for at this moment.
          Effect.catch((error) =>
            Effect.flatMap(storedAnswer(agentId, "referenceEntries", request), (earlier) =>
              earlier === null ? Effect.fail(error) : Effect.succeed({ earlier }),
            ),
          ),
        )
      : { ids: [] }
    if ("earlier" in resolved) return resolved.earlier
    const quoted = resolved.ids
    const unresolved = (request.quotes ?? []).length > 0 && quoted.length === 0
    if (unresolved && (request.entryIds ?? []).length === 0) {
      return yield* Effect.fail(ValidationError.one("quotes", "no entry of this agent contains the quoted text"))
    }
    const merged = { ...request, entryIds: [...(request.entryIds ?? []), ...quoted] }
    return yield* write(
      agentId,
      "referenceEntries",
      request,
      agentStepSubject(agentId),
      (view, s, known) => decideReference(view, merged, s, known),
      ({ decided, seq }): ResponseOf<"referenceEntries"> => ({ entryIds: decided.entryIds, seq }),
      // Entries neither in working nor cues may be in long-term: the log says.
      (view) => merged.entryIds.filter((id) => !HashMap.has(view.entries, id) && !HashMap.has(view.cues, id)),
    )
  })

  const endStep = Effect.fn("Gateway.endStep")((agentId: string, request: RequestOf<"endStep">) =>
    write(
      agentId,
      "endStep",
      request,
      agentStepSubject(agentId),
      (view, s) => decideEndStep(view, request, s),
      ({ decided, seq }): ResponseOf<"endStep"> => ({ stepId: decided.stepId, seq }),
    ),
  )

  return { beginStep, setFocus, referenceEntries, endStep }
}
