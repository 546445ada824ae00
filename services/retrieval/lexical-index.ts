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

export class LexicalIndex {
  readonly #indexes = new Map<string, ReturnType<typeof newIndex>>()

  add(agentId: string, entryId: string, terms: ReadonlyArray<string>): void {
    let index = this.#indexes.get(agentId)
    if (index === undefined) this.#indexes.set(agentId, (index = newIndex()))
    if (index.has(entryId)) index.discard(entryId)
    index.add({ id: entryId, terms: terms.join(" ") })
  }

  remove(agentId: string, entryId: string): void {
    const index = this.#indexes.get(agentId)
    if (index?.has(entryId)) index.discard(entryId)
  }

  dropAgent(agentId: string): void {
    this.#indexes.delete(agentId)
  }

  search(agentId: string, terms: ReadonlyArray<string>, limit: number, accept?: (entryId: string) => boolean): LexicalHit[] {
    const index = this.#indexes.get(agentId)
    if (index === undefined || terms.length === 0) return []
    const results = index.search(terms.join(" "), {
      combineWith: "OR",
      ...(accept ? { filter: (r: { id: unknown }) => accept(String(r.id)) } : {}),
    })
    return results.slice(0, limit).map((r) => ({ entryId: String(r.id), score: r.score }))
  }
}
