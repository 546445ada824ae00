/**
 * A burst larger than the background work can absorb (burst/run.ts), once per embedder:
 *
 *   npm run bench:burst -- [--embedders minilm-int8,offline] [--agents 20] [--turns 4000] [--in-flight 64]
 *                          [--later 200] [--later-after 45] [--data <longmemeval.json[.gz]>]
 *                          [--out bench/results/burst.json]
 *
 * The long turns are LongMemEval's assistant turns of 1,000 characters or more (each made distinct, so
 * no vector is remembered from an earlier text), from --data (default: the 100 questions under
 * ../shared/data/longmemeval/); generated turns of the same size when the file is absent.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs"
import { loadavg } from "node:os"
import { dirname } from "node:path"
import { parseArgs } from "node:util"
import { runBurst } from "./burst/run.ts"
import { loadLongMemEval } from "./quality/longmemeval-dataset.ts"
import { memoryText } from "./support/realistic-entries.ts"

const usage =
  "usage: npm run bench:burst -- [--embedders minilm-int8,offline] [--agents 20] [--turns 4000] [--in-flight 64] [--later 200] [--later-after 45] [--data <file>] [--out <file.json>]"

const { values } = parseArgs({
  options: {
    embedders: { type: "string", default: "minilm-int8,offline" },
    agents: { type: "string", default: "20" },
    turns: { type: "string", default: "4000" },
    "in-flight": { type: "string", default: "64" },
    later: { type: "string", default: "200" },
    "later-after": { type: "string", default: "45" },
    data: { type: "string", default: "../shared/data/longmemeval/longmemeval_s_dev100.json.gz" },
    out: { type: "string", default: "bench/results/burst.json" },
  },
})
const positive = (flag: string, value: string | undefined): number => {
  const n = Number(value)
  if (!Number.isInteger(n) || n <= 0) {
    console.error(`--${flag}: expected a positive integer, got ${JSON.stringify(value)}\n${usage}`)
    process.exit(2)
  }
  return n
}
const sizes = {
  agents: positive("agents", values.agents),
  turns: positive("turns", values.turns),
  inFlight: positive("in-flight", values["in-flight"]),
  later: positive("later", values.later),
  laterAfterSeconds: positive("later-after", values["later-after"]),
  answerWithinMs: 15_000,
}

const longTurns = existsSync(values.data!)
  ? loadLongMemEval(values.data!)
      .conversations.flatMap((c) => c.turns.map((t) => t.content))
      .filter((text) => text.startsWith("Assistant: ") && text.length >= 1_000)
  : []
const text = (i: number): string =>
  longTurns.length > 0
    ? `${longTurns[i % longTurns.length]!} (turn ${i})`
    : `${Array.from({ length: 8 }, (_, k) => memoryText(i * 8 + k)).join(" ")} (turn ${i})`
const source = longTurns.length > 0 ? `${values.data} (${longTurns.length} assistant turns)` : "generated"

const runs = []
for (const embedder of values.embedders!.split(",").map((e) => e.trim())) {
  const figures = await runBurst(sizes, embedder, text, (line) => console.log(line))
  console.log(JSON.stringify(figures))
  runs.push(figures)
}
const result = {
  date: new Date().toISOString(),
  loadAverage: loadavg().map((x) => Number(x.toFixed(2))),
  sizes,
  turns: source,
  runs,
}
mkdirSync(dirname(values.out!), { recursive: true })
writeFileSync(values.out!, `${JSON.stringify(result, null, 2)}\n`)
console.log(`written to ${values.out}`)
