/**
 * A full working view as events: a supervisor filled to just under its
 * 12 000-token budget with realistic entries, the oldest faded to
 * summaries, the next to key points, and a step open with a focus. Folded by
 * the shared reducer for in-process measurements, or appended to a log for
 * the services.
 */
import type { AgentConfig } from "../../contracts/agent.ts"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import type { FadeScore } from "../../contracts/fade.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import { blockTokens } from "../../domain/render.ts"
import { keyPointsOf, type RealisticEntry, realisticEntry, summaryOf } from "./realistic-entries.ts"

export const FULL_VIEW_T0 = Date.UTC(2026, 2, 2, 9, 0)
const MINUTE = 60_000
/** Shares of the view, oldest first, that have faded to a summary and to key points. */
const SUMMARY_SHARE = 0.3
const KEY_POINTS_SHARE = 0.2

interface Planned {
  readonly id: string
  readonly entry: RealisticEntry
  readonly timestamp: number
  readonly raw: number
  readonly keyPoints: { readonly text: string; readonly tokens: number }
  readonly summary: { readonly text: string; readonly tokens: number }
}

const rungAt = (index: number, count: number): 0 | 1 | 2 =>
  index < Math.floor(count * SUMMARY_SHARE) ? 2 : index < Math.floor(count * (SUMMARY_SHARE + KEY_POINTS_SHARE)) ? 1 : 0

const costAt = (p: Planned, rung: 0 | 1 | 2) =>
  rung === 0 ? p.raw : rung === 1 ? p.keyPoints.tokens : p.summary.tokens

const totalCost = (planned: ReadonlyArray<Planned>) =>
  planned.reduce((sum, p, i) => sum + costAt(p, rungAt(i, planned.length)), 0)

/** A plausible fade decision, recorded with a rung change or a demotion. */
export const fadeScore = (now: number, usage: number): FadeScore => ({
  total: 0.8,
  parts: { age: 0.5, frequency: 0.1, emotion: 0, focus: 0.1, pressure: 0.1 },
  trigger: "threshold",
  threshold: 0.6,
  usage,
  tau: 0.8,
  now,
})

export interface FullViewOptions {
  readonly agentId?: string
  readonly budget?: number
  /** When the first entry was recorded; the others follow a minute apart. */
  readonly t0?: number
}

/** The events of a full view, registration first, in log order. */
export const fullViewEvents = (options: FullViewOptions = {}): MemoryEvent[] => {
  const agentId = options.agentId ?? "bench-supervisor"
  const budget = options.budget ?? 12_000
  const t0 = options.t0 ?? FULL_VIEW_T0
  const planned: Planned[] = []
  for (let i = 0; ; i++) {
    const entry = realisticEntry(i)
    const timestamp = t0 + i * MINUTE
    const at = { timestamp, origin: entry.origin }
    const keyPoints = keyPointsOf(entry.content)
    const summary = summaryOf(entry)
    const next: Planned = {
      id: `entry-${i}`,
      entry,
      timestamp,
      raw: blockTokens(at, "raw", entry.content, "o200k_base"),
      keyPoints: { text: keyPoints, tokens: blockTokens(at, "keyPoints", keyPoints, "o200k_base") },
      summary: { text: summary, tokens: blockTokens(at, "summary", summary, "o200k_base") },
    }
    if (totalCost([...planned, next]) > budget) break
    planned.push(next)
  }

  const envelope = (at: number) => ({
    v: 1 as const,
    eventId: `${agentId}:bench-view:${events.length}`,
    agentId,
    at,
    causationId: null,
    correlationId: null,
  })
  const fade = (p: Planned, from: 0 | 1, to: 1 | 2): EventOf<"RungChanged"> => ({
    _tag: "RungChanged",
    ...envelope(p.timestamp + MINUTE / 2),
    entryId: p.id,
    from,
    to,
    text: to === 1 ? p.keyPoints.text : p.summary.text,
    tokens: to === 1 ? p.keyPoints.tokens : p.summary.tokens,
    score: fadeScore(p.timestamp + MINUTE / 2, 0.9),
    producer: { kind: to === 1 ? "extractive" : "offline", model: "bench", fallbackReason: null, attempts: 1 },
  })

  const config: AgentConfig = { id: agentId, role: "supervisor", budget, encoding: "o200k_base" }
  const events: MemoryEvent[] = []
  events.push({ _tag: "AgentRegistered", ...envelope(t0 - MINUTE), config })
  for (const p of planned) {
    events.push({
      _tag: "EntryRecorded",
      ...envelope(p.timestamp),
      entryId: p.id,
      timestamp: p.timestamp,
      origin: p.entry.origin,
      content: p.entry.content,
      tags: [...p.entry.tags],
      moodSnapshot: p.entry.emotionalWeight > 0 ? { valence: -0.3, arousal: 0.7 } : null,
      emotionalWeight: p.entry.emotionalWeight,
      tokens: p.raw,
    })
  }
  const last = planned.at(-1)?.timestamp ?? t0
  planned.forEach((p, i) => {
    const rung = rungAt(i, planned.length)
    if (rung >= 1) events.push(fade(p, 0, 1))
    if (rung === 2) events.push(fade(p, 1, 2))
  })
  events.push({
    _tag: "StepStarted",
    ...envelope(last + MINUTE),
    stepId: "bench-step",
    focus: { task: "quarterly review for the Lisbon office", query: "budget figures and table 3" },
  })
  return events
}

/** Folds events in order, numbering them as a log would. */
export const foldView = (events: ReadonlyArray<MemoryEvent>): AgentView => {
  let view: AgentView | undefined
  events.forEach((event, i) => {
    view = evolve(view, event, { seq: i + 1 })
  })
  if (view === undefined) throw new Error("no AgentRegistered among the events")
  return view
}

/** A supervisor's full working view (see fullViewEvents). */
export const fullSupervisorView = (options: FullViewOptions = {}): AgentView => foldView(fullViewEvents(options))
