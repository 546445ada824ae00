/**
 * Deciders: given an agent's view and a validated request, the event to
 * record or the typed error that refuses it. Pure: ids and times come in
 * the stamp, token counts from the deterministic tokenizer.
 */
import { HashMap } from "effect"
import {
  type AgentConfig,
  DEFAULT_ENCODING,
  DEFAULT_HYPERFOCUS_FACTOR,
  MAX_BUDGET,
  ROLE_DEFAULT_BUDGETS,
} from "../contracts/agent.ts"
import { MAX_CONTENT_BYTES, type RequestOf } from "../contracts/api.ts"
import { AgentAlreadyRegistered, InvalidState, UnknownEntries, ValidationError } from "../contracts/errors.ts"
import type { EventOf } from "../contracts/events.ts"
import type { Focus } from "../contracts/focus.ts"
import { type AgentView, baseBudget, recallOf } from "./agent-view.ts"
import { type BuiltContext, contextOfView, effectiveBudget } from "./context-builder.ts"
import { accept, type Decision, envelope, refuse, type Stamp } from "./decision.ts"
import { type EntryFacts, isLongTerm, NO_ENTRY_FACTS } from "./entry-standing.ts"
import { blockTokens } from "./render.ts"

export type { Decision, DecisionError, Stamp } from "./decision.ts"

export const requestedConfig = (
  agentId: string,
  request: RequestOf<"registerAgent">,
): AgentConfig | ValidationError => {
  const budget = request.budget ?? (request.role === "custom" ? undefined : ROLE_DEFAULT_BUDGETS[request.role])
  if (budget === undefined) return ValidationError.one("budget", "is required for the custom role")
  return {
    id: agentId,
    role: request.role,
    budget,
    encoding: request.encoding ?? DEFAULT_ENCODING,
    ...(request.fade !== undefined ? { fade: request.fade } : {}),
    ...(request.relevance !== undefined ? { relevance: request.relevance } : {}),
  }
}

const sameConfig = (a: AgentConfig, b: AgentConfig) =>
  a.id === b.id &&
  a.role === b.role &&
  a.budget === b.budget &&
  a.encoding === b.encoding &&
  JSON.stringify(a.fade ?? null) === JSON.stringify(b.fade ?? null) &&
  JSON.stringify(a.relevance ?? null) === JSON.stringify(b.relevance ?? null)

/**
 * Registering an agent that exists with the same configuration is accepted
 * with no new event (null): registration is idempotent.
 */
export const decideRegister = (
  view: AgentView | undefined,
  request: RequestOf<"registerAgent">,
  stamp: Stamp,
): Decision<EventOf<"AgentRegistered"> | null> => {
  const config = requestedConfig(stamp.agentId, request)
  if (config instanceof ValidationError) return refuse(config)
  if (view !== undefined) {
    return sameConfig(view.config, config)
      ? accept(null)
      : refuse(new AgentAlreadyRegistered({ agentId: stamp.agentId }))
  }
  return accept({ _tag: "AgentRegistered", ...envelope(stamp), config })
}

export const decideRetune = (
  view: AgentView,
  request: RequestOf<"retuneBudget">,
  stamp: Stamp,
): Decision<EventOf<"BudgetChanged">> =>
  accept({
    _tag: "BudgetChanged",
    ...envelope(stamp),
    reason: "retune",
    baseBudget: request.budget,
    // During hyperfocus the expanded budget stays unless the new base exceeds it.
    budget: view.hyperfocus ? Math.max(view.budgetInForce, request.budget) : request.budget,
  })

export const decideEnterHyperfocus = (
  view: AgentView,
  request: RequestOf<"enterHyperfocus">,
  stamp: Stamp,
): Decision<EventOf<"BudgetChanged">> => {
  if (view.hyperfocus)
    return refuse(new InvalidState({ field: "hyperfocus", reason: "the agent is already in hyperfocus" }))
  const base = baseBudget(view)
  const budget = request.budget ?? Math.min(MAX_BUDGET, base * DEFAULT_HYPERFOCUS_FACTOR)
  if (budget <= base) return refuse(ValidationError.one("budget", `must exceed the base budget of ${base} tokens`))
  return accept({ _tag: "BudgetChanged", ...envelope(stamp), reason: "hyperfocus-enter", baseBudget: base, budget })
}

export const decideExitHyperfocus = (view: AgentView, stamp: Stamp): Decision<EventOf<"BudgetChanged">> => {
  if (!view.hyperfocus)
    return refuse(new InvalidState({ field: "hyperfocus", reason: "the agent is not in hyperfocus" }))
  const base = baseBudget(view)
  return accept({
    _tag: "BudgetChanged",
    ...envelope(stamp),
    reason: "hyperfocus-exit",
    baseBudget: base,
    budget: base,
  })
}

const utf8Bytes = (text: string) => Buffer.byteLength(text, "utf8")

export const decideRecord = (
  view: AgentView,
  request: RequestOf<"recordEntry">,
  stamp: Stamp,
  entryId: string,
): Decision<EventOf<"EntryRecorded">> => {
  const bytes = utf8Bytes(request.content)
  if (bytes > MAX_CONTENT_BYTES) {
    return refuse(ValidationError.one("content", `is ${bytes} bytes; the limit is ${MAX_CONTENT_BYTES} bytes`))
  }
  if (request.content.trim().length === 0) return refuse(ValidationError.one("content", "must contain visible text"))
  const timestamp = request.timestamp ?? stamp.at
  const tokens = blockTokens({ timestamp, origin: request.origin }, "raw", request.content, view.config.encoding)
  return accept({
    _tag: "EntryRecorded",
    ...envelope(stamp),
    entryId,
    timestamp,
    origin: request.origin,
    content: request.content,
    tags: Array.from(new Set(request.tags ?? [])),
    moodSnapshot: request.mood ?? null,
    emotionalWeight: request.emotionalWeight ?? 0,
    tokens,
  })
}

/**
 * The first field in which a record request differs from the entry its
 * request id first recorded (null: the same request). Fields the request
 * leaves out take the values the first record gave them, except the
 * timestamp, which defaults to the time of recording.
 */
export const recordConflict = (request: RequestOf<"recordEntry">, stored: EventOf<"EntryRecorded">): string | null => {
  if (request.content !== stored.content) return "content"
  if (request.origin !== stored.origin) return "origin"
  if (request.timestamp !== undefined && request.timestamp !== stored.timestamp) return "timestamp"
  if ((request.correlationId ?? null) !== stored.correlationId) return "correlationId"
  const tags = Array.from(new Set(request.tags ?? []))
  if (tags.length !== stored.tags.length || tags.some((t, i) => t !== stored.tags[i])) return "tags"
  const mood = request.mood ?? null
  if (
    JSON.stringify(mood && { valence: mood.valence, arousal: mood.arousal }) !==
    JSON.stringify(
      stored.moodSnapshot && { valence: stored.moodSnapshot.valence, arousal: stored.moodSnapshot.arousal },
    )
  )
    return "mood"
  if ((request.emotionalWeight ?? 0) !== stored.emotionalWeight) return "emotionalWeight"
  return null
}

export const decideBeginStep = (
  view: AgentView,
  request: RequestOf<"beginStep">,
  stamp: Stamp,
  stepId: string,
): Decision<EventOf<"StepStarted"> | null> => {
  if (view.step !== null) {
    // Beginning the step that is already open is a retry: nothing new to record.
    if (view.step.stepId === stepId) return accept(null)
    return refuse(
      new InvalidState({ field: "stepId", reason: `step '${view.step.stepId}' is still open; end it first` }),
    )
  }
  return accept({ _tag: "StepStarted", ...envelope(stamp), stepId, focus: request.focus ?? null })
}

/**
 * A new task replaces the whole focus (a task transition); a subgoal or
 * query alone refines the current task.
 */
export const decideFocus = (
  view: AgentView,
  request: RequestOf<"setFocus">,
  stamp: Stamp,
): Decision<EventOf<"FocusChanged">> => {
  const previous = view.focus
  const transition = request.focus.task !== undefined && request.focus.task !== previous?.task
  const focus: Focus = transition || previous === null ? request.focus : { ...previous, ...request.focus }
  return accept({
    _tag: "FocusChanged",
    ...envelope(stamp),
    focus,
    taskKind: request.taskKind ?? (transition ? null : view.taskKind),
    transition,
  })
}

const openStep = (view: AgentView, stepId: string): InvalidState | null =>
  view.step === null
    ? new InvalidState({ field: "stepId", reason: `no step is open (asked for '${stepId}')` })
    : view.step.stepId !== stepId
      ? new InvalidState({ field: "stepId", reason: `the open step is '${view.step.stepId}', not '${stepId}'` })
      : null

/**
 * A reference names entries the agent holds: working entries and cues of
 * the view, or entries the log says are in long-term (`known`: what the
 * service read of the entries the view does not hold).
 */
export const decideReference = (
  view: AgentView,
  request: RequestOf<"referenceEntries">,
  stamp: Stamp,
  known: EntryFacts = NO_ENTRY_FACTS,
): Decision<EventOf<"EntriesReferenced">> => {
  const ids = Array.from(new Set(request.entryIds ?? []))
  if (ids.length === 0) return refuse(ValidationError.one("entryIds", "name at least one entry, by id or by a quote"))
  const notOpen = openStep(view, request.stepId)
  if (notOpen) return refuse(notOpen)
  const unknown = ids.filter(
    (id) => !HashMap.has(view.entries, id) && !HashMap.has(view.cues, id) && !isLongTerm(known, id),
  )
  if (unknown.length > 0) return refuse(new UnknownEntries({ entryIds: unknown }))
  return accept({ _tag: "EntriesReferenced", ...envelope(stamp), stepId: request.stepId, entryIds: ids })
}

export const decideEndStep = (
  view: AgentView,
  request: RequestOf<"endStep">,
  stamp: Stamp,
): Decision<EventOf<"StepEnded">> => {
  const notOpen = openStep(view, request.stepId)
  if (notOpen) return refuse(notOpen)
  return accept({ _tag: "StepEnded", ...envelope(stamp), stepId: request.stepId })
}

/** A context build: the context served, and the EntriesRead event that records what it served. */
export interface ReadDecision {
  readonly event: EventOf<"EntriesRead">
  readonly built: BuiltContext
}

/**
 * Builds the context on the view and records the read. Reference counts are
 * folded from the event, so the read depends on the view it was built on:
 * it is appended with the step subject's sequence, and rebuilt when another
 * write to the step subject came first.
 */
export const decideRead = (
  view: AgentView,
  request: RequestOf<"buildContext">,
  stamp: Stamp,
): Decision<ReadDecision> => {
  if (request.stepId !== undefined && view.step?.stepId !== request.stepId) {
    return refuse(new InvalidState({ field: "stepId", reason: `step '${request.stepId}' is not the open step` }))
  }
  const budget = effectiveBudget(view, request.limit)
  const built = contextOfView(view, {
    ...(request.limit !== undefined ? { limit: request.limit } : {}),
    ...(request.order !== undefined ? { order: request.order } : {}),
  })
  return accept({
    event: {
      _tag: "EntriesRead",
      ...envelope(stamp),
      stepId: view.step?.stepId ?? null,
      budget,
      tokens: built.tokens,
      served: built.items.map((i) => ({ entryId: i.entryId, form: i.form, cue: i.cue })),
    },
    built: { ...built, recall: recallOf(view) },
  })
}
