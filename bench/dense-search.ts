/**
 * The dense search of merged retrieval, in process: the speed benchmark's
 * 100k memories (bench/support/realistic-entries.ts) embedded by the offline
 * model in one DenseIndex, and its questions as queries, each embedded as
 * retrieval does (the question without its words common to more than a fifth
 * of the records), top 50, unfiltered and with a filter letting two rows in
 * three through.
 *
 *   node bench/dense-search.ts [--records 100000] [--queries 300] [--rounds 3] [--impl FILE ...]
 *
 * With several `--impl` files (modules exporting `DenseIndex`), each builds
 * its own index and the rounds run them interleaved; their results are
 * checked equal. Each search's CPU time (this process's user + system time)
 * besides its wall time: on a shared machine a preempted search's wall time
 * counts the wait, its CPU time does not.
 */
import { parseArgs } from "node:util"
import { distinctiveWords, terms } from "../domain/terms.ts"
import { LexicalIndex } from "../services/memory/retrieval/lexical-index.ts"
import { loadOfflineEmbedder } from "../services/platform/embedding/offline-embedder.ts"
import { median, percentile } from "./speed/stats.ts"
import { memoryQuestion, memoryText } from "./support/realistic-entries.ts"

interface Searchable {
  set(id: string, vector: Float32Array): void
  search(q: Float32Array, limit: number, accept?: (id: string) => boolean): Array<{ id: string; score: number }>
  readonly rescored?: number
  readonly vectorBytes: number
}

const { values } = parseArgs({
  options: {
    records: { type: "string", default: "100000" },
    queries: { type: "string", default: "300" },
    rounds: { type: "string", default: "3" },
    impl: { type: "string", multiple: true, default: ["../services/memory/longterm/dense-index.ts"] },
  },
})
const records = Number(values.records)
const queries = Number(values.queries)
const rounds = Number(values.rounds)
const AGENT = "bench-recall"
const DEPTH = 50
const COMMON_WORD_SHARE = 0.2

const embedder = await loadOfflineEmbedder()
const vectors: Float32Array[] = []
for (let start = 0; start < records; start += 1000)
  vectors.push(
    ...(await embedder.embed(Array.from({ length: Math.min(1000, records - start) }, (_, k) => memoryText(start + k)))),
  )
const lexical = new LexicalIndex()
for (let i = 0; i < records; i++) lexical.add(AGENT, `memory-${i}`, terms(memoryText(i)))
const questions = await embedder.embed(
  Array.from({ length: queries }, (_, i) =>
    distinctiveWords(
      memoryQuestion(i),
      (t) => lexical.documentFrequency(AGENT, t),
      lexical.documentCount(AGENT),
      COMMON_WORD_SHARE,
    ),
  ),
)
const accept = (id: string) => Number(id.slice(7)) % 3 !== 0

const implementations = await Promise.all(
  values.impl.map(async (file) => {
    const url = file.startsWith("/") ? `file://${file}` : new URL(file, import.meta.url).href
    const { DenseIndex } = (await import(url)) as { DenseIndex: new (dims: number) => Searchable }
    const index = new DenseIndex(embedder.dims)
    vectors.forEach((v, i) => {
      index.set(`memory-${i}`, v)
    })
    console.log(`${file}: ${(index.vectorBytes / 2 ** 20).toFixed(1)} MB of vectors`)
    return { file, index }
  }),
)

const reference = implementations[0]!.index
for (const q of questions)
  for (const filter of [undefined, accept]) {
    const expected = JSON.stringify(reference.search(q, DEPTH, filter))
    for (const { file, index } of implementations.slice(1))
      if (JSON.stringify(index.search(q, DEPTH, filter)) !== expected)
        throw new Error(`${file} differs from ${implementations[0]!.file}`)
  }

const cpuMs = (since: NodeJS.CpuUsage) => {
  const { user, system } = process.cpuUsage(since)
  return (user + system) / 1000
}
const fmt = (x: number) => x.toFixed(2)
const samples = implementations.map(() => ({
  wall: [] as number[],
  cpu: [] as number[],
  filteredCpu: [] as number[],
  rescored: [] as number[],
}))
const line = (label: string, s: (typeof samples)[number]) =>
  `${label}: wall p50 ${fmt(median(s.wall))} p99 ${fmt(percentile(s.wall, 99))} ms; ` +
  `CPU p50 ${fmt(median(s.cpu))} p99 ${fmt(percentile(s.cpu, 99))} ms; ` +
  `filtered CPU p50 ${fmt(median(s.filteredCpu))} p99 ${fmt(percentile(s.filteredCpu, 99))} ms; ` +
  `rows scored in float32 p50 ${median(s.rescored)} p99 ${percentile(s.rescored, 99)}`
for (let round = 0; round < rounds; round++) {
  implementations.forEach(({ file, index }, n) => {
    const s = { wall: [] as number[], cpu: [] as number[], filteredCpu: [] as number[], rescored: [] as number[] }
    for (const q of questions) {
      const start = performance.now()
      let since = process.cpuUsage()
      index.search(q, DEPTH)
      s.cpu.push(cpuMs(since))
      s.wall.push(performance.now() - start)
      s.rescored.push(index.rescored ?? records)
      since = process.cpuUsage()
      index.search(q, DEPTH, accept)
      s.filteredCpu.push(cpuMs(since))
    }
    for (const key of ["wall", "cpu", "filteredCpu", "rescored"] as const) samples[n]![key].push(...s[key])
    console.log(line(`round ${round + 1} ${file}`, s))
  })
}
for (const [n, { file }] of implementations.entries()) console.log(line(`all rounds ${file}`, samples[n]!))
