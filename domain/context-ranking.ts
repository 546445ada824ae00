/**
 * The candidates of a context build and their priority order: which entries
 * a build may serve (native entries and the open step's cues) and how they
 * rank (relevance to the focus, else recency).
 *
 * The ranking of a view is remembered with the view (`rankedCandidates`):
 * it reads only the view's entries, cues, cue relevances, the step's
 * recalled similarities, the focus, the relevance weights and the clock,
 * all immutable values that a new view shares with the old one unless they
 * changed. A build of a view whose ranking is known is packing and
 * rendering alone; the BM25 scores of the focus over the view, the
 * similarity map and the sort are made once per change of those parts.
 */
import { HashMap, Option } from "effect"
import type { RelevanceWeights } from "../contracts/agent.ts"
import type { WorkingEntry } from "../contracts/entry.ts"
import { type Focus, focusText } from "../contracts/focus.ts"
import { type AgentView, currentFocus } from "./agent-view.ts"
import { statsOf } from "./entry-memo.ts"
import { bm25Scaled, DEFAULT_RELEVANCE, frequencyOf, fuseRankings, recencyOf, relevance } from "./relevance.ts"
import { type TermStats, termStats } from "./terms.ts"

export interface Candidate {
  readonly entry: WorkingEntry
  /** Higher is more important. */
  readonly priority: number
  readonly cue: boolean
}

/** Most important first; ties go to the newer entry. Returns -1, 0 or 1, so a sort boxes no numbers. */
export const byPriority = (a: Candidate, b: Candidate): number => {
  const priority = b.priority - a.priority
  if (priority > 0) return 1
  if (priority < 0) return -1
  const time = b.entry.timestamp - a.entry.timestamp
  if (time > 0) return 1
  if (time < 0) return -1
  const ordinal = b.entry.ordinal - a.entry.ordinal
  return ordinal > 0 ? 1 : ordinal < 0 ? -1 : 0
}

/** Candidates in priority order (a stable sort: equals keep the order given). */
export const rankCandidates = (candidates: ReadonlyArray<Candidate>): Candidate[] => [...candidates].sort(byPriority)

/** Newest first: the default priority when the agent has no focus to rank by. */
export const recencyPriority = (entry: WorkingEntry): number => entry.timestamp

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

/** The lexical terms of the text working holds for an entry. */
export const entryStats = (entry: WorkingEntry): TermStats => statsOf(entry)

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

/** A view's ranking and every part of the view it was made from. */
interface Ranking {
  readonly cues: AgentView["cues"]
  readonly cueRelevance: AgentView["cueRelevance"]
  readonly similarities: HashMap.HashMap<string, number> | null
  readonly focus: Focus | null
  readonly weights: RelevanceWeights | undefined
  readonly clock: number
  readonly ranked: ReadonlyArray<Candidate>
}

// Keyed by the entries map, the part that changes most often; the other parts are compared on a hit.
const rankings = new WeakMap<AgentView["entries"], Ranking>()

/**
 * `rankCandidates(candidatesOf(view, priorityFor(view)))`, remembered while
 * the parts of the view it reads stay the same objects.
 */
export const rankedCandidates = (view: AgentView): ReadonlyArray<Candidate> => {
  const focus = currentFocus(view)
  const similarities = view.step?.similarities ?? null
  const weights = view.config.relevance
  const known = rankings.get(view.entries)
  if (
    known !== undefined &&
    known.cues === view.cues &&
    known.cueRelevance === view.cueRelevance &&
    known.similarities === similarities &&
    known.focus === focus &&
    known.weights === weights &&
    known.clock === view.clock
  )
    return known.ranked
  const ranked = Object.freeze(rankCandidates(candidatesOf(view, priorityFor(view))))
  rankings.set(view.entries, {
    cues: view.cues,
    cueRelevance: view.cueRelevance,
    similarities,
    focus,
    weights,
    clock: view.clock,
    ranked,
  })
  return ranked
}
