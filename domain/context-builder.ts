/**
 * The prompt builder: serialises working memory into a context that never
 * exceeds the budget, packing at several resolutions.
 *
 * 1. Packing, in priority order (newest first unless the caller ranks
 *    otherwise). The best-ranked entries are taken at full fidelity (the
 *    highest form working holds for them) while the first FULL_SHARE of the
 *    budget lasts; the next ones compressed (key points where held) until
 *    COMPRESSED_SHARE; the tail in the most compact form held (a summary
 *    where there is one). An entry that does not fit is skipped, so smaller
 *    ones behind it still get in.
 * 2. Fidelity: with what is left, again in priority order, each taken entry
 *    is raised to the highest-fidelity form the remaining budget pays for.
 * 3. Output in timestamp order (oldest first), under a line for each date
 *    and sitting (render.ts), unless asked for priority order (then a header
 *    precedes every block whose sitting differs from the block before it).
 *    Headers are counted exactly once the blocks are laid out; should the
 *    sittings cost more than planned, the least important blocks go.
 *
 * Costs are the block token counts recorded when each representation was
 * made, plus the header lines; both are token-additive (see render.ts), so
 * the sum is the exact count of the text. Only header lines are tokenised
 * here, once per distinct line.
 */
import { HashMap, Option } from "effect"
import { DEFAULT_ENCODING, type Encoding } from "../contracts/agent.ts"
import type { BuiltContext as BuiltContextSchema, ContextItem as ContextItemSchema } from "../contracts/api.ts"
import type { RepresentationKind, WorkingEntry } from "../contracts/entry.ts"
import { focusText } from "../contracts/focus.ts"
import { type AgentView, currentFocus, formTokens } from "./agent-view.ts"
import { blockOf, formsOf, statsOf } from "./entry-memo.ts"
import { bm25Scaled, DEFAULT_RELEVANCE, frequencyOf, fuseRankings, recencyOf, relevance } from "./relevance.ts"
import { dateLineTokens, dayOf, lineTokens, renderDateLine, renderSittingLine, SITTING_GAP_MS } from "./render.ts"
import { type TermStats, termStats } from "./terms.ts"

export interface Candidate {
  readonly entry: WorkingEntry
  /** Higher is more important. */
  readonly priority: number
  readonly cue: boolean
}

export type ContextItem = typeof ContextItemSchema.Type

/** The API's built context before it is stamped with the log position it was built at (`omitted`: candidates that did not fit at all). */
export type BuiltContext = Omit<typeof BuiltContextSchema.Type, "seq">

export type ContextOrder = "timestamp" | "priority"

/** The share of the budget that buys full fidelity for the best-ranked entries. */
export const FULL_SHARE = 0.3
/** Up to this share, the next entries come as key points where working holds them; beyond it, the most compact form. */
export const COMPRESSED_SHARE = 0.65

/** The most compact form working holds for an entry. */
const compactForm = (entry: WorkingEntry): RepresentationKind =>
  entry.summary !== null ? "summary" : entry.keyPoints !== null ? "keyPoints" : "raw"

/** Key points where held, else the most compact form. */
const compressedForm = (entry: WorkingEntry): RepresentationKind =>
  entry.keyPoints !== null ? "keyPoints" : compactForm(entry)

const byPriority = (a: Candidate, b: Candidate) =>
  b.priority - a.priority || b.entry.timestamp - a.entry.timestamp || b.entry.ordinal - a.entry.ordinal

const byTime = (a: Chosen, b: Chosen) =>
  a.candidate.entry.timestamp - b.candidate.entry.timestamp || a.candidate.entry.ordinal - b.candidate.entry.ordinal

interface Chosen {
  readonly candidate: Candidate
  /** Position in priority order. */
  readonly rank: number
  form: RepresentationKind
  tokens: number
}

/**
 * The header line before each block of `blocks` (in output order), or "" for
 * none. Sittings are found in time order: a new one starts on a new day or
 * after a gap of more than SITTING_GAP_MS; a day with several sittings shows
 * the time of each.
 */
const headersOf = (blocks: ReadonlyArray<Chosen>, order: ContextOrder): string[] => {
  const inTime = order === "timestamp" ? blocks : [...blocks].sort(byTime)
  const sittingStart = new Map<Chosen, number>()
  const sittingsPerDay = new Map<number, number>()
  let start = Number.NaN
  let previous = Number.NaN
  for (const c of inTime) {
    const t = c.candidate.entry.timestamp
    if (Number.isNaN(previous) || dayOf(t) !== dayOf(previous) || t - previous > SITTING_GAP_MS) {
      start = t
      sittingsPerDay.set(dayOf(t), (sittingsPerDay.get(dayOf(t)) ?? 0) + 1)
    }
    sittingStart.set(c, start)
    previous = t
  }
  let shown = Number.NaN
  let shownDay = Number.NaN
  return blocks.map((c) => {
    const sitting = sittingStart.get(c)!
    if (sitting === shown) return ""
    const day = dayOf(sitting)
    const several = (sittingsPerDay.get(day) ?? 1) > 1
    const line =
      order === "timestamp" && day === shownDay && several
        ? renderSittingLine(sitting)
        : renderDateLine(sitting, several)
    shown = sitting
    shownDay = day
    return line
  })
}

export const buildContext = (
  candidates: ReadonlyArray<Candidate>,
  budget: number,
  order: ContextOrder = "timestamp",
  encoding: Encoding = DEFAULT_ENCODING,
): BuiltContext => {
  const ranked = [...candidates].sort(byPriority)
  let chosen: Chosen[] = []
  const days = new Set<number>()
  let used = 0
  ranked.forEach((candidate, rank) => {
    const entry = candidate.entry
    const day = dayOf(entry.timestamp)
    const header = days.has(day) ? 0 : dateLineTokens(entry.timestamp, encoding)
    const forms = formsOf(entry)
    const wanted =
      used < FULL_SHARE * budget
        ? forms[0]!
        : used < COMPRESSED_SHARE * budget
          ? compressedForm(entry)
          : compactForm(entry)
    // The wanted form if it fits, else anything more compact that does.
    for (let f = forms.indexOf(wanted); f < forms.length; f++) {
      const form = forms[f]!
      const tokens = formTokens(entry, form)
      if (used + tokens + header > budget) continue
      used += tokens + header
      days.add(day)
      chosen.push({ candidate, rank, form, tokens })
      return
    }
  })
  for (const c of chosen) {
    for (const form of formsOf(c.candidate.entry)) {
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
  // Headers exactly: sittings may cost more lines than the plan's one per day. Drop the least important blocks until they fit.
  let headers = headersOf(chosen, order)
  const total = () =>
    chosen.reduce((sum, c, i) => sum + c.tokens + (headers[i] ? lineTokens(headers[i]!, encoding) : 0), 0)
  used = total()
  while (used > budget && chosen.length > 0) {
    const worst = chosen.reduce((w, c, i) => (c.rank > chosen[w]!.rank ? i : w), 0)
    chosen = chosen.filter((_, i) => i !== worst)
    headers = headersOf(chosen, order)
    used = total()
  }
  let text = ""
  const items: ContextItem[] = []
  chosen.forEach((c, i) => {
    const e = c.candidate.entry
    text += headers[i]! + blockOf(e, c.form)
    items.push({
      entryId: e.id,
      timestamp: e.timestamp,
      origin: e.origin,
      rung: e.rung,
      form: c.form,
      cue: c.candidate.cue,
      tokens: c.tokens,
    })
  })
  return { text, tokens: used, budget, items, omitted: candidates.length - chosen.length }
}

/** Newest first: the default priority when the agent has no focus to rank by. */
export const recencyPriority = (entry: WorkingEntry): number => entry.timestamp

/** The budget a build may use: the agent's, or a lower per-call limit. */
export const effectiveBudget = (view: AgentView, limit?: number): number =>
  limit === undefined ? view.budgetInForce : Math.min(view.budgetInForce, limit)

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
  const query = termStats(focusText(focus)).terms
  if (query.length === 0) return recencyPriority
  const weights = view.config.relevance ?? DEFAULT_RELEVANCE
  // Once retrieval has recalled for the step, its similarities rank natives and cues alike.
  const recalledNative = view.step?.similarities ?? null
  const pool = [...HashMap.values(view.entries), ...HashMap.values(view.cues)]
  const lexical = recalledNative ? [] : bm25Scaled(query, pool.map(entryStats))
  const ranked = pool
    .map((entry, i) => ({ entry, score: lexical[i] ?? 0 }))
    .filter((x) => x.score > 0)
    .sort((a, b) => b.score - a.score)
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
export const entryStats = (entry: WorkingEntry): TermStats => statsOf(entry)

export interface ContextOptions {
  readonly limit?: number
  readonly order?: ContextOrder
}

/**
 * The context an agent's view yields: what the working service serves for a
 * build, and what `wm replay` and the dashboard rebuild at a past instant.
 */
export const contextOfView = (view: AgentView, options: ContextOptions = {}): BuiltContext =>
  buildContext(
    candidatesOf(view, priorityFor(view)),
    effectiveBudget(view, options.limit),
    options.order ?? "timestamp",
    view.config.encoding,
  )
