/**
 * What the dashboard shows, folded from the event log with the shared pure functions: each agent's
 * live view (`evolve`, as the working service folds it), its view and built context at any past
 * instant (the fold and the builder call `wm replay` makes: cli/audit/replay.ts), its timeline and
 * one entry's history with the fade score parts each decision recorded. No I/O here.
 *
 * Forget holds here too: an entry's tombstone drops the events held for it, an agent's drops all of
 * the agent's, so the dashboard never shows what the log itself no longer holds.
 */
import { HashMap } from "effect"
import type { WorkingEntry } from "../../contracts/entry.ts"
import { entryIdOf, type MemoryEvent } from "../../contracts/events.ts"
import type { FadeScore } from "../../contracts/fade.ts"
import { type AgentView, baseBudget, entriesByTime, evolve } from "../../domain/agent-view.ts"
import { type BuiltContext, type ContextOptions, contextOfView } from "../../domain/context-builder.ts"
import { DEFAULT_FADE_CONFIG, type FadeConfig, tauFor } from "../../domain/fade-score.ts"
import { trackLongTerm } from "../../domain/long-term-ids.ts"

export interface LoggedEvent {
  readonly seq: number
  readonly subject: string
  readonly event: MemoryEvent
}

/** An instant to replay to: events stamped at or before `at` (epoch ms), and/or up to stream sequence `seq`. */
export interface Cut {
  readonly at?: number
  readonly seq?: number
}

export interface AgentSummary {
  readonly agentId: string
  readonly role: string
  readonly budget: number
  readonly baseBudget: number
  readonly hyperfocus: boolean
  readonly usage: number
  /** The usage threshold in force, as a share of the budget. */
  readonly tau: number
  readonly entriesByRung: { readonly "0": number; readonly "1": number; readonly "2": number }
  readonly cues: number
  readonly longTerm: number
  readonly events: number
  readonly lastSeq: number
  readonly lastEventAt: number
}

/** One line of an agent's timeline. */
export interface TimelineItem {
  readonly seq: number
  readonly at: number
  readonly type: MemoryEvent["_tag"]
  readonly entryId: string | null
  readonly stepId: string | null
  readonly detail: string
}

export interface HistoryItem extends TimelineItem {
  /** The score and its parts, for a fade decision (a rung change or a demotion). */
  readonly score: FadeScore | null
  /** The text the event carries for the entry (recorded content, key points, summary, recalled text). */
  readonly text: string | null
}

export interface EntryCard {
  readonly id: string
  readonly origin: string
  readonly rung: number
  readonly timestamp: number
  /** The text working holds at the entry's rung: raw, key points or summary. */
  readonly text: string
  readonly tokens: number
  readonly tags: ReadonlyArray<string>
  readonly referenceCount: number
  readonly citationCount: number
  readonly cue: boolean
}

export interface AgentPage {
  readonly agent: AgentSummary
  readonly cut: Cut | null
  /** Events of the agent admitted by the cut, of all the agent's events held. */
  readonly applied: number
  readonly range: {
    readonly firstAt: number
    readonly lastAt: number
    readonly firstSeq: number
    readonly lastSeq: number
  }
  /** Each event's stamp, in stream order: the positions of the time slider. */
  readonly instants: ReadonlyArray<{ readonly seq: number; readonly at: number }>
  readonly step: { readonly stepId: string; readonly focus: unknown } | null
  readonly focus: unknown
  readonly entries: { readonly raw: EntryCard[]; readonly keyPoints: EntryCard[]; readonly summary: EntryCard[] }
  readonly cues: EntryCard[]
  readonly context: BuiltContext
}

const clip = (text: string, width = 90) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat
}

const stepIdOf = (event: MemoryEvent): string | null =>
  "stepId" in event && typeof event.stepId === "string" ? event.stepId : null

/** A line saying what the event did. */
export const describeEvent = (event: MemoryEvent): string => {
  switch (event._tag) {
    case "AgentRegistered":
      return `registered as ${event.config.role}, budget ${event.config.budget}`
    case "BudgetChanged":
      return `budget ${event.budget} (${event.reason}; base ${event.baseBudget})`
    case "EntryRecorded":
      return `${event.origin} ${event.tokens} tok: ${clip(event.content)}`
    case "EntriesRead":
      return `context built: ${event.tokens}/${event.budget} tokens, ${event.served.length} served`
    case "EntriesReferenced":
      return `referenced ${event.entryIds.length}`
    case "StepStarted":
      return event.focus ? `step begun, focus ${clip(JSON.stringify(event.focus), 60)}` : "step begun"
    case "StepEnded":
      return "step ended"
    case "FocusChanged":
      return `focus ${clip(JSON.stringify(event.focus), 60)}${event.transition ? " (task transition)" : ""}`
    case "RungChanged":
      return `rung ${event.from} → ${event.to} (score ${event.score.total.toFixed(3)}, ${event.score.trigger})`
    case "EntryDemoted":
      return `rung ${event.from} → long-term (score ${event.score.total.toFixed(3)}, ${event.score.trigger})`
    case "CueRehydrated":
      return `cue (${event.trigger}, relevance ${event.relevance.toFixed(3)}): ${clip(event.recalled.text)}`
    case "CuesRehydrated":
      return `${event.cues.length} cue${event.cues.length === 1 ? "" : "s"} recalled (${event.trigger})`
    case "StepRecalled":
      return `recalled for the step (${event.trigger}), ${event.similarities.length} similarities`
    case "CuePromoted":
      return `cue promoted (${event.trigger})`
    case "CueDropped":
      return "cue dropped"
    case "CuesDropped":
      return `${event.entryIds.length} cue${event.entryIds.length === 1 ? "" : "s"} dropped`
    case "EntryForgotten":
      return "entry forgotten"
    case "AgentForgotten":
      return "agent forgotten"
  }
}

export const timelineItem = ({ seq, event }: LoggedEvent): TimelineItem => ({
  seq,
  at: event.at,
  type: event._tag,
  entryId: entryIdOf(event),
  stepId: stepIdOf(event),
  detail: describeEvent(event),
})

/** Does a step event concern this entry (a read that served it, a reference to it, a cue of it)? */
const mentions = (event: MemoryEvent, entryId: string): boolean =>
  (event._tag === "EntriesRead" && event.served.some((s) => s.entryId === entryId)) ||
  (event._tag === "EntriesReferenced" && event.entryIds.includes(entryId)) ||
  (event._tag === "CuesRehydrated" && event.cues.some((c) => c.entryId === entryId))

/** The entry's text an event carries. */
const textOf = (event: MemoryEvent, entryId: string): string | null => {
  switch (event._tag) {
    case "EntryRecorded":
      return event.content
    case "RungChanged":
      return event.text
    case "CueRehydrated":
    case "CuePromoted":
      return event.recalled.text
    case "CuesRehydrated":
      return event.cues.find((c) => c.entryId === entryId)?.recalled.text ?? null
    default:
      return null
  }
}

/** What the timeline shows of an event about an entry forgotten before it was stored. */
const FORGOTTEN_DETAIL = "(forgotten)"

/** An event without what it says of forgotten entries: none of their own events, and no cue of them in a recall. */
const withoutForgotten = (logged: LoggedEvent, forgotten: ReadonlySet<string>): LoggedEvent | null => {
  const { event } = logged
  const entryId = entryIdOf(event)
  if (entryId !== null && forgotten.has(entryId) && event._tag !== "EntryForgotten") return null
  if (event._tag !== "CuesRehydrated" || !event.cues.some((c) => forgotten.has(c.entryId))) return logged
  return { ...logged, event: { ...event, cues: event.cues.filter((c) => !forgotten.has(c.entryId)) } }
}

const card = (entry: WorkingEntry, cue: boolean): EntryCard => ({
  id: entry.id,
  origin: entry.origin,
  rung: entry.rung,
  timestamp: entry.timestamp,
  text:
    (entry.rung === 2 ? entry.summary : entry.rung === 1 ? (entry.keyPoints ?? entry.content) : entry.content) ??
    entry.keyPoints ??
    entry.summary ??
    "",
  tokens:
    entry.rung === 2
      ? (entry.tokens.summary ?? 0)
      : entry.rung === 1
        ? (entry.tokens.keyPoints ?? entry.tokens.raw)
        : entry.tokens.raw,
  tags: entry.tags,
  referenceCount: entry.referenceCount,
  citationCount: entry.citationCount,
  cue,
})

/** The fold `wm replay` makes: the agent's events in stream order, those inside the cut applied. */
export const foldEvents = (
  events: Iterable<LoggedEvent>,
  cut: Cut | null,
): { view: AgentView | undefined; applied: number; longTerm: ReadonlySet<string> } => {
  let view: AgentView | undefined
  let applied = 0
  const longTerm = new Set<string>()
  for (const { seq, event } of events) {
    if (cut?.seq !== undefined && seq > cut.seq) break
    if (cut?.at !== undefined && event.at > cut.at) continue
    trackLongTerm(longTerm, view, event, { seq })
    view = evolve(view, event, { seq })
    applied++
  }
  return { view, applied, longTerm }
}

interface AgentLog {
  events: LoggedEvent[]
  /** The live view: every held event folded. */
  view: AgentView | undefined
  /** The ids of its entries in long-term (the view does not carry them). */
  readonly longTerm: Set<string>
  /** Its entries forgotten so far. */
  readonly forgotten: Set<string>
}

/** Every agent's events as the log holds them, and their live views. */
export class DashboardModel {
  readonly #agents = new Map<string, AgentLog>()
  readonly #fade: FadeConfig
  #lastSeq = 0

  constructor(fade: FadeConfig = DEFAULT_FADE_CONFIG) {
    this.#fade = fade
  }

  get lastSeq(): number {
    return this.#lastSeq
  }

  /** Adds the next event of the log (in stream order); returns the agent's timeline line. */
  add(logged: LoggedEvent): TimelineItem {
    const { event } = logged
    this.#lastSeq = Math.max(this.#lastSeq, logged.seq)
    let agent = this.#agents.get(event.agentId)
    if (agent === undefined) {
      agent = { events: [], view: undefined, longTerm: new Set(), forgotten: new Set() }
      this.#agents.set(event.agentId, agent)
    }
    if (event._tag === "AgentForgotten") {
      agent.events = []
      agent.forgotten.clear()
    }
    if (event._tag === "EntryForgotten") {
      // Remembered: a recall stored after the forget, decided before it, must not show the entry's cue either.
      agent.forgotten.add(event.entryId)
      agent.events = agent.events.flatMap((e) => withoutForgotten(e, agent.forgotten) ?? [])
    }
    const kept = withoutForgotten(logged, agent.forgotten)
    if (kept !== null) agent.events.push(kept)
    trackLongTerm(agent.longTerm, agent.view, event, { seq: logged.seq })
    agent.view = evolve(agent.view, event, { seq: logged.seq })
    return kept === null ? { ...timelineItem(logged), detail: FORGOTTEN_DETAIL } : timelineItem(kept)
  }

  #summary(agentId: string, view: AgentView, events: number, longTerm: number): AgentSummary {
    const byRung = { "0": 0, "1": 0, "2": 0 }
    for (const e of HashMap.values(view.entries)) byRung[e.rung] += 1
    return {
      agentId,
      role: view.config.role,
      budget: view.budgetInForce,
      baseBudget: baseBudget(view),
      hyperfocus: view.hyperfocus,
      usage: view.usage,
      tau: tauFor(view, this.#fade),
      entriesByRung: byRung,
      cues: HashMap.size(view.cues),
      longTerm,
      events,
      lastSeq: view.lastSeq,
      lastEventAt: view.lastEventAt,
    }
  }

  /** The registered agents, by id. */
  agents(): AgentSummary[] {
    return [...this.#agents.entries()]
      .flatMap(([id, a]) => (a.view ? [this.#summary(id, a.view, a.events.length, a.longTerm.size)] : []))
      .sort((a, b) => a.agentId.localeCompare(b.agentId))
  }

  /** One agent's page: live, or replayed to `cut`. Undefined when the agent is not registered then. */
  page(agentId: string, cut: Cut | null, options: ContextOptions = {}): AgentPage | undefined {
    const agent = this.#agents.get(agentId)
    if (agent === undefined || agent.view === undefined) return undefined
    const { view, applied, longTerm } =
      cut === null
        ? { view: agent.view, applied: agent.events.length, longTerm: agent.longTerm }
        : foldEvents(agent.events, cut)
    if (view === undefined) return undefined
    const entries = entriesByTime(HashMap.values(view.entries)).map((e) => card(e, false))
    const first = agent.events[0]!
    const last = agent.events[agent.events.length - 1]!
    return {
      agent: this.#summary(agentId, view, agent.events.length, longTerm.size),
      cut,
      applied,
      range: { firstAt: first.event.at, lastAt: last.event.at, firstSeq: first.seq, lastSeq: last.seq },
      instants: agent.events.map((e) => ({ seq: e.seq, at: e.event.at })),
      step: view.step && { stepId: view.step.stepId, focus: view.step.focus },
      focus: view.focus,
      entries: {
        raw: entries.filter((e) => e.rung === 0),
        keyPoints: entries.filter((e) => e.rung === 1),
        summary: entries.filter((e) => e.rung === 2),
      },
      cues: entriesByTime(HashMap.values(view.cues)).map((e) => card(e, true)),
      context: contextOfView(view, options),
    }
  }

  /** The agent's timeline after `afterSeq`, the newest `max` lines. */
  timeline(agentId: string, afterSeq = 0, max = 200): TimelineItem[] {
    const events = this.#agents.get(agentId)?.events ?? []
    return events
      .filter((e) => e.seq > afterSeq)
      .slice(-max)
      .map(timelineItem)
  }

  /** Every event of one entry, and the step events that mention it, in stream order. */
  history(agentId: string, entryId: string): HistoryItem[] {
    const events = this.#agents.get(agentId)?.events ?? []
    return events
      .filter((e) => entryIdOf(e.event) === entryId || mentions(e.event, entryId))
      .map((e) => ({
        ...timelineItem(e),
        score: e.event._tag === "RungChanged" || e.event._tag === "EntryDemoted" ? e.event.score : null,
        text: textOf(e.event, entryId),
      }))
  }
}
