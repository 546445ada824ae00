/**
 * Recall for a focused step: the hits of both tiers for the step's focus that working does not hold in
 * full and whose similarity clears the threshold come back as cues, best first, in the forms the cues'
 * share of the budget allows; the recall (StepRecalled) and its cues (CuesRehydrated) are events. The
 * first build of a step asks for it (`recall`, answered once per step); a task transition during an open
 * step recalls again.
 */
import { Clock, Effect, HashMap } from "effect"
import type { RequestOf } from "../../../contracts/api.ts"
import { InvalidState } from "../../../contracts/errors.ts"
import { focusText } from "../../../contracts/focus.ts"
import { type AgentView, currentFocus } from "../../../domain/agent-view.ts"
import { type CueTrigger, decideRecall, type Recalled } from "../../../domain/cue-decide.ts"
import { focusTerms } from "../../../domain/key-points.ts"
import type { SubstrateReaderShape } from "../../platform/substrate-reader.ts"
import type { OpenStepMemo } from "../../platform/views/open-step-memo.ts"
import type { CaughtUpReads } from "./caught-up.ts"
import { planCueSizes, readCues, sizedCue } from "./cue-forms.ts"
import { type CueWrites, decided, stepOpen } from "./cue-writes.ts"
import { type RankedHit, type RankingSources, rankBothTiers } from "./rank.ts"
import type { RetrievalSettingsShape } from "./settings.ts"

/** What a recall recorded: how many cues, and the sequence of its last event. */
export interface RecalledCues {
  readonly cues: number
  readonly seq: number
}

export interface CueRecallDependencies {
  readonly settings: RetrievalSettingsShape
  readonly sources: RankingSources
  readonly substrate: SubstrateReaderShape
  readonly writes: CueWrites
  /** The recall each agent's open step already had. */
  readonly recalledSteps: OpenStepMemo<RecalledCues>
  readonly viewAfter: CaughtUpReads["viewAfter"]
}

export const makeCueRecall = ({
  settings,
  sources,
  substrate,
  writes,
  recalledSteps,
  viewAfter,
}: CueRecallDependencies) => {
  /** Recalls for the open step's focus and records each cue as an event. */
  const recallCues = Effect.fn("Retrieval.recallCues")(function* (view: AgentView, trigger: CueTrigger) {
    const step = view.step!
    const query = focusText(currentFocus(view))
    const hits = yield* rankBothTiers(view, query, { limit: settings.recallDepth }, sources)
    // Cues bring back what working does not hold in full: long-term records and summarised entries.
    const eligible = hits.filter(
      (hit) =>
        !(hit.tier === "working" && hit.working!.rung < 2) &&
        !HashMap.has(view.cues, hit.entryId) &&
        (hit.dense >= settings.cueThreshold || hit.lexical >= settings.cueThreshold),
    )
    const planned = planCueSizes(eligible, Math.floor(view.budgetInForce * settings.cueBudgetShare))
    const similarities = hits
      .filter((h) => h.tier === "working")
      .map((h) => ({ entryId: h.entryId, similarity: h.similarity }))
    const at = yield* Clock.currentTimeMillis
    const decide = (cues: ReadonlyArray<{ readonly hit: RankedHit; readonly recalled: Recalled | null }>) =>
      decided(
        decideRecall(
          view,
          step.stepId,
          {
            trigger,
            similarities,
            cues: cues.flatMap(({ hit, recalled }) =>
              recalled === null
                ? []
                : [
                    {
                      entryId: hit.entryId,
                      relevance: hit.similarity,
                      correlationId: (hit.working ?? hit.record!).correlationId,
                      recalled,
                    },
                  ],
            ),
          },
          { at },
        ),
      )
    // Only the cues a build would serve are read and extracted for the focus: chosen by their sizes, then again
    // with the sizes of those read (an extract is often shorter than its bound), until no other would be served.
    const focus = focusTerms(query, (t) => sources.lexical.inverseDocumentFrequency(view.config.id, t))
    const read = new Map<string, { readonly hit: RankedHit; readonly recalled: Recalled } | null>()
    // Each round reads at least one cue more, so it ends within as many rounds as cues planned (two, mostly).
    for (let round = 0; round < planned.length; round++) {
      const [, ...served] = yield* decide(
        planned.map((p) =>
          read.has(p.hit.entryId)
            ? (read.get(p.hit.entryId) ?? { hit: p.hit, recalled: null })
            : { hit: p.hit, recalled: sizedCue(p) },
        ),
      )
      const ids = new Set(served.flatMap((part) => part.cues.map((cue) => cue.entryId)))
      const unread = planned.filter((p) => ids.has(p.hit.entryId) && !read.has(p.hit.entryId))
      if (unread.length === 0) break
      const cues = yield* readCues(substrate, sources.lexical, view, unread, focus)
      for (const p of unread) read.set(p.hit.entryId, null)
      for (const cue of cues) read.set(cue.hit.entryId, cue)
    }
    const events = yield* decide(planned.flatMap((p) => read.get(p.hit.entryId) ?? []))
    // The recall's cues in one event on the step's subject (more for a very large budget): applied only while
    // the step is open, and, cue by cue, while working does not hold the entry in full and it was not
    // forgotten since (domain/agent-view.ts).
    let last = 0
    let cues = 0
    for (const event of events) {
      last = (yield* writes.appendWhile(view.config.id, event, stepOpen(step.stepId)).pipe(Effect.orDie)).seq
      if (event._tag === "CuesRehydrated") cues += event.cues.length
    }
    return { cues, seq: last }
  })

  const recall = Effect.fn("Retrieval.recall")(function* (agentId: string, request: RequestOf<"recall">) {
    const view = yield* viewAfter(agentId, request.afterSeq)
    if (view.step?.stepId !== request.stepId) {
      return yield* Effect.fail(
        new InvalidState({ field: "stepId", reason: `step '${request.stepId}' is not the open step` }),
      )
    }
    const done = recalledSteps.get(agentId, request.stepId)
    if (done) return done
    const result = yield* recallCues(view, "similarity").pipe(Effect.orDie)
    recalledSteps.set(agentId, request.stepId, result)
    return result
  })

  return { recallCues, recall }
}

export type CueRecall = ReturnType<typeof makeCueRecall>
