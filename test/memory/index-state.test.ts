/**
 * The memory service's indexes as a snapshot carries them: taken, sent through JSON and put back, they
 * rank and neighbour exactly as the indexes they were taken from, after any history of entries recorded
 * (in and out of order, with and without correlation ids) and forgotten; anything else is refused.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { EpisodeIndex } from "../../services/memory/retrieval/episodes.ts"
import { decodeIndexState, memoryIndexState, takeIndexState } from "../../services/memory/retrieval/index-state.ts"
import { LexicalIndex } from "../../services/memory/retrieval/lexical-index.ts"
import { WorkingTexts } from "../../services/memory/retrieval/working-texts.ts"

const WORDS = ["dog", "garden", "courgett", "puppi", "biscuit", "meet", "minut", "2024", "plan", "tea"]

const operation = fc.oneof(
  fc.record({
    kind: fc.constant("add" as const),
    id: fc.integer({ min: 0, max: 40 }),
    terms: fc.array(fc.constantFrom(...WORDS), { maxLength: 8 }),
    timestamp: fc.integer({ min: 0, max: 50 }).map((m) => m * 20 * 60_000),
    correlation: fc.option(fc.constantFrom("a", "b"), { nil: null }),
  }),
  fc.record({ kind: fc.constant("remove" as const), id: fc.integer({ min: 0, max: 40 }) }),
)

describe("the memory indexes in a snapshot", () => {
  it("put back from JSON, rank and neighbour as the indexes they were taken from", () => {
    fc.assert(
      fc.property(
        fc.array(operation, { maxLength: 120 }),
        fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 4 }),
        (ops, query) => {
          const lexical = new LexicalIndex()
          const episodes = new EpisodeIndex()
          const texts = new WorkingTexts()
          for (const op of ops) {
            const id = `e${op.id}`
            if (op.kind === "add") {
              if (episodes.episodeOf("a", id) !== null) continue
              lexical.add("a", id, op.terms)
              episodes.add("a", id, op.timestamp, op.correlation)
              texts.restore("a", [...texts.of("a"), [id, op.terms.join(" ")]])
            } else {
              lexical.remove("a", id)
              episodes.remove("a", id)
              texts.restore(
                "a",
                texts.of("a").filter(([e]) => e !== id),
              )
            }
          }
          const restoredLexical = new LexicalIndex()
          const restoredEpisodes = new EpisodeIndex()
          const restoredTexts = new WorkingTexts()
          const kept = memoryIndexState(restoredLexical, restoredEpisodes, restoredTexts)
          kept.restore("a", kept.decode(JSON.parse(JSON.stringify(takeIndexState(lexical, episodes, texts, "a")))))

          expect(restoredLexical.search("a", query, 10)).toEqual(lexical.search("a", query, 10))
          expect(restoredLexical.documentCount("a")).toBe(lexical.documentCount("a"))
          for (let i = 0; i <= 40; i++) {
            const id = `e${i}`
            expect(restoredEpisodes.episodeOf("a", id)).toBe(episodes.episodeOf("a", id))
            expect(restoredEpisodes.neighbours("a", id, 2)).toEqual(episodes.neighbours("a", id, 2))
          }
          expect(takeIndexState(restoredLexical, restoredEpisodes, restoredTexts, "a")).toEqual(
            takeIndexState(lexical, episodes, texts, "a"),
          )
          for (let i = 0; i <= 40; i++) expect(restoredTexts.get("a", `e${i}`)).toBe(texts.get("a", `e${i}`))
        },
      ),
      { numRuns: 200 },
    )
  })

  it("refuses a state it does not recognise, naming the field", () => {
    expect(() => decodeIndexState(null)).toThrow("memory indexes: state not an object")
    expect(() => decodeIndexState({ lexical: [["e1", 3]], points: [], correlations: [] })).toThrow(
      "lexical terms not a string",
    )
    expect(() => decodeIndexState({ lexical: [], points: [["e1", "noon", null]], correlations: [] })).toThrow(
      "point timestamp not a number",
    )
    expect(() => decodeIndexState({ lexical: [], points: [] })).toThrow("correlations not an array")
    expect(() => decodeIndexState({ lexical: [], points: [], correlations: [], texts: [["e1", 7]] })).toThrow(
      "text not a string",
    )
  })
})
