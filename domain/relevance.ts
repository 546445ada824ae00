/**
 * The relevance score of retrieval and of focused context builds:
 *
 *   r = α·sim + β·recency + γ·frequency + δ·emotion
 *
 * - sim ∈ [0,1]: similarity to the query, fused from dense and lexical
 *   rankings (see fuseRankings) or, inside working, lexical BM25 scaled to
 *   the best match;
 * - recency ∈ [0,1] = e^(−Δt / horizon), Δt on the agent's clock since the
 *   entry was recorded or last cited;
 * - frequency ∈ [0,1] = log(1 + citations) / log(1 + 10), capped at 1;
 * - emotion ∈ [0,1]: the entry's emotional weight (its own, or an advisor's
 *   on its correlation id), so a focused build keeps what the agent was told
 *   matters even when the focus does not name it. Context builds only.
 *
 * α, β, γ, δ are set per agent at registration (defaults below; δ when left out).
 *
 * Entries are relevant together with their episode: the neighbours of a hit
 * (the turns around it in its sitting, the entries of its correlation id)
 * inherit a share of its similarity (see liftByEpisode).
 */
import type { RelevanceWeights } from "../contracts/agent.ts"
import type { TermStats } from "./terms.ts"

/**
 * Defaults measured on LoCoMo (BENCHMARKS.md), not taken from the literature:
 * recency barely helps a focused query, because what is recent is already in
 * working at full fidelity, so similarity carries nearly all the weight.
 */
export const DEFAULT_RELEVANCE: RelevanceWeights = { alpha: 0.9, beta: 0.05, gamma: 0.05, delta: 0.5 }
const DEFAULT_DELTA = 0.5
export const RECENCY_HORIZON_MS = 24 * 3600_000

export interface RelevanceParts {
  readonly similarity: number
  readonly recency: number
  readonly frequency: number
  readonly emotion?: number
}

export const recencyOf = (now: number, since: number, horizonMs = RECENCY_HORIZON_MS) =>
  Math.exp(-Math.max(0, now - since) / horizonMs)

export const frequencyOf = (citations: number) => Math.min(1, Math.log1p(citations) / Math.log1p(10))

export const relevance = (parts: RelevanceParts, w: RelevanceWeights = DEFAULT_RELEVANCE): number =>
  w.alpha * parts.similarity +
  w.beta * parts.recency +
  w.gamma * parts.frequency +
  (w.delta ?? DEFAULT_DELTA) * (parts.emotion ?? 0)

/**
 * BM25 of every document against the query, scaled so the best is 1 (0 when
 * nothing matches). IDF comes from the documents themselves: inside working
 * the set is small and lives in memory, so a scan is the index.
 */
export const bm25Scaled = (
  query: ReadonlyArray<string>,
  docs: ReadonlyArray<TermStats>,
  k1 = 1.2,
  b = 0.75,
): number[] => {
  const n = docs.length
  if (n === 0 || query.length === 0) return docs.map(() => 0)
  const qTerms = [...new Set(query)]
  const df = new Map<string, number>()
  let totalLength = 0
  for (const d of docs) {
    totalLength += d.terms.length
    for (const t of qTerms) if (d.frequencies.has(t)) df.set(t, (df.get(t) ?? 0) + 1)
  }
  // Weights in parallel arrays, in the order the terms were first found: no entry pairs made per document.
  const idfTerms: string[] = []
  const idfWeights: number[] = []
  for (const [t, d] of df) {
    idfTerms.push(t)
    idfWeights.push(Math.log(1 + (n - d + 0.5) / (d + 0.5)))
  }
  const avg = totalLength / n || 1
  let max = 0
  const scores = new Array<number>(n)
  for (let j = 0; j < n; j++) {
    const d = docs[j]!
    let s = 0
    for (let i = 0; i < idfTerms.length; i++) {
      const f = d.frequencies.get(idfTerms[i]!)
      if (f) s += (idfWeights[i]! * f * (k1 + 1)) / (f + k1 * (1 - b + (b * d.terms.length) / avg))
    }
    if (s > max) max = s
    scores[j] = s
  }
  if (max > 0) for (let j = 0; j < n; j++) scores[j]! /= max
  return scores
}

/**
 * Reciprocal-rank fusion of several rankings into a similarity in [0,1]:
 * Σ w/(k + rank) over the rankings a document appears in (w = the ranking's
 * weight, 1 unless given), divided by what a document ranked first in
 * rankings of total weight `lists` would get.
 */
export const fuseRankings = (
  rankings: ReadonlyArray<ReadonlyArray<string>>,
  lists: number,
  k = 10,
  weights: ReadonlyArray<number> = [],
): Map<string, number> => {
  const fused = new Map<string, number>()
  rankings.forEach((ranking, r) => {
    const w = weights[r] ?? 1
    ranking.forEach((id, rank) => {
      fused.set(id, (fused.get(id) ?? 0) + w / (k + rank + 1))
    })
  })
  const best = lists / (k + 1)
  for (const [id, s] of fused) fused.set(id, s / best)
  return fused
}

/** An entry next to another on the agent's timeline, `distance` steps away (1 = adjacent). */
export interface Neighbour {
  readonly entryId: string
  readonly distance: number
}

export interface EpisodeLift {
  /** How many of the best hits pass similarity to their neighbours. */
  readonly spreaders: number
  /** How many steps away a neighbour may be. */
  readonly radius: number
  /** The share of a hit's similarity its adjacent neighbour inherits; each further step multiplies by `decay`. */
  readonly share: number
  readonly decay: number
  /** The share of its episode's best similarity added to an entry that matches the query itself. */
  readonly episodeShare: number
}

/**
 * In a dialogue the reply to what matched the query, or the question before
 * it, usually holds the answer; in a task, the steps around a matching one
 * belong with it. The neighbours of the best hits inherit share·decay^(d−1)
 * of the hit's similarity; the entries around a strong hit then rank beside
 * the hit's weaker competitors rather than far below them.
 *
 * The radius is one exchange: the turn, the replies on either side, and the
 * same party's turns before and after those (two away in a two-party
 * dialogue; in a task, the call before a result and the step after it).
 * Within it nothing decays: the speaker's own follow-up ("…so I started a
 * dance studio") bears on a matching turn as much as the other party's reply
 * in between.
 */
export const DEFAULT_EPISODE_LIFT: EpisodeLift = {
  spreaders: 60,
  radius: 2,
  share: 0.8,
  decay: 1,
  episodeShare: 0.25,
}

/**
 * Similarities lifted by episode. First, an entry that matches the query
 * gains episodeShare of the best similarity in its episode (`episodeOf`:
 * its correlation id, else its sitting), scaled back into [0,1]: a weak
 * match inside the conversation that matches best outranks an equally weak
 * one elsewhere. Then every entry keeps the larger of that and what it
 * inherits from a neighbouring hit. `similarity` is best first.
 */
export const liftByEpisode = (
  similarity: ReadonlyArray<readonly [string, number]>,
  neighbours: (entryId: string) => ReadonlyArray<Neighbour>,
  episodeOf: (entryId: string) => string | null = () => null,
  lift: EpisodeLift = DEFAULT_EPISODE_LIFT,
): Map<string, number> => {
  const episodes = similarity.map(([id]) => episodeOf(id))
  const best = new Map<string, number>()
  similarity.forEach(([, sim], i) => {
    const e = episodes[i]
    if (e != null && sim > (best.get(e) ?? 0)) best.set(e, sim)
  })
  const lifted = new Map(
    similarity.map(([id, sim], i) => {
      const episode = episodes[i]
      const top = episode != null ? best.get(episode)! : sim
      return [id, (sim + lift.episodeShare * top) / (1 + lift.episodeShare)] as const
    }),
  )
  similarity = [...lifted].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
  for (const [id, sim] of similarity.slice(0, lift.spreaders)) {
    for (const n of neighbours(id)) {
      if (n.distance > lift.radius) continue
      const inherited = sim * lift.share * lift.decay ** (n.distance - 1)
      if (inherited > (lifted.get(n.entryId) ?? 0)) lifted.set(n.entryId, inherited)
    }
  }
  return lifted
}
