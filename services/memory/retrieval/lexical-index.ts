/**
 * One lexical index per agent over every entry it ever recorded, working or
 * long-term (BM25+ with MiniSearch, over the raw text's terms). One index
 * for both tiers keeps their lexical scores on one scale. It is an in-memory
 * projection, rebuilt from the log at start.
 */
import MiniSearch from "minisearch"

export interface LexicalHit {
  readonly entryId: string
  readonly score: number
}

const newIndex = () =>
  new MiniSearch<{ id: string; terms: string }>({
    fields: ["terms"],
    idField: "id",
    // Terms arrive already normalised (domain/terms.ts).
    tokenize: (text) => text.split(" ").filter((t) => t.length > 0),
    processTerm: (term) => term,
  })

/** One agent's index, with each entry's terms and each term's document frequency (for query expansion). */
interface AgentIndex {
  readonly search: ReturnType<typeof newIndex>
  readonly termsOf: Map<string, ReadonlyArray<string>>
  readonly documentFrequency: Map<string, number>
}

export class LexicalIndex {
  readonly #indexes = new Map<string, AgentIndex>()

  add(agentId: string, entryId: string, terms: ReadonlyArray<string>): void {
    let index = this.#indexes.get(agentId)
    if (index === undefined) {
      index = { search: newIndex(), termsOf: new Map(), documentFrequency: new Map() }
      this.#indexes.set(agentId, index)
    }
    this.remove(agentId, entryId)
    index.search.add({ id: entryId, terms: terms.join(" ") })
    index.termsOf.set(entryId, terms)
    for (const t of new Set(terms)) index.documentFrequency.set(t, (index.documentFrequency.get(t) ?? 0) + 1)
  }

  remove(agentId: string, entryId: string): void {
    const index = this.#indexes.get(agentId)
    if (!index?.search.has(entryId)) return
    index.search.discard(entryId)
    for (const t of new Set(index.termsOf.get(entryId) ?? [])) {
      const df = (index.documentFrequency.get(t) ?? 1) - 1
      if (df > 0) index.documentFrequency.set(t, df)
      else index.documentFrequency.delete(t)
    }
    index.termsOf.delete(entryId)
  }

  dropAgent(agentId: string): void {
    this.#indexes.delete(agentId)
  }

  /** The indexed terms of an entry (empty when it is not indexed). */
  termsOf(agentId: string, entryId: string): ReadonlyArray<string> {
    return this.#indexes.get(agentId)?.termsOf.get(entryId) ?? []
  }

  /** How many of the agent's entries hold `term`, and how many entries there are. */
  documentFrequency(agentId: string, term: string): number {
    return this.#indexes.get(agentId)?.documentFrequency.get(term) ?? 0
  }

  documentCount(agentId: string): number {
    return this.#indexes.get(agentId)?.termsOf.size ?? 0
  }

  /** BM25+ over `terms`; a term in `boosts` counts that much (default 1). */
  search(
    agentId: string,
    terms: ReadonlyArray<string>,
    limit: number,
    boosts?: ReadonlyMap<string, number>,
  ): LexicalHit[] {
    const index = this.#indexes.get(agentId)?.search
    if (index === undefined || terms.length === 0) return []
    const results = index.search(terms.join(" "), {
      combineWith: "OR",
      ...(boosts ? { boostTerm: (term: string) => boosts.get(term) ?? 1 } : {}),
    })
    return results.slice(0, limit).map((r) => ({ entryId: String(r.id), score: r.score }))
  }
}
