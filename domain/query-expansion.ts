/**
 * Query expansion by the memory's own best matches (relevance feedback in
 * the manner of RM3). A question and the entry that answers it often share
 * few words: "what does she do to relax" against "painting calms me down".
 * The few entries that match best tell what the query is about; the words
 * they have in common with each other, and that are rare in the memory, are
 * added to the query at a lower weight, so entries worded like the best
 * matches but not like the query are found too.
 */

export interface FeedbackDocument {
  /** The document's lexical terms (domain/terms.ts), repeats included. */
  readonly terms: ReadonlyArray<string>
  /** How strongly it matched the query, in [0,1]. */
  readonly weight: number
}

export interface WeightedTerm {
  readonly term: string
  /** In (0,1]: the strongest expansion term has 1. */
  readonly weight: number
}

export interface ExpansionSettings {
  /** How many of the best matches feed the expansion. */
  readonly documents: number
  /** How many terms are added to the query. */
  readonly terms: number
  /** The weight of the strongest added term against an original query term's 1. */
  readonly weight: number
  /**
   * The expanded search is one more ranking beside the query's own lexical
   * one and the dense one, at this weight against their 1. Beside, not
   * instead: the query's own words keep their ranking, so the best matches'
   * other topics do not outrank what the query asked.
   */
  readonly rankingWeight: number
}

/** Measured on LoCoMo's dev conversations (BENCHMARKS.md). */
export const DEFAULT_EXPANSION: ExpansionSettings = { documents: 5, terms: 8, weight: 0.5, rankingWeight: 1 }

/**
 * The strongest terms of the feedback documents that the query does not hold:
 * each term scores Σ_d weight_d · tf(t,d)/|d| · idf(t), idf = ln(N / df(t)).
 * A term found in only one feedback document and rarely elsewhere still
 * counts, but a term in every entry (idf ≈ 0) never does. Ties go to the
 * term that sorts first, so the expansion is deterministic.
 */
export const expansionTerms = (
  feedback: ReadonlyArray<FeedbackDocument>,
  query: ReadonlyArray<string>,
  documentFrequency: (term: string) => number,
  documentCount: number,
  count: number,
): WeightedTerm[] => {
  if (count <= 0 || documentCount <= 1) return []
  const exclude = new Set(query)
  const scores = new Map<string, number>()
  for (const doc of feedback) {
    if (doc.terms.length === 0 || doc.weight <= 0) continue
    const tf = new Map<string, number>()
    for (const t of doc.terms) if (!exclude.has(t)) tf.set(t, (tf.get(t) ?? 0) + 1)
    for (const [t, f] of tf) {
      const idf = Math.log(documentCount / Math.max(1, documentFrequency(t)))
      if (idf <= 0) continue
      scores.set(t, (scores.get(t) ?? 0) + (doc.weight * f * idf) / doc.terms.length)
    }
  }
  const ranked = [...scores].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, count)
  const best = ranked[0]?.[1] ?? 0
  return best > 0 ? ranked.map(([term, s]) => ({ term, weight: s / best })) : []
}
