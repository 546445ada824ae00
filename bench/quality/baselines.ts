/**
 * The baselines, pure: which turns FIFO and BM25 put in a context of a
 * given token budget. Turns cost their raw block tokens, the same number
 * the working-memory context builder charges for them.
 */
import { createRequire } from "node:module"

/**
 * FIFO: the most recent turns that fit, counting back from the end of the
 * conversation and stopping at the first that does not. Positions in
 * conversation order.
 */
export const fifoFill = (costs: ReadonlyArray<number>, budget: number): number[] => {
  const taken: number[] = []
  let used = 0
  for (let i = costs.length - 1; i >= 0; i--) {
    const cost = costs[i]!
    if (used + cost > budget) break
    used += cost
    taken.push(i)
  }
  return taken.reverse()
}

/**
 * Fills in rank order: each turn that still fits is taken, one that does not
 * is skipped and the next tried. Positions in conversation order.
 */
export const rankedFill = (ranking: ReadonlyArray<number>, costs: ReadonlyArray<number>, budget: number): number[] => {
  const taken: number[] = []
  let used = 0
  for (const i of ranking) {
    const cost = costs[i]
    if (cost === undefined || used + cost > budget) continue
    used += cost
    taken.push(i)
  }
  return taken.sort((a, b) => a - b)
}

// ---------------------------------------------------------------------------
// BM25 (wink-bm25-text-search, with wink-nlp-utils' text preparation)

type PrepTask = (input: never) => unknown
interface Bm25Engine {
  defineConfig(config: {
    fldWeights: Record<string, number>
    bm25Params?: { k1?: number; b?: number; k?: number }
  }): boolean
  definePrepTasks(tasks: ReadonlyArray<PrepTask>, field?: string): number
  addDoc(doc: Record<string, string>, id: number): number
  consolidate(precision?: number): boolean
  search(text: string, limit?: number): Array<[string, number]>
}
interface NlpUtils {
  readonly string: { readonly lowerCase: PrepTask; readonly tokenize0: PrepTask }
  readonly tokens: { readonly removeWords: PrepTask; readonly stem: PrepTask }
}

const require = createRequire(import.meta.url)
const bm25 = require("wink-bm25-text-search") as () => Bm25Engine
const nlp = require("wink-nlp-utils") as NlpUtils

/** Lowercase, split on non-word characters, English stop words removed, Porter2 stems. */
const PREPARATION: ReadonlyArray<PrepTask> = [
  nlp.string.lowerCase,
  nlp.string.tokenize0,
  nlp.tokens.removeWords,
  nlp.tokens.stem,
]

/** The engine refuses to consolidate fewer documents; empty fillers (never matched) make up the count. */
const MIN_DOCUMENTS = 3

export interface Bm25Index {
  /** Positions of the documents that share a term with the query, best first (ties: earlier first). */
  readonly rank: (query: string) => number[]
}

/** BM25 (k1 1.2, b 0.75) over the documents, one per turn. */
export const bm25Index = (documents: ReadonlyArray<string>): Bm25Index => {
  const engine = bm25()
  engine.defineConfig({ fldWeights: { text: 1 }, bm25Params: { k1: 1.2, b: 0.75, k: 1 } })
  engine.definePrepTasks(PREPARATION)
  documents.forEach((text, i) => {
    engine.addDoc({ text }, i)
  })
  for (let i = documents.length; i < MIN_DOCUMENTS; i++) engine.addDoc({ text: "" }, i)
  engine.consolidate()
  return {
    rank: (query) =>
      engine
        .search(query, Math.max(1, documents.length))
        .map(([id, score]) => ({ i: Number(id), score }))
        .filter(({ i }) => i < documents.length)
        .sort((a, b) => b.score - a.score || a.i - b.i)
        .map(({ i }) => i),
  }
}
