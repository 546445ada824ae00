/**
 * The prompt builder: serialises working memory into a context that never
 * exceeds the budget, at the highest fidelity that fits.
 *
 * 1. Coverage: in priority order (newest first unless the caller ranks
 *    otherwise), every entry that fits is taken at the cost of its current
 *    rung. An entry too large to fit is skipped, so smaller ones behind it
 *    still get in.
 * 2. Fidelity: again in priority order, each taken entry is raised to the
 *    highest-fidelity form working holds for it (raw, then key points) that
 *    the remaining budget pays for.
 * 3. Output in timestamp order (oldest first) unless asked for priority order.
 *
 * Costs are the block token counts recorded when each representation was
 * made; blocks are token-additive (see render.ts), so the sum is the exact
 * count of the text. Nothing is tokenised here.
 */
import { HashMap } from "effect"
import type { RepresentationKind, WorkingEntry, WorkingRung } from "../contracts/entry.ts"
import { availableForms, formText, formTokens, rungCost, type AgentView } from "./agent-view.ts"
import { renderBlock } from "./render.ts"

export interface Candidate {
  readonly entry: WorkingEntry
  /** Higher is more important. */
  readonly priority: number
  readonly cue: boolean
}

export interface ContextItem {
  readonly entryId: string
  readonly timestamp: number
  readonly origin: WorkingEntry["origin"]
  readonly rung: WorkingRung
  readonly form: RepresentationKind
  readonly cue: boolean
  readonly tokens: number
}

export interface BuiltContext {
  readonly text: string
  readonly tokens: number
  readonly budget: number
  readonly items: ReadonlyArray<ContextItem>
  /** Candidates that did not fit at all. */
  readonly omitted: number
}

export type ContextOrder = "timestamp" | "priority"

const cheapestForm = (entry: WorkingEntry): RepresentationKind => {
  switch (entry.rung) {
    case 0:
      return "raw"
    case 1:
      return entry.keyPoints !== null ? "keyPoints" : "raw"
    case 2:
      return entry.summary !== null ? "summary" : entry.keyPoints !== null ? "keyPoints" : "raw"
  }
}

const byPriority = (a: Candidate, b: Candidate) =>
  b.priority - a.priority || b.entry.timestamp - a.entry.timestamp || b.entry.ordinal - a.entry.ordinal

const byTime = (a: Chosen, b: Chosen) =>
  a.candidate.entry.timestamp - b.candidate.entry.timestamp || a.candidate.entry.ordinal - b.candidate.entry.ordinal

interface Chosen {
  readonly candidate: Candidate
  form: RepresentationKind
  tokens: number
}

export const buildContext = (
  candidates: ReadonlyArray<Candidate>,
  budget: number,
  order: ContextOrder = "timestamp",
): BuiltContext => {
  const ranked = [...candidates].sort(byPriority)
  const chosen: Chosen[] = []
  let used = 0
  for (const candidate of ranked) {
    const cost = rungCost(candidate.entry)
    if (used + cost > budget) continue
    used += cost
    chosen.push({ candidate, form: cheapestForm(candidate.entry), tokens: cost })
  }
  for (const c of chosen) {
    for (const form of availableForms(c.candidate.entry)) {
      if (form === c.form) break
      const tokens = formTokens(c.candidate.entry, form)
      if (used - c.tokens + tokens <= budget) {
        used += tokens - c.tokens
        c.form = form
        c.tokens = tokens
        break
      }
    }
  }
  if (order === "timestamp") chosen.sort(byTime)
  let text = ""
  const items: ContextItem[] = []
  for (const c of chosen) {
    const e = c.candidate.entry
    text += renderBlock(e, c.form, formText(e, c.form))
    items.push({ entryId: e.id, timestamp: e.timestamp, origin: e.origin, rung: e.rung, form: c.form, cue: c.candidate.cue, tokens: c.tokens })
  }
  return { text, tokens: used, budget, items, omitted: candidates.length - chosen.length }
}

/** Newest first: the default priority when the agent has no focus to rank by. */
export const recencyPriority = (entry: WorkingEntry): number => entry.timestamp

/** The budget a build may use: the agent's, or a lower per-call limit. */
export const effectiveBudget = (view: AgentView, limit?: number): number =>
  limit === undefined ? view.budget : Math.min(view.budget, limit)

/** Native entries and the open step's cues, ranked by `priority` (recency when omitted). */
export const candidatesOf = (
  view: AgentView,
  priority: (entry: WorkingEntry, cue: boolean) => number = recencyPriority,
): Candidate[] => {
  const candidates: Candidate[] = []
  for (const entry of HashMap.values(view.entries)) candidates.push({ entry, priority: priority(entry, false), cue: false })
  for (const entry of HashMap.values(view.cues)) candidates.push({ entry, priority: priority(entry, true), cue: true })
  return candidates
}
