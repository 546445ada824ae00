/**
 * Deciders of the cue lifecycle: what retrieval records when it recalls for
 * a step (StepRecalled, and CuesRehydrated with its cues), when the agent uses a
 * cue (CuePromoted), when it names a long-term entry outright (CueRehydrated
 * by explicit reference) and when a step ends (one CuesDropped for the cues
 * it did not use). Pure: the service ranks, reads the substrate and chooses
 * each cue's representation, then stamps and appends what these return.
 *
 * Event ids are derived from the step and the entry, so a decision retried
 * (a redelivered event reacted to twice) is stored once.
 */
import { HashMap, HashSet, Option } from "effect"
import type { RepresentationKind } from "../contracts/entry.ts"
import { InvalidState } from "../contracts/errors.ts"
import type { EventOf, MemoryEvent } from "../contracts/events.ts"
import { type AgentView, evolve } from "./agent-view.ts"
import { contextOfView } from "./context-builder.ts"
import { accept, type Decision, envelope, refuse } from "./decision.ts"
import { type EntryFacts, isLongTerm } from "./entry-standing.ts"

export type Recalled = EventOf<"CueRehydrated">["recalled"]
export type CueTrigger = EventOf<"CueRehydrated">["trigger"]

/** The time of the decision and what caused it; ids are derived per event. */
export interface CueStamp {
  readonly at: number
  /** The event this decision reacts to (null: the step itself). */
  readonly causationId?: string | null
}

export interface PlannedCue {
  readonly entryId: string
  /** The similarity it was recalled with: how the builder ranks it. */
  readonly relevance: number
  /** The correlation id of the entry (its episode), carried by the cue. */
  readonly correlationId: string | null
  readonly recalled: Recalled
}

export interface RecallPlan {
  readonly trigger: CueTrigger
  /** Retrieval's similarity of working entries to the focus. */
  readonly similarities: ReadonlyArray<{ readonly entryId: string; readonly similarity: number }>
  readonly cues: ReadonlyArray<PlannedCue>
}

const stampOf = (
  view: AgentView,
  eventId: string,
  stamp: CueStamp,
  fallbackCause: string | null,
  correlationId: string | null,
) =>
  envelope({
    eventId,
    agentId: view.config.id,
    at: stamp.at,
    causationId: stamp.causationId ?? fallbackCause,
    correlationId,
  })

const notOpen = (view: AgentView, stepId: string): InvalidState | null =>
  view.step?.stepId === stepId
    ? null
    : new InvalidState({ field: "stepId", reason: `step '${stepId}' is not the open step` })

/**
 * The most a recall's event carries of its cues, as their JSON in UTF-8. Sealed, a cue's text takes about
 * 4/3 of its bytes, so an event stays near 350 KB: well inside NATS's default max_payload of 1 MB, with room
 * for a server set lower. A recall at a large budget (hundreds of thousands of tokens) serves more than that,
 * and its cues go in as many events as they need; a single cue (at most one entry's 64 KB and its extract)
 * always fits one.
 */
export const CUES_EVENT_BYTES = 256 * 1024

/** The cues in order, cut into runs of at most CUES_EVENT_BYTES each (a cue larger than that alone). */
const inParts = <C>(cues: ReadonlyArray<C>): C[][] => {
  const parts: C[][] = []
  let part: C[] = []
  let bytes = 0
  for (const cue of cues) {
    const size = Buffer.byteLength(JSON.stringify(cue), "utf8")
    if (part.length > 0 && bytes + size > CUES_EVENT_BYTES) {
      parts.push(part)
      part = []
      bytes = 0
    }
    part.push(cue)
    bytes += size
  }
  if (part.length > 0) parts.push(part)
  return parts
}

/**
 * A recall for the open step: its similarities, then its cues best first, in one event, or in several when
 * they are more than CUES_EVENT_BYTES (none when no cue is served). Cues working already holds are left out,
 * and so are those a context built at the budget in force would not serve.
 */
export const decideRecall = (
  view: AgentView,
  stepId: string,
  plan: RecallPlan,
  stamp: CueStamp,
): Decision<readonly [EventOf<"StepRecalled">, ...ReadonlyArray<EventOf<"CuesRehydrated">>]> => {
  const closed = notOpen(view, stepId)
  if (closed) return refuse(closed)
  const id = view.config.id
  const recalled: EventOf<"StepRecalled"> = {
    _tag: "StepRecalled",
    ...stampOf(view, `${id}:recall:${stepId}:${plan.trigger}:${view.stepSeq}`, stamp, stepId, null),
    stepId,
    trigger: plan.trigger,
    similarities: plan.similarities.map((s) => ({ entryId: s.entryId, similarity: s.similarity })),
  }
  // One recall of each task transition in a step: its position on the step's subject tells them apart (for the
  // similarities as for the cues: the builder ranks by the latest); the part after the first of a recall cut into
  // several events adds its number.
  const cuesOf = (cues: EventOf<"CuesRehydrated">["cues"], part = 0): EventOf<"CuesRehydrated"> => ({
    _tag: "CuesRehydrated",
    ...stampOf(
      view,
      `${id}:cues:${stepId}:${plan.trigger}:${view.stepSeq}${part === 0 ? "" : `:${part}`}`,
      stamp,
      stepId,
      null,
    ),
    stepId,
    trigger: plan.trigger,
    cues,
  })
  const planned = plan.cues
    .filter((cue) => !HashMap.has(view.cues, cue.entryId))
    .map((cue) => ({
      entryId: cue.entryId,
      relevance: cue.relevance,
      correlationId: cue.correlationId,
      recalled: cue.recalled,
    }))
  const served = cuesServed(view, [recalled, cuesOf(planned)])
  const kept = planned.flatMap((cue) => {
    const form = served.get(cue.entryId)
    return form === undefined ? [] : [form === "raw" ? cue : shownShort(cue)]
  })
  return accept([recalled, ...inParts(kept).map((cues, part) => cuesOf(cues, part))])
}

/**
 * The form each cue of `events` is served in by a context built on the view they lead to, at the budget in
 * force (the largest a build may ask). Any cue not served would be appended, applied by every projection and
 * dropped at the step's end without ever being read; a smaller build serves a part of these.
 */
const cuesServed = (view: AgentView, events: ReadonlyArray<MemoryEvent>): ReadonlyMap<string, RepresentationKind> => {
  let next = view
  events.forEach((event, i) => {
    next = evolve(next, event, { seq: view.lastSeq + 1 + i }) ?? next
  })
  return new Map(
    contextOfView(next)
      .items.filter((item) => item.cue)
      .map((item) => [item.entryId, item.form] as const),
  )
}

/**
 * A raw cue the largest build shows by its extract carries the extract alone: builds asking for less room
 * show it so too (all but rarely: the packer reaches fewer raw texts with less room), and the raw text
 * carried would be sealed, stored and opened by every projection for nothing. A promotion of the cue reads
 * the raw text back from the substrate.
 */
const shownShort = <C extends { readonly recalled: Recalled }>(cue: C): C => {
  const { keyPoints, ...recalled } = cue.recalled
  if (recalled.form !== "raw" || keyPoints === undefined) return cue
  return { ...cue, recalled: { ...recalled, form: "keyPoints", text: keyPoints.text, tokens: keyPoints.tokens } }
}

/**
 * A long-term entry named by the agent in its step comes back as a cue (and
 * is then promoted: it is in use). Whether it is in long-term is what the
 * service read of the entry's subject (`known`).
 */
export const decideExplicitRehydration = (
  view: AgentView,
  stepId: string,
  entryId: string,
  recalled: Recalled,
  correlationId: string | null,
  stamp: CueStamp,
  known: EntryFacts,
): Decision<EventOf<"CueRehydrated">> => {
  const closed = notOpen(view, stepId)
  if (closed) return refuse(closed)
  if (!isLongTerm(known, entryId)) {
    return refuse(new InvalidState({ field: "entryId", reason: `'${entryId}' is not in long-term memory` }))
  }
  return accept({
    _tag: "CueRehydrated",
    ...stampOf(view, `${view.config.id}:cue:${stepId}:${entryId}`, stamp, stepId, correlationId),
    stepId,
    entryId,
    trigger: "explicit-reference",
    relevance: 1,
    recalled,
  })
}

/**
 * A cue (or a warmed-up record) becomes a native working entry. `key` names
 * the occasion (the step, or a warm-up request) so each occasion promotes an
 * entry once.
 */
export const decidePromotion = (
  view: AgentView,
  promotion: {
    readonly stepId: string | null
    readonly entryId: string
    readonly trigger: CueTrigger
    readonly recalled: Recalled
    readonly key: string
  },
  stamp: CueStamp,
): Decision<EventOf<"CuePromoted">> =>
  accept({
    _tag: "CuePromoted",
    ...stampOf(view, `${view.config.id}:promote:${promotion.key}:${promotion.entryId}`, stamp, promotion.stepId, null),
    stepId: promotion.stepId,
    entryId: promotion.entryId,
    trigger: promotion.trigger,
    recalled: promotion.recalled,
  })

/**
 * At the end of a step (`before`: the view just before StepEnded), the cues
 * of that step the agent did not reference are dropped, in one event that
 * names the step and applies to that step only (null: none to drop).
 */
export const decideCueDrops = (
  before: AgentView,
  stepId: string,
  stamp: CueStamp,
): Decision<EventOf<"CuesDropped"> | null> => {
  const step = before.step
  if (step === null || step.stepId !== stepId) return accept(null)
  const dropped = [...HashMap.keys(before.cues)].filter((id) => !HashSet.has(step.referenced, id)).sort()
  if (dropped.length === 0) return accept(null)
  return accept({
    _tag: "CuesDropped",
    ...stampOf(before, `${before.config.id}:drop:${stepId}`, stamp, stepId, null),
    stepId,
    entryIds: dropped,
  })
}

/**
 * The drops still due on `view`, as they are recorded: a cue promoted since
 * the step ended is a native entry now, not a cue to drop (null: none left).
 */
export const dropsStillDue = (drops: EventOf<"CuesDropped">, view: AgentView): EventOf<"CuesDropped"> | null => {
  const due = drops.entryIds.filter((id) => {
    const native = Option.getOrUndefined(HashMap.get(view.entries, id))
    return native === undefined || native.rung >= 2
  })
  return due.length === 0 ? null : { ...drops, entryIds: due }
}
