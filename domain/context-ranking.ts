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
import { queryTerms, type TermStats } from "./terms.ts"

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
 * entries, the cues' own relevance for cues): one ranking over both tiers. Before
 * that, sim comes from an entry's BM25 rank against the focus among the
 * candidates, on the same reciprocal-rank scale. Without a focus, recency.
 * A pure function of the view, so an audit replay ranks exactly as the
 * build did.
 */
export const priorityFor = (view: AgentView): ((entry: WorkingEntry, cue: boolean) => number) => {
  const focus = currentFocus(view)
  const query = queryTerms(focusText(focus))
  // Once retrieval has recalled for the step, its similarities rank natives and cues alike (a focus of
  // question words only, "Why?", has no terms yet was recalled for by its meaning).
  const recalledNative = view.step?.similarities ?? null
  if (query.length === 0 && recalledNative === null) return recencyPriority
  const weights = view.config.relevance ?? DEFAULT_RELEVANCE
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
        emotion: emotionOf(entry),
      },
      weights,
    )
  }
}

/** The emotional weight of an entry, or its mood's |valence|·arousal if larger (as fading reads it). */
const emotionOf = (entry: WorkingEntry): number =>
  Math.max(
    entry.emotionalWeight,
    entry.moodSnapshot ? Math.abs(entry.moodSnapshot.valence) * entry.moodSnapshot.arousal : 0,
  )

/** Oldest first; -1, 0 or 1, so a sort boxes no numbers. */
const timeOrder = (a: WorkingEntry, b: WorkingEntry): number => {
  const time = a.timestamp - b.timestamp
  if (time > 0) return 1
  if (time < 0) return -1
  const ordinal = a.ordinal - b.ordinal
  return ordinal > 0 ? 1 : ordinal < 0 ? -1 : 0
}

// The ranks of a remembered (frozen) ranking in time order, made once per ranking.
const timeOrders = new WeakMap<ReadonlyArray<Candidate>, Int32Array>()

/** The ranks of candidates in priority order, oldest first; ties in time keep priority order, as a stable sort would. */
export const timeOrderOf = (ranked: ReadonlyArray<Candidate>): Int32Array => {
  const known = timeOrders.get(ranked)
  if (known !== undefined) return known
  const ranks = Array.from({ length: ranked.length }, (_, rank) => rank)
  ranks.sort((a, b) => timeOrder(ranked[a]!.entry, ranked[b]!.entry) || a - b)
  const inTime = Int32Array.from(ranks)
  if (Object.isFrozen(ranked)) timeOrders.set(ranked, inTime)
  return inTime
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
  /** The native entries in the order the entries map yields them (the order BM25 ties are broken in). */
  readonly natives: ReadonlyArray<WorkingEntry>
  /** The rank of each native entry among the candidates (none for one a cue stands in for). */
  readonly rankOf: ReadonlyMap<string, number>
}

// Keyed by the entries map, the part that changes most often; the other parts are compared on a hit.
const rankings = new WeakMap<AgentView["entries"], Ranking>()
// The last ranking made for an agent's views (by its configuration object), for a view whose entries were copied.
const latest = new WeakMap<AgentView["config"], Ranking>()

const sameOtherParts = (
  known: Ranking,
  view: AgentView,
  focus: Focus | null,
  similarities: Ranking["similarities"],
): boolean =>
  known.cues === view.cues &&
  known.cueRelevance === view.cueRelevance &&
  known.similarities === similarities &&
  known.focus === focus &&
  known.weights === view.config.relevance &&
  known.clock === view.clock

/** Whether an entry ranks as another: the same texts, time, citations and place in the record. */
const ranksAs = (a: WorkingEntry, b: WorkingEntry): boolean =>
  a.id === b.id &&
  a.content === b.content &&
  a.keyPoints === b.keyPoints &&
  a.summary === b.summary &&
  a.timestamp === b.timestamp &&
  a.ordinal === b.ordinal &&
  a.citationCount === b.citationCount &&
  a.lastCitedAt === b.lastCitedAt &&
  a.emotionalWeight === b.emotionalWeight

/**
 * A read copies the entries it served with new reference counts, which no
 * ranking reads: when every entry of `view` ranks as the one at its place in
 * `known`, the ranking is `known`'s with the new entry objects, else null.
 */
const carriedOver = (known: Ranking, view: AgentView): Ranking | null => {
  const natives = new Array<WorkingEntry>(known.natives.length)
  if (HashMap.size(view.entries) !== natives.length) return null
  let changed = false
  let i = 0
  for (const entry of HashMap.values(view.entries)) {
    const before = known.natives[i]!
    if (entry !== before && !ranksAs(entry, before)) return null
    changed ||= entry !== before
    natives[i++] = entry
  }
  if (!changed) return known
  const ranked = [...known.ranked]
  for (const entry of natives) {
    const rank = known.rankOf.get(entry.id)
    // A native entry a cue stands in for is not among the candidates.
    if (rank !== undefined && ranked[rank]!.entry !== entry) ranked[rank] = { ...ranked[rank]!, entry }
  }
  Object.freeze(ranked)
  // Times and ordinals are those of the known ranking's entries, so is the time order.
  timeOrders.set(ranked, timeOrderOf(known.ranked))
  return { ...known, ranked, natives }
}

const rankingOf = (view: AgentView, focus: Focus | null, similarities: Ranking["similarities"]): Ranking => {
  const ranked = Object.freeze(rankCandidates(candidatesOf(view, priorityFor(view))))
  const rankOf = new Map<string, number>()
  ranked.forEach((c, rank) => {
    if (!c.cue) rankOf.set(c.entry.id, rank)
  })
  return {
    cues: view.cues,
    cueRelevance: view.cueRelevance,
    similarities,
    focus,
    weights: view.config.relevance,
    clock: view.clock,
    ranked,
    natives: [...HashMap.values(view.entries)],
    rankOf,
  }
}

/**
 * `rankCandidates(candidatesOf(view, priorityFor(view)))`, remembered while
 * the parts of the view it reads stay the same objects, and carried over to
 * a view whose entries differ from the last ranked view's only in what no
 * ranking reads (a read's reference counts).
 */
export const rankedCandidates = (view: AgentView): ReadonlyArray<Candidate> => {
  const focus = currentFocus(view)
  const similarities = view.step?.similarities ?? null
  const known = rankings.get(view.entries)
  if (known !== undefined && sameOtherParts(known, view, focus, similarities)) return known.ranked
  const previous = latest.get(view.config)
  const ranking =
    (previous !== undefined && sameOtherParts(previous, view, focus, similarities)
      ? carriedOver(previous, view)
      : null) ?? rankingOf(view, focus, similarities)
  rankings.set(view.entries, ranking)
  latest.set(view.config, ranking)
  return ranking.ranked
}
