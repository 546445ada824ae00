/**
 * Merged retrieval over both tiers of one agent. Two rankings cover both
 * tiers at once: lexical (one BM25 index over every entry) and dense
 * (long-term records from the store; working entries — a linear scan, they
 * are few and in memory — embedded on the fly with the same model). The
 * rankings are fused by reciprocal rank into a similarity in [0,1], and each
 * hit is scored r = α·sim + β·recency + γ·frequency. The neighbours of the
 * best hits on the timeline (their episode) inherit part of their
 * similarity, so the turn that answers a matching one comes along.
 *
 * Two measures against vocabulary mismatch: the best five fused hits expand
 * the query with the rare words they share (domain/query-expansion.ts), and
 * that search is a third ranking; the query's sentence vector leaves out the
 * words more than a fifth of the agent's entries hold.
 */
import { Effect, HashMap } from "effect"
import type { RepresentationKind, WorkingEntry } from "../../../contracts/entry.ts"
import { type LongTermPayload, matchesFilter, type RecordFilter } from "../../../contracts/longterm.ts"
import { type AgentView, fullestForm } from "../../../domain/agent-view.ts"
import { DEFAULT_EXPANSION, expansionTerms } from "../../../domain/query-expansion.ts"
import {
  DEFAULT_EPISODE_LIFT,
  DEFAULT_RELEVANCE,
  frequencyOf,
  fuseRankings,
  liftByEpisode,
  recencyOf,
  relevance,
} from "../../../domain/relevance.ts"
import { distinctiveWords, queryTerms } from "../../../domain/terms.ts"
import type { EmbeddingProviderShape } from "../../platform/embedding/embedding-provider.ts"
import type { LongTermStoreShape } from "../longterm/store.ts"
import type { EpisodeIndex } from "./episodes.ts"
import type { LexicalIndex } from "./lexical-index.ts"

export interface RankedHit {
  readonly entryId: string
  readonly tier: "working" | "long-term"
  readonly working?: WorkingEntry | undefined
  readonly record?: LongTermPayload | undefined
  readonly similarity: number
  readonly dense: number
  readonly lexical: number
  readonly recency: number
  readonly frequency: number
  readonly relevance: number
}

export const hitText = (hit: RankedHit): { form: RepresentationKind; text: string } => {
  if (hit.working) return fullestForm(hit.working)
  return { form: hit.record!.summaryForm, text: hit.record!.summary }
}

export interface RankingSources {
  readonly store: LongTermStoreShape
  readonly embeddings: EmbeddingProviderShape
  readonly lexical: LexicalIndex
  /** Every entry of both tiers on its agent's timeline: the neighbours of a hit come along with it. */
  readonly episodes: EpisodeIndex
  /**
   * Vectors of working entries by the in-process model, in order; null for one without a vector yet
   * (it ranks by its words alone).
   */
  readonly workingVectors: (
    agentId: string,
    entries: ReadonlyArray<WorkingEntry>,
  ) => Effect.Effect<ReadonlyArray<Float32Array | null>>
}

/**
 * A word more than a fifth of the agent's entries hold (who speaks, the
 * project's name) is left out of the query's sentence vector: it does not
 * tell entries apart, and it would pull short entries holding little else up.
 */
const COMMON_WORD_SHARE = 0.2

const dot = (a: Float32Array, b: Float32Array) => {
  let s = 0
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!
  return s
}

export const rankBothTiers = (
  view: AgentView,
  query: string,
  options: { readonly limit: number; readonly filter?: RecordFilter | undefined },
  sources: RankingSources,
) =>
  Effect.gen(function* () {
    const agentId = view.config.id
    const weights = view.config.relevance ?? DEFAULT_RELEVANCE
    const depth = Math.max(options.limit * 2, 50)
    const working = [...HashMap.values(view.entries)].filter((e) => matchesFilter(e, options.filter))
    const inWorking = new Map(working.map((e) => [e.id, e]))
    const records = new Map<string, LongTermPayload>()

    // Dense: long-term records of the offline model from the store, working entries scanned, one ranking.
    const model = sources.embeddings.offline.model
    const dense = new Map<string, number>()
    const denseQuery = distinctiveWords(
      query,
      (t) => sources.lexical.documentFrequency(agentId, t),
      sources.lexical.documentCount(agentId),
      COMMON_WORD_SHARE,
    )
    const queryVector = yield* sources.embeddings.embedQuery(denseQuery, model)
    if (queryVector !== null) {
      for (const hit of yield* sources.store.searchDense(agentId, model, queryVector, depth, options.filter)) {
        dense.set(hit.payload.entryId, hit.score)
        records.set(hit.payload.entryId, hit.payload)
      }
      const vectors = yield* sources.workingVectors(agentId, working)
      working.forEach((e, i) => {
        const vector = vectors[i]
        if (vector) dense.set(e.id, dot(queryVector, vector))
      })
    }
    // Records embedded by another model (a configured remote one) rank among themselves.
    const otherRankings: string[][] = []
    for (const other of yield* sources.store.models(agentId)) {
      if (other === model) continue
      const vector = yield* sources.embeddings.embedQuery(denseQuery, other)
      if (vector === null) continue
      const hits = yield* sources.store.searchDense(agentId, other, vector, depth, options.filter)
      otherRankings.push(hits.map((h) => h.payload.entryId))
      for (const h of hits) {
        dense.set(h.payload.entryId, Math.max(dense.get(h.payload.entryId) ?? -1, h.score))
        records.set(h.payload.entryId, h.payload)
      }
    }
    const denseRanking = [...dense]
      .filter(([, s]) => s > 0)
      .sort((a, b) => b[1] - a[1])
      .slice(0, depth)
      .map(([id]) => id)

    // Lexical: one index over both tiers.
    // Every indexed entry is in working or long-term (forgotten ones leave the index); filters apply below.
    const searchTerms = queryTerms(query)
    let lexicalHits = sources.lexical.search(agentId, searchTerms, depth)
    let fused = fuseRankings([denseRanking, ...otherRankings, lexicalHits.map((h) => h.entryId)], 2)
    // The best fused matches expand the query; the expanded search is one more ranking, at a lower weight.
    const expansion = DEFAULT_EXPANSION
    if (expansion.terms > 0 && lexicalHits.length > 0) {
      const best = [...fused].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, expansion.documents)
      const added = expansionTerms(
        best.map(([id, weight]) => ({ terms: sources.lexical.termsOf(agentId, id), weight })),
        searchTerms,
        (t) => sources.lexical.documentFrequency(agentId, t),
        sources.lexical.documentCount(agentId),
        expansion.terms,
      )
      if (added.length > 0) {
        const boosts = new Map(added.map((t) => [t.term, expansion.weight * t.weight]))
        const expanded = sources.lexical.search(agentId, [...searchTerms, ...boosts.keys()], depth, boosts)
        const w = expansion.rankingWeight
        fused = fuseRankings(
          [denseRanking, ...otherRankings, lexicalHits.map((h) => h.entryId), expanded.map((h) => h.entryId)],
          2 + w,
          undefined,
          [1, ...otherRankings.map(() => 1), 1, w],
        )
        const found = new Set(lexicalHits.map((h) => h.entryId))
        lexicalHits = [
          ...lexicalHits,
          ...expanded.filter((h) => !found.has(h.entryId)).map((h) => ({ entryId: h.entryId, score: 0 })),
        ]
      }
    }
    const lexicalBest = lexicalHits[0]?.score ?? 1
    const lexical = new Map(lexicalHits.map((h) => [h.entryId, h.score / lexicalBest]))
    // Long-term records found lexically but not densely: fetch their payloads.
    const missing = lexicalHits.map((h) => h.entryId).filter((id) => !inWorking.has(id) && !records.has(id))
    if (missing.length > 0) for (const r of yield* sources.store.get(agentId, missing)) records.set(r.entryId, r)

    const similarity = liftByEpisode(
      [...fused].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)),
      (id) => sources.episodes.neighbours(agentId, id, DEFAULT_EPISODE_LIFT.radius),
      (id) => sources.episodes.episodeOf(agentId, id),
    )
    // Neighbours in long-term that no ranking found: fetch their payloads.
    const unfetched = [...similarity.keys()].filter((id) => !fused.has(id) && !inWorking.has(id) && !records.has(id))
    if (unfetched.length > 0) for (const r of yield* sources.store.get(agentId, unfetched)) records.set(r.entryId, r)
    const hits: RankedHit[] = []
    const now = view.clock
    for (const [id, sim] of similarity) {
      const e = inWorking.get(id)
      const r = e ? undefined : records.get(id)
      if (!e && (!r || !matchesFilter(r, options.filter))) continue
      // Built field by field, in one order: hundreds of hits a recall, spreads cost more than the ranking.
      const parts = {
        similarity: sim,
        recency: e ? recencyOf(now, Math.max(e.timestamp, e.lastCitedAt ?? 0)) : recencyOf(now, r!.timestamp),
        frequency: frequencyOf(e ? e.citationCount : r!.citationCount),
      }
      hits.push({
        entryId: id,
        tier: e ? "working" : "long-term",
        working: e,
        record: r,
        dense: dense.get(id) ?? 0,
        lexical: lexical.get(id) ?? 0,
        similarity: sim,
        recency: parts.recency,
        frequency: parts.frequency,
        relevance: relevance(parts, weights),
      })
    }
    return hits.sort((a, b) => b.relevance - a.relevance || (a.entryId < b.entryId ? -1 : 1)).slice(0, options.limit)
  })
