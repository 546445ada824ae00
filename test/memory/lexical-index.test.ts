import fc from "fast-check"
import MiniSearch from "minisearch"
import { describe, expect, it } from "vitest"
import { LexicalIndex } from "../../services/memory/retrieval/lexical-index.ts"

/**
 * Exhaustive BM25+ as the index defines it: every live document scored,
 * sorted by score, ties by insertion order.
 */
const exhaustive = (
  documents: ReadonlyArray<readonly [string, ReadonlyArray<string>]>,
  query: ReadonlyArray<string>,
  limit: number,
  boosts?: ReadonlyMap<string, number>,
) => {
  const n = documents.length
  if (n === 0) return []
  const df = new Map<string, number>()
  let total = 0
  for (const [, terms] of documents) {
    const distinct = new Set(terms)
    total += distinct.size
    for (const t of distinct) df.set(t, (df.get(t) ?? 0) + 1)
  }
  const average = total / n
  const scored = documents.flatMap(([id, terms], position) => {
    const counts = new Map<string, number>()
    for (const t of terms) counts.set(t, (counts.get(t) ?? 0) + 1)
    let sum = 0
    const matched = new Set<string>()
    for (const t of query) {
      const tf = counts.get(t)
      if (tf === undefined) continue
      const f = df.get(t)!
      const idf = Math.log(1 + (n - f + 0.5) / (f + 0.5))
      sum += (boosts?.get(t) ?? 1) * (idf * (0.5 + (tf * 2.2) / (tf + 1.2 * (1 - 0.7 + (0.7 * counts.size) / average))))
      matched.add(t)
    }
    if (matched.size === 0) return []
    return [{ entryId: id, score: sum * matched.size, position }]
  })
  return scored
    .sort((a, b) => b.score - a.score || a.position - b.position)
    .slice(0, limit)
    .map(({ entryId, score }) => ({ entryId, score }))
}

const vocabulary = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]
// Skewed term choice: the first words are common, the last rare, as in real text.
const term = fc.integer({ min: 0, max: 143 }).map((x) => vocabulary[Math.floor(Math.sqrt(x))]!)
const documentTerms = fc.array(term, { minLength: 0, maxLength: 12 })
const operation = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("add" as const), id: fc.nat(60), terms: documentTerms }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("remove" as const), id: fc.nat(60) }) },
)
const query = fc.record({
  terms: fc.array(fc.oneof(term, fc.constant("absent")), { minLength: 1, maxLength: 6 }),
  limit: fc.integer({ min: 1, max: 25 }),
  boosts: fc.option(fc.dictionary(term, fc.double({ min: 0.05, max: 3, noNaN: true })), { nil: undefined }),
})

/** Applies the operations to an index and to a plain list of the live documents in insertion order. */
const build = (operations: ReadonlyArray<{ kind: "add" | "remove"; id: number; terms?: string[] }>) => {
  const index = new LexicalIndex()
  let live: Array<readonly [string, ReadonlyArray<string>]> = []
  for (const op of operations) {
    const id = `e${op.id}`
    live = live.filter(([d]) => d !== id)
    if (op.kind === "add") {
      index.add("agent", id, op.terms!)
      live.push([id, op.terms!])
    } else index.remove("agent", id)
  }
  return { index, live }
}

/**
 * The top k over posting lists of many blocks whose bounds differ, with ties, removals inside blocks and
 * boosts, against exhaustive scoring.
 * Runs of documents of one kind each (a topic the memory dwells on for a while), so that a term's
 * largest count and shortest document differ from block to block of its postings and the walk can
 * skip whole stretches; within a run the documents tie exactly, so insertion order decides.
 */
const manyBlocksProperty = () => {
  const shape = fc.array(fc.constantFrom("a", "b", "c", "d", "e", "f"), { minLength: 1, maxLength: 7 })
  return fc.property(
    fc.array(
      fc.record({
        shapes: fc.array(shape, { minLength: 1, maxLength: 3 }),
        size: fc.integer({ min: 1, max: 300 }),
      }),
      {
        minLength: 2,
        maxLength: 8,
      },
    ),
    fc.array(fc.nat(), { maxLength: 300 }),
    fc.array(fc.nat(), { maxLength: 40 }),
    fc.array(fc.constantFrom("a", "b", "c", "d", "e", "f", "z"), { minLength: 1, maxLength: 8 }),
    fc.integer({ min: 1, max: 30 }),
    fc.option(fc.dictionary(fc.constantFrom("a", "b", "c", "d", "e", "f"), fc.double({ min: 0, max: 3, noNaN: true }))),
    (runs, removals, readditions, terms, limit, boosts) => {
      const index = new LexicalIndex()
      const documents = new Map<string, ReadonlyArray<string>>()
      let i = 0
      for (const run of runs)
        for (let k = 0; k < run.size; k++, i++) {
          const doc = run.shapes[k % run.shapes.length]!
          index.add("agent", `e${i}`, doc)
          documents.set(`e${i}`, doc)
        }
      const live = new Map(documents)
      for (const r of removals) {
        const id = `e${r % i}`
        index.remove("agent", id)
        live.delete(id)
      }
      // Some come back, at the end of the insertion order.
      for (const r of readditions) {
        const id = `e${r % i}`
        if (live.has(id)) continue
        index.add("agent", id, documents.get(id)!)
        live.set(id, documents.get(id)!)
      }
      const boostMap = boosts ? new Map(Object.entries(boosts)) : undefined
      expect(index.search("agent", terms, limit, boostMap)).toEqual(exhaustive([...live], terms, limit, boostMap))
    },
  )
}

describe("the lexical index's top k", () => {
  it("is the top k of exhaustive BM25+ scoring, on random corpora with removals and re-additions", () => {
    fc.assert(
      fc.property(
        fc.array(operation, { maxLength: 120 }),
        fc.array(query, { minLength: 1, maxLength: 5 }),
        (ops, qs) => {
          const { index, live } = build(ops)
          for (const q of qs) {
            const boosts = q.boosts ? new Map(Object.entries(q.boosts)) : undefined
            expect(index.search("agent", q.terms, q.limit, boosts)).toEqual(exhaustive(live, q.terms, q.limit, boosts))
          }
        },
      ),
      { numRuns: 400 },
    )
  })

  it("holds when the documents scored up front tie with, or beat, the ones the walk meets first", () => {
    // Long posting lists (so the walk first scores the strongest term's leading documents for a floor),
    // many documents identical to each other (their scores tie exactly, and insertion order decides),
    // the best ones late or early in the lists, and boosted and repeated query terms.
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.constantFrom("a", "b", "c", "d", "e"), { minLength: 1, maxLength: 4 }), {
          minLength: 1,
          maxLength: 6,
        }),
        fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 300, maxLength: 600 }),
        fc.array(fc.constantFrom("a", "b", "c", "d", "e", "z"), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1, max: 12 }),
        fc.option(fc.dictionary(fc.constantFrom("a", "b", "c"), fc.double({ min: 0, max: 3, noNaN: true }))),
        (shapes, picks, terms, limit, boosts) => {
          const index = new LexicalIndex()
          const live: Array<readonly [string, ReadonlyArray<string>]> = []
          picks.forEach((pick, i) => {
            const doc = shapes[pick % shapes.length]!
            index.add("agent", `e${i}`, doc)
            live.push([`e${i}`, doc])
          })
          const boostMap = boosts ? new Map(Object.entries(boosts)) : undefined
          expect(index.search("agent", terms, limit, boostMap)).toEqual(exhaustive(live, terms, limit, boostMap))
        },
      ),
      { numRuns: 300 },
    )
  })

  it("holds at a size where pruning skips most postings, after many removals compact the index", () => {
    const index = new LexicalIndex()
    const live = new Map<string, string[]>()
    let x = 7
    const next = () => {
      x = (x * 1103515245 + 12345) % 2 ** 31
      return x
    }
    const words = Array.from({ length: 400 }, (_, i) => `w${i}`)
    for (let i = 0; i < 6_000; i++) {
      const terms = Array.from({ length: 3 + (next() % 10) }, () => words[Math.floor(Math.sqrt(next() % 160_000))]!)
      index.add("agent", `e${i}`, terms)
      live.set(`e${i}`, terms)
      // Most entries leave again, so that removed ones outnumber the living and the index compacts.
      for (let r = 0; r < 2 && i > 0; r++) {
        const gone = `e${next() % i}`
        index.remove("agent", gone)
        live.delete(gone)
      }
    }
    for (let q = 0; q < 50; q++) {
      const terms = Array.from({ length: 1 + (q % 6) }, () => words[Math.floor(Math.sqrt(next() % 160_000))]!)
      expect(index.search("agent", terms, 50)).toEqual(exhaustive([...live], terms, 50))
    }
  })

  it("holds over posting lists of many blocks whose bounds differ, with ties, removals inside blocks and boosts", () => {
    fc.assert(manyBlocksProperty(), { numRuns: 400 })
  })

  it("holds with a boost so small its products are subnormal (a case the property above once met)", () => {
    fc.assert(manyBlocksProperty(), {
      numRuns: 1,
      seed: -1154350343,
      path: "156:2:1:1:1:3:3:2:1:2:1:4:3:1:1:6:1:5:2:1:1:16:17:23:1:5:1:2:15:16:19:20:30:44:34:36:30:31:31:30:32:31:31:31:31:34:32:36:36",
      endOnFailure: true,
    })
  })

  it("scores as MiniSearch's BM25+ did, with the same top scores on an index without removals", () => {
    fc.assert(
      fc.property(fc.array(documentTerms, { maxLength: 80 }), query, (documents, q) => {
        const index = new LexicalIndex()
        const mini = new MiniSearch<{ id: string; terms: string }>({
          fields: ["terms"],
          tokenize: (text) => text.split(" ").filter((t) => t.length > 0),
          processTerm: (t) => t,
        })
        documents.forEach((terms, i) => {
          index.add("agent", `e${i}`, terms)
          mini.add({ id: `e${i}`, terms: terms.join(" ") })
        })
        const boosts = q.boosts ? new Map(Object.entries(q.boosts)) : undefined
        const ours = index.search("agent", q.terms, q.limit, boosts)
        const theirs = mini
          .search(q.terms.join(" "), {
            combineWith: "OR",
            ...(boosts ? { boostTerm: (t: string) => boosts.get(t) ?? 1 } : {}),
          })
          .slice(0, q.limit)
        expect(ours.length).toBe(theirs.length)
        const theirScore = new Map(
          mini
            .search(q.terms.join(" "), {
              combineWith: "OR",
              ...(boosts ? { boostTerm: (t: string) => boosts.get(t) ?? 1 } : {}),
            })
            .map((r) => [String(r.id), r.score]),
        )
        ours.forEach((hit, i) => {
          expect(hit.score).toBeCloseTo(theirs[i]!.score, 9)
          expect(hit.score).toBeCloseTo(theirScore.get(hit.entryId)!, 9)
        })
      }),
      { numRuns: 300 },
    )
  })
})
