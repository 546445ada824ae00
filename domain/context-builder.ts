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
 * 3. Output in timestamp order (oldest first), under a line for each date,
 *    unless asked for priority order (then a date line precedes every block
 *    whose date differs from the block before it).
 *
 * Costs are the block token counts recorded when each representation was
 * made, plus the date lines; both are token-additive (see render.ts), so the
 * sum is the exact count of the text. Only date lines are tokenised here,
 * once per distinct day.
 */
import { HashMap, Option } from "effect"
import { DEFAULT_ENCODING, type Encoding } from "../contracts/agent.ts"
import type { RepresentationKind, WorkingEntry, WorkingRung } from "../contracts/entry.ts"
import { focusText } from "../contracts/focus.ts"
import { availableForms, currentFocus, formText, formTokens, rungCost, type AgentView } from "./agent-view.ts"
import { bm25Scaled, DEFAULT_RELEVANCE, frequencyOf, fuseRankings, recencyOf, relevance } from "./relevance.ts"
import { termStats, terms, type TermStats } from "./terms.ts"
import { dateLineTokens, dayOf, renderBlock, renderDateLine } from "./render.ts"

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
  encoding: Encoding = DEFAULT_ENCODING,
): BuiltContext => {
  const ranked = [...candidates].sort(byPriority)
  const chosen: Chosen[] = []
  const days = new Set<number>()
  let used = 0
  for (const candidate of ranked) {
    const day = dayOf(candidate.entry.timestamp)
    const cost = rungCost(candidate.entry) + (days.has(day) ? 0 : dateLineTokens(candidate.entry.timestamp, encoding))
    if (used + cost > budget) continue
    used += cost
    days.add(day)
    chosen.push({ candidate, form: cheapestForm(candidate.entry), tokens: rungCost(candidate.entry) })
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
  else {
    // In priority order a day can come back several times, each with its line: drop the least
    // important blocks until those extra lines fit too.
    const cost = () => chosen.reduce((sum, c, i) => sum + c.tokens + (i === 0 || dayOf(chosen[i - 1]!.candidate.entry.timestamp) !== dayOf(c.candidate.entry.timestamp) ? dateLineTokens(c.candidate.entry.timestamp, encoding) : 0), 0)
    used = cost()
    while (used > budget && chosen.length > 0) {
      chosen.pop()
      used = cost()
    }
  }
  let text = ""
  let day = Number.NaN
  const items: ContextItem[] = []
  for (const c of chosen) {
    const e = c.candidate.entry
    const d = dayOf(e.timestamp)
    if (d !== day) {
      text += renderDateLine(e.timestamp)
      day = d
    }
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

/**
 * Native entries and the open step's cues, ranked by `priority`. A cue that
 * recalls a summarised entry's raw text stands in for the native entry.
 */
export const candidatesOf = (
  view: AgentView,
  priority: (entry: WorkingEntry, cue: boolean) => number = recencyPriority,
): Candidate[] => {
  const candidates: Candidate[] = []
  for (const entry of HashMap.values(view.entries)) {
    if (!HashMap.has(view.cues, entry.id)) candidates.push({ entry, priority: priority(entry, false), cue: false })
  }
  for (const entry of HashMap.values(view.cues)) candidates.push({ entry, priority: priority(entry, true), cue: true })
  return candidates
}

/**
 * The priority of a build: with a focus, the relevance of each entry to it,
 * r = α·sim + β·recency + γ·frequency. Once retrieval has recalled for the
 * step, sim is the similarity it recorded (StepRecalled for working
 * entries, CueRehydrated for cues): one ranking over both tiers. Before
 * that, sim comes from an entry's BM25 rank against the focus among the
 * candidates, on the same reciprocal-rank scale. Without a focus, recency.
 * A pure function of the view, so an audit replay ranks exactly as the
 * build did.
 */
export const priorityFor = (view: AgentView): ((entry: WorkingEntry, cue: boolean) => number) => {
  const focus = currentFocus(view)
  const query = terms(focusText(focus))
  if (query.length === 0) return recencyPriority
  const weights = view.config.relevance ?? DEFAULT_RELEVANCE
  // Once retrieval has recalled for the step, its similarities rank natives and cues alike.
  const recalledNative = view.step?.similarities ?? null
  const pool = [...HashMap.values(view.entries), ...HashMap.values(view.cues)]
  const lexical = recalledNative ? [] : bm25Scaled(query, pool.map(entryStats))
  const ranked = pool.map((entry, i) => ({ entry, score: lexical[i] ?? 0 })).filter((x) => x.score > 0).sort((a, b) => b.score - a.score)
  const similarity = recalledNative ? new Map(recalledNative) : fuseRankings([ranked.map((x) => x.entry.id)], 1)
  return (entry, cue) => {
    const recalled = cue ? Option.getOrElse(HashMap.get(view.cueRelevance, entry.id), () => 0) : 0
    return relevance(
      {
        similarity: Math.max(similarity.get(entry.id) ?? 0, recalled),
        recency: recencyOf(view.clock, Math.max(entry.timestamp, entry.lastCitedAt ?? 0)),
        frequency: frequencyOf(entry.citationCount),
      },
      weights,
    )
  }
}

/** The lexical terms of the text working holds for an entry. */
export const entryStats = (entry: WorkingEntry): TermStats => termStats(entry.content ?? entry.keyPoints ?? entry.summary ?? "")
