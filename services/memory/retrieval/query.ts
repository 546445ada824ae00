/**
 * A query: the best hits of both tiers for a text, merged into one ranking, each with its fullest
 * representation and, when asked, how its relevance was made.
 */
import { Effect } from "effect"
import type { RequestOf, ResponseOf } from "../../../contracts/api.ts"
import { DEFAULT_RELEVANCE } from "../../../domain/relevance.ts"
import type { CaughtUpReads } from "./caught-up.ts"
import { hitText, type RankingSources, rankBothTiers } from "./rank.ts"

export interface QueryDependencies {
  readonly sources: RankingSources
  readonly viewAfter: CaughtUpReads["viewAfter"]
}

export const makeQuery = ({ sources, viewAfter }: QueryDependencies) => {
  const query = Effect.fn("Retrieval.query")(function* (agentId: string, request: RequestOf<"query">) {
    const view = yield* viewAfter(agentId, request.afterSeq)
    const hits = yield* rankBothTiers(
      view,
      request.query,
      { limit: request.limit ?? 10, filter: request.filter },
      sources,
    ).pipe(Effect.orDie)
    const weights = view.config.relevance ?? DEFAULT_RELEVANCE
    return {
      results: hits.map((h) => {
        const meta = h.working ?? h.record!
        return {
          entryId: h.entryId,
          tier: h.tier,
          origin: meta.origin,
          timestamp: meta.timestamp,
          tags: [...meta.tags],
          correlationId: meta.correlationId,
          ...hitText(h),
          relevance: h.relevance,
          ...(request.explain
            ? {
                explain: {
                  similarity: h.similarity,
                  dense: h.dense,
                  lexical: h.lexical,
                  recency: h.recency,
                  frequency: h.frequency,
                  weights,
                },
              }
            : {}),
        }
      }),
    } satisfies ResponseOf<"query">
  })

  return { query }
}
