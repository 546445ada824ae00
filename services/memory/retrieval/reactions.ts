/**
 * What the log asks of retrieval for an agent this replica answers for: a cue the agent references in its
 * step is promoted to a native working entry; a long-term entry it references by id is rehydrated and
 * promoted (explicit reference); the cues a step did not use are dropped when it ends; a task transition
 * during an open step recalls for the new task. Each is an event; the long-term record is never changed.
 */
import { Clock, Effect, HashMap, Option } from "effect"
import type { WorkingEntry } from "../../../contracts/entry.ts"
import type { EventOf } from "../../../contracts/events.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import { decideCueDrops, decideExplicitRehydration, type Recalled } from "../../../domain/cue-decide.ts"
import { recalledMeta } from "../../../domain/cue-plan.ts"
import { accept } from "../../../domain/decision.ts"
import { isLongTerm } from "../../../domain/entry-standing.ts"
import type { CommandHandler } from "../../platform/log/command-handler.ts"
import { readEntryFacts } from "../../platform/log/entry-facts.ts"
import type { EventLogShape } from "../../platform/log/event-log.ts"
import type { SubstrateReaderShape } from "../../platform/substrate-reader.ts"
import type { OpenStepMemo } from "../../platform/views/open-step-memo.ts"
import { recalledOfCue } from "./cue-forms.ts"
import type { CueRecall, RecalledCues } from "./cue-recall.ts"
import { type CueWrites, decided, notHeldInFull } from "./cue-writes.ts"
import type { React } from "./partition-hooks.ts"

export interface ReactionsDependencies {
  readonly log: EventLogShape
  readonly substrate: SubstrateReaderShape
  readonly commands: CommandHandler
  readonly writes: CueWrites
  readonly clock: Clock.Clock
  readonly recallCues: CueRecall["recallCues"]
  readonly recalledSteps: OpenStepMemo<RecalledCues>
}

export const makeReactions = ({
  log,
  substrate,
  commands,
  writes,
  clock,
  recallCues,
  recalledSteps,
}: ReactionsDependencies): React => {
  const cueOf = (view: AgentView, id: string) => Option.getOrUndefined(HashMap.get(view.cues, id))

  /**
   * What a used cue is promoted with: a cue recalled as its extract alone gets its raw text back from the
   * substrate; null when the substrate no longer has the entry (forgotten meanwhile): nothing to promote.
   */
  const fullestOfCue = (agentId: string, id: string, cue: WorkingEntry) =>
    Effect.gen(function* () {
      const recalled = recalledOfCue(cue)
      if (recalled.form !== "keyPoints") return recalled
      const raw = yield* substrate.get(agentId, id)
      if (raw === null) return null
      const keyPoints = { text: recalled.text, tokens: recalled.tokens }
      return { ...recalledMeta(cue), form: "raw", text: raw.content, tokens: raw.tokens, keyPoints } satisfies Recalled
    })

  /** Promotes a referenced cue; rehydrates and promotes a referenced long-term entry. */
  const referenced = (after: AgentView, event: EventOf<"EntriesReferenced">) =>
    Effect.forEach(
      event.entryIds,
      (id) =>
        Effect.gen(function* () {
          const cue = cueOf(after, id)
          if (cue) {
            const recalled = yield* fullestOfCue(after.config.id, id, cue)
            if (recalled === null) return
            return yield* writes.promote(after, event.stepId, id, "similarity", recalled, event.stepId)
          }
          if (HashMap.has(after.entries, id)) return
          // Whether the entry is in long-term is the log's word (its subject), not the view's.
          const known = yield* readEntryFacts(log, after.config.id, [id]).pipe(Effect.orDie)
          if (!isLongTerm(known, id)) return
          // Explicit reference to a long-term entry: rehydrate it, and since it is used, make it native.
          const raw = yield* substrate.get(after.config.id, id)
          if (raw === null) return
          const recalled: Recalled = {
            ...recalledMeta(raw),
            form: "raw",
            text: raw.content,
            tokens: raw.tokens,
          }
          const stamp = { at: yield* Clock.currentTimeMillis, causationId: event.eventId }
          const rehydrated = yield* commands
            .handle({
              agentId: after.config.id,
              operation: "CueRehydrated",
              lookUp: () => [id],
              decide: (current, facts) => {
                if (!notHeldInFull(id)(current) || HashMap.has(current.cues, id)) return accept(null)
                const rehydration = decideExplicitRehydration(
                  current,
                  event.stepId,
                  id,
                  recalled,
                  raw.correlationId,
                  stamp,
                  facts,
                )
                // The step may have ended, or the entry left long-term, meanwhile: nothing to rehydrate.
                return rehydration.ok ? rehydration : accept(null)
              },
              reply: (outcome) => outcome.recorded,
            })
            .pipe(Effect.orDie)
          if (!rehydrated) return
          yield* writes.promote(after, event.stepId, id, "explicit-reference", recalled, event.stepId)
        }),
      { discard: true },
    )

  return (before, after, event) => {
    switch (event._tag) {
      case "EntriesReferenced":
        return referenced(after, event)
      case "StepEnded": {
        if (before === undefined) return Effect.void
        return decided(
          decideCueDrops(before, event.stepId, { at: clock.currentTimeMillisUnsafe(), causationId: event.eventId }),
        ).pipe(
          Effect.flatMap((drops) => (drops === null ? Effect.void : writes.drop(before.config.id, drops))),
          Effect.orDie,
        )
      }
      case "FocusChanged":
        if (!event.transition || after.step === null) return Effect.void
        return recallCues(after, "task-transition").pipe(
          Effect.tap((r) => Effect.sync(() => recalledSteps.set(after.config.id, after.step!.stepId, r))),
          Effect.asVoid,
          Effect.orDie,
        )
      default:
        return Effect.void
    }
  }
}
