/**
 * The request ledger's records: what a write with a request id was answered,
 * kept so that a retry of any age gets the first answer and writes nothing.
 *
 * A record is first a reservation (`pending`, written before the decision),
 * then the answer (`done`, written once the event is stored and before the
 * reply leaves). Every field of a `done` record follows from the stored
 * event and the view it was decided on, so the ledger is a projection of
 * the log; it holds no entry content (a build's text is rendered again from
 * what working holds, never stored; a request's body is kept as its digest).
 */
import { createHash } from "node:crypto"
import { HashMap, Option } from "effect"
import type { WorkingEntry } from "../contracts/entry.ts"
import type { EventOf, MemoryEvent } from "../contracts/events.ts"
import type { AgentView } from "./agent-view.ts"
import { evolve, formText, formTokens, recallOf } from "./agent-view.ts"
import type { BuiltContext, ContextItem } from "./context-builder.ts"
import { candidatesOf } from "./context-builder.ts"
import { dayOf, renderBlock, renderDateLine } from "./render.ts"

export interface PendingRequest {
  readonly state: "pending"
  readonly operation: string
  /** Digest of the request body's canonical form (without its request id): a retry must repeat it. */
  readonly body: string
  readonly eventId: string
  /** Where the event goes, and the view's position when the request was reserved: where to look for it. */
  readonly subject: string
  readonly afterSeq: number
  readonly at: number
}

export interface SettledRequest {
  readonly state: "done"
  readonly operation: string
  readonly body: string
  readonly seq: number
  /** The reply, without entry content. */
  readonly reply: unknown
}

export type LedgerRecord = PendingRequest | SettledRequest

/**
 * One key per agent registration, operation and request id: a forgotten
 * agent registered again starts a new ledger; request ids are tokens, so
 * the key is a valid KV key.
 */
export const ledgerKey = (agentId: string, registeredSeq: number, operation: string, requestId: string): string =>
  `${agentId}.${registeredSeq}.${operation}.${requestId}`

/** JSON with sorted keys: two bodies that mean the same thing compare equal. */
export const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`
  }
  return JSON.stringify(value)
}

const canonicalBody = (request: object): string => {
  const { requestId: _requestId, afterSeq: _afterSeq, ...rest } = request as { requestId?: unknown; afterSeq?: unknown }
  return canonicalJson(rest)
}

/**
 * What the ledger keeps of the part of a request that must be the same in a retry (everything but the
 * request id and the read position): a digest, so no entry content is stored beside the sealed log.
 */
export const requestBody = (request: object): string =>
  `sha256:${createHash("sha256").update(canonicalBody(request)).digest("base64url")}`

/** Whether a stored body is this request's: its digest, or its canonical form as versions before stored it. */
export const sameRequestBody = (stored: string, request: object): boolean =>
  stored === requestBody(request) || (!stored.startsWith("sha256:") && stored === canonicalBody(request))

/** What the ledger keeps of a context build's reply: everything but the text. */
export type StoredContext = Omit<BuiltContext, "text"> & { readonly seq: number }

export const storedContext = (built: BuiltContext & { readonly seq: number }): StoredContext => {
  const { text: _text, ...rest } = built
  return rest
}

const heldEntry = (view: AgentView, entryId: string): WorkingEntry | undefined =>
  Option.getOrUndefined(HashMap.get(view.cues, entryId)) ?? Option.getOrUndefined(HashMap.get(view.entries, entryId))

/**
 * The text of a build served again: the stored items rendered from what
 * working holds for them now, in the stored order. An item whose form
 * working no longer holds (faded since, forgotten, a cue of an ended step)
 * is left out of the text; the other fields are the first answer's.
 */
export const replayedContext = (view: AgentView, stored: StoredContext): BuiltContext & { readonly seq: number } => {
  let text = ""
  let day = Number.NaN
  for (const item of stored.items as ReadonlyArray<ContextItem>) {
    const entry = heldEntry(view, item.entryId)
    const body = entry === undefined ? "" : formText(entry, item.form)
    if (body.length === 0) continue
    const d = dayOf(item.timestamp)
    if (d !== day) {
      text += renderDateLine(item.timestamp)
      day = d
    }
    text += renderBlock(item, item.form, body)
  }
  return { ...stored, text }
}

/**
 * The answer to a build whose first attempt stored its read and died before
 * settling it: the served items as working holds them now, at the read's
 * sequence.
 */
export const contextFromRead = (
  view: AgentView,
  event: EventOf<"EntriesRead">,
  seq: number,
): BuiltContext & { readonly seq: number } => {
  const items: ContextItem[] = []
  for (const served of event.served) {
    const entry = heldEntry(view, served.entryId)
    if (entry === undefined) continue
    items.push({
      entryId: entry.id,
      timestamp: entry.timestamp,
      origin: entry.origin,
      rung: entry.rung,
      form: served.form,
      cue: served.cue,
      tokens: formTokens(entry, served.form),
    })
  }
  return replayedContext(view, {
    tokens: event.tokens,
    budget: event.budget,
    items,
    omitted: Math.max(0, candidatesOf(view).length - items.length),
    recall: recallOf(view),
    seq,
  })
}

/** Operations kept in the ledger whose reply follows from their one event. */
export const LEDGERED_OPERATIONS = [
  "retuneBudget",
  "enterHyperfocus",
  "exitHyperfocus",
  "beginStep",
  "setFocus",
  "referenceEntries",
  "endStep",
  "buildContext",
] as const

/**
 * The reply a write was given, from the event it stored and the view that
 * event was applied to (the agent's view just before it): what a retry is
 * answered with when its ledger record was lost, and what rebuilding the
 * ledger from the log writes. Null for an event no write of this kind made.
 */
export const replyOfEvent = (before: AgentView, event: MemoryEvent, seq: number): unknown => {
  switch (event._tag) {
    case "BudgetChanged":
      return {
        baseBudget: event.baseBudget,
        budget: event.budget,
        hyperfocus:
          event.reason === "hyperfocus-enter" ? true : event.reason === "hyperfocus-exit" ? false : before.hyperfocus,
        seq,
      }
    case "StepStarted":
    case "StepEnded":
      return { stepId: event.stepId, seq }
    case "FocusChanged":
      return { transition: event.transition, seq }
    case "EntriesReferenced":
      return { entryIds: event.entryIds, seq }
    case "EntriesRead":
      return storedContext(contextFromRead(before, event, seq))
    default:
      return null
  }
}

/**
 * The ledger as the log says it should be: one settled record for every
 * event a write with a request id stored (event id `<agent>:<operation>:<requestId>`).
 * The request body is not in the log: a rebuilt record has an empty body,
 * and any body retried under it counts as the same request.
 */
export const ledgerFromLog = (
  events: Iterable<{ readonly event: MemoryEvent; readonly seq: number }>,
): Map<string, SettledRequest> => {
  const views = new Map<string, AgentView>()
  const ledger = new Map<string, SettledRequest>()
  const operations = new Set<string>(LEDGERED_OPERATIONS)
  for (const { event, seq } of events) {
    const before = views.get(event.agentId)
    const [agentId, operation, requestId, ...rest] = event.eventId.split(":")
    if (
      before !== undefined &&
      agentId === event.agentId &&
      operation !== undefined &&
      operations.has(operation) &&
      requestId !== undefined &&
      rest.length === 0
    ) {
      const reply = replyOfEvent(before, event, seq)
      const key = ledgerKey(event.agentId, before.registeredSeq, operation, requestId)
      if (reply !== null && !ledger.has(key)) ledger.set(key, { state: "done", operation, body: "", seq, reply })
    }
    const after = evolve(before, event, { seq })
    if (after === undefined) views.delete(event.agentId)
    else views.set(event.agentId, after)
  }
  return ledger
}
