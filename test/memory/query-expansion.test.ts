import { describe, expect, it } from "vitest"
import { expansionTerms } from "../../domain/query-expansion.ts"
import { fuseRankings } from "../../domain/relevance.ts"
import { distinctiveWords, queryTerms, terms } from "../../domain/terms.ts"
import { LexicalIndex } from "../../services/memory/retrieval/lexical-index.ts"

/** A small memory: the words of its best matches, and how rare each word is in it. */
const memory = [
  "I started painting last year, it calms me down after work",
  "Painting landscapes in the evening calms me",
  "Work was busy today",
  "Work meeting moved to Friday",
  "The weather is nice today",
  "Sunset over the lake, a landscape for my next canvas",
]

const indexOf = (texts: ReadonlyArray<string>) => {
  const index = new LexicalIndex()
  texts.forEach((t, i) => {
    index.add("a", `e${i}`, terms(t))
  })
  return index
}

describe("query expansion by the best matches", () => {
  it("adds the words the best matches share and the query lacks, strongest first", () => {
    const index = indexOf(memory)
    const query = terms("what helps her relax? painting")
    const added = expansionTerms(
      [
        { terms: index.termsOf("a", "e0"), weight: 1 },
        { terms: index.termsOf("a", "e1"), weight: 0.8 },
      ],
      query,
      (t) => index.documentFrequency("a", t),
      index.documentCount("a"),
      3,
    )
    expect(added[0]).toEqual({ term: terms("calms")[0], weight: 1 })
    expect(added.map((t) => t.term)).not.toContain(terms("painting")[0])
    expect(added.every((t) => t.weight > 0 && t.weight <= 1)).toBe(true)
    expect(added).toHaveLength(3)
  })

  it("never adds a word every entry holds, and nothing from documents that did not match", () => {
    const added = expansionTerms(
      [
        { terms: ["common", "rare"], weight: 1 },
        { terms: ["other"], weight: 0 },
      ],
      [],
      (t) => (t === "common" ? 10 : 1),
      10,
      5,
    )
    expect(added).toEqual([{ term: "rare", weight: 1 }])
  })

  it("lets an expanded search find an entry that shares no word with the query", () => {
    const index = indexOf(memory)
    const query = terms("painting")
    const before = index.search("a", query, 10).map((h) => h.entryId)
    expect(before).not.toContain("e5")
    const added = expansionTerms(
      before.slice(0, 2).map((id) => ({ terms: index.termsOf("a", id), weight: 1 })),
      query,
      (t) => index.documentFrequency("a", t),
      index.documentCount("a"),
      4,
    )
    const boosts = new Map(added.map((t) => [t.term, 0.3 * t.weight]))
    const after = index.search("a", [...query, ...boosts.keys()], 10, boosts).map((h) => h.entryId)
    expect(after.slice(0, 2).sort()).toEqual(["e0", "e1"])
    expect(after).toContain("e5")
  })

  it("forgets a removed entry's words in the document frequencies", () => {
    const index = indexOf(memory)
    const calm = terms("calms")[0]!
    expect(index.documentFrequency("a", calm)).toBe(2)
    index.remove("a", "e0")
    expect(index.documentFrequency("a", calm)).toBe(1)
    expect(index.documentCount("a")).toBe(memory.length - 1)
    expect(index.termsOf("a", "e0")).toEqual([])
  })
})

describe("the distinctive words of a query", () => {
  const df = (share: Record<string, number>) => (t: string) => share[t] ?? 0

  it("leaves out a word most of the memory holds, such as the name of who speaks", () => {
    const q = distinctiveWords(
      "What did Caroline research?",
      df({ [terms("caroline")[0]!]: 50, [terms("research")[0]!]: 2 }),
      100,
      0.2,
    )
    expect(q).toBe("What did research")
  })

  it("keeps the query whole when only common words would remain", () => {
    expect(
      distinctiveWords("What did Caroline say?", df({ [terms("caroline")[0]!]: 50, [terms("say")[0]!]: 60 }), 100, 0.2),
    ).toBe("What did Caroline say?")
    expect(distinctiveWords("Where is the lease?", df({}), 0, 0.2)).toBe("Where is the lease?")
  })
})

describe("weighted rank fusion", () => {
  it("counts a ranking by its weight, scaled so a document first everywhere has 1", () => {
    const fused = fuseRankings([["a", "b"], ["b", "a"], ["c"]], 2.5, 10, [1, 1, 0.5])
    expect(fused.get("a")).toBeCloseTo((1 / 11 + 1 / 12) / (2.5 / 11))
    expect(fused.get("c")).toBeCloseTo(0.5 / 11 / (2.5 / 11))
    expect(fuseRankings([["a"], ["a"]], 2).get("a")).toBeCloseTo(1)
  })
})

describe("a question's own words", () => {
  it("'when', 'why', 'does', 'doing' and 'will' are not a query's terms, and stay terms of a recorded text", () => {
    expect(queryTerms("When does Ana move? Why? Will it? What is she doing?")).toEqual(terms("Ana move she"))
    expect(terms("Will called when the doing was done")).toEqual(expect.arrayContaining(["will", "when"]))
  })

  it("a question word written as a name inside a sentence stays a query's term", () => {
    expect(queryTerms("What did Will say? Will Ana come?")).toEqual(terms("Will say Ana come"))
    expect(queryTerms("Lunch plans.\nWhen is it?")).toEqual(terms("lunch plans"))
    expect(queryTerms('He said "no." "Why did Ana leave?" (Will it rain?) WHEN DOES IT SHIP')).toEqual(
      terms("said no Ana leave rain ship"),
    )
  })

  it("so an entry that happens to say 'when' does not outrank the one the question is about", () => {
    const index = indexOf([
      "Ana laughed when the film ended",
      "Ana arrives on the Tuesday train",
      "The parcel arrives tomorrow",
      "Guests arrive at eight",
      "The new sofa arrives next week",
      "Work was busy today",
    ])
    expect(index.search("a", queryTerms("When does Ana arrive?"), 1)[0]?.entryId).toBe("e1")
  })
})
