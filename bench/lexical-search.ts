/**
 * The lexical searches of merged retrieval, in process: the speed benchmark's
 * 100k memories (bench/support/realistic-entries.ts) in one agent's lexical
 * index, and its questions as queries, each searched as retrieval does — the
 * query's own terms, then the query expanded by the best five hits' rare
 * shared terms (domain/query-expansion.ts), top 50 both. The dense ranking
 * that also feeds the expansion in the service is left out: the feedback is
 * the lexical ranking alone.
 *
 *   node bench/lexical-search.ts [--records 100000] [--queries 300] [--rounds 3] [--impl FILE ...]
 *
 * With several `--impl` files (modules exporting `LexicalIndex`), each builds
 * its own index and the rounds run them interleaved; their results are
 * checked equal. Besides wall time, each search's CPU time (this process's
 * user + system time): on a shared machine a preempted search's wall time
 * counts the wait, its CPU time does not.
 */
import { parseArgs } from "node:util"
import { DEFAULT_EXPANSION, expansionTerms } from "../domain/query-expansion.ts"
import { fuseRankings } from "../domain/relevance.ts"
import { terms } from "../domain/terms.ts"
import { median, percentile } from "./speed/stats.ts"
import { memoryQuestion, memoryText } from "./support/realistic-entries.ts"

interface Searchable {
  add(agentId: string, entryId: string, terms: ReadonlyArray<string>): void
  search(
    agentId: string,
    terms: ReadonlyArray<string>,
    limit: number,
    boosts?: ReadonlyMap<string, number>,
  ): Array<{ entryId: string; score: number }>
  termsOf(agentId: string, entryId: string): ReadonlyArray<string>
  documentFrequency(agentId: string, term: string): number
  documentCount(agentId: string): number
}

const { values } = parseArgs({
  options: {
    records: { type: "string", default: "100000" },
    queries: { type: "string", default: "300" },
    rounds: { type: "string", default: "3" },
    impl: { type: "string", multiple: true, default: ["../services/memory/retrieval/lexical-index.ts"] },
  },
})
const records = Number(values.records)
const queries = Number(values.queries)
const rounds = Number(values.rounds)
const AGENT = "bench-recall"
const DEPTH = 50

const implementations = await Promise.all(
  values.impl.map(async (file) => {
    const url = file.startsWith("/") ? `file://${file}` : new URL(file, import.meta.url).href
    const { LexicalIndex } = (await import(url)) as { LexicalIndex: new () => Searchable }
    const index = new LexicalIndex()
    for (let i = 0; i < records; i++) index.add(AGENT, `memory-${i}`, terms(memoryText(i)))
    return { file, index }
  }),
)

/** The expanded query of question `i`, from the reference index's first search. */
const reference = implementations[0]!.index
const plans = Array.from({ length: queries }, (_, i) => {
  const queryTerms = terms(memoryQuestion(i))
  const first = reference.search(AGENT, queryTerms, DEPTH)
  const fused = fuseRankings([first.map((h) => h.entryId)], 2)
  const best = [...fused].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, DEFAULT_EXPANSION.documents)
  const added = expansionTerms(
    best.map(([id, weight]) => ({ terms: reference.termsOf(AGENT, id), weight })),
    queryTerms,
    (t) => reference.documentFrequency(AGENT, t),
    reference.documentCount(AGENT),
    DEFAULT_EXPANSION.terms,
  )
  const boosts = new Map(added.map((t) => [t.term, DEFAULT_EXPANSION.weight * t.weight]))
  return { queryTerms, expandedTerms: [...queryTerms, ...boosts.keys()], boosts }
})

for (const plan of plans) {
  const expected = JSON.stringify(reference.search(AGENT, plan.expandedTerms, DEPTH, plan.boosts))
  for (const { file, index } of implementations.slice(1))
    if (JSON.stringify(index.search(AGENT, plan.expandedTerms, DEPTH, plan.boosts)) !== expected)
      throw new Error(`${file} differs from ${implementations[0]!.file} on ${plan.expandedTerms.join(" ")}`)
}

const samples = implementations.map(() => ({ first: [] as number[], expanded: [] as number[], cpu: [] as number[] }))
const cpuMs = (since: NodeJS.CpuUsage) => {
  const { user, system } = process.cpuUsage(since)
  return (user + system) / 1000
}
const fmt = (x: number) => x.toFixed(2)
for (let round = 0; round < rounds; round++) {
  implementations.forEach(({ file, index }, n) => {
    const first: number[] = []
    const expanded: number[] = []
    const cpu: number[] = []
    for (const plan of plans) {
      let start = performance.now()
      index.search(AGENT, plan.queryTerms, DEPTH)
      first.push(performance.now() - start)
      start = performance.now()
      const since = process.cpuUsage()
      index.search(AGENT, plan.expandedTerms, DEPTH, plan.boosts)
      cpu.push(cpuMs(since))
      expanded.push(performance.now() - start)
    }
    samples[n]!.first.push(...first)
    samples[n]!.expanded.push(...expanded)
    samples[n]!.cpu.push(...cpu)
    console.log(
      `round ${round + 1} ${file}: first p50 ${fmt(median(first))} p99 ${fmt(percentile(first, 99))} ms; ` +
        `expanded p50 ${fmt(median(expanded))} p99 ${fmt(percentile(expanded, 99))} max ${fmt(Math.max(...expanded))} ms ` +
        `(CPU p50 ${fmt(median(cpu))} p99 ${fmt(percentile(cpu, 99))})`,
    )
  })
}
implementations.forEach(({ file }, n) => {
  const { first, expanded, cpu } = samples[n]!
  console.log(
    `all rounds ${file}: first p50 ${fmt(median(first))} p99 ${fmt(percentile(first, 99))} ms; ` +
      `expanded p50 ${fmt(median(expanded))} p99 ${fmt(percentile(expanded, 99))} max ${fmt(Math.max(...expanded))} ms ` +
      `(CPU p50 ${fmt(median(cpu))} p99 ${fmt(percentile(cpu, 99))})`,
  )
})
