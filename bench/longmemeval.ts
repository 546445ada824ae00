/**
 * Memory quality on LongMemEval: one agent per question, its ~50 sessions
 * fed turn by turn in date order, the question asked as a focused step at
 * its date; evidence recall (turn and session level) and answer-in-context
 * of the context built at each budget, beside FIFO and BM25 fills of the
 * same turns at the same token counts, by question type, with where the
 * evidence was lost and the latency of each SDK call.
 *
 *   npm run bench:longmemeval -- --data <file.json[.gz]> [--budgets 1024,2048,4096,8192]
 *                                [--questions <id,…>] [--types <type,…>] [--out <file.json>]
 *                                [--split dev|held-out] [--embedder offline|minilm]
 *
 * The file is in LongMemEval's official format (S, M or oracle), plain or
 * gzipped. Abstention questions (`_abs`) are counted and skipped. With --out,
 * the summary goes to <file.json> (the shape of bench:locomo's) and the
 * diagnostics to <file>.details.json. --split takes the questions of the
 * committed tuning split (quality/splits.json).
 */
import { parseArgs } from "node:util"
import { DatasetFormatError } from "./quality/dataset.ts"
import { runLongMemEvalBenchmark } from "./quality/longmemeval.ts"
import { LONGMEMEVAL_BUDGETS, parseBudgets, parseNames, splitMembers } from "./quality/options.ts"
import { streamProgress } from "./quality/report.ts"

const usage =
  "usage: npm run bench:longmemeval -- --data <file.json[.gz]> [--budgets 1024,2048,4096,8192] [--questions <id,…>] [--types <type,…>] [--out <file.json>] [--split dev|held-out] [--embedder offline|minilm]"

const main = async () => {
  const { values } = parseArgs({
    options: {
      data: { type: "string" },
      budgets: { type: "string", default: LONGMEMEVAL_BUDGETS.join(",") },
      questions: { type: "string" },
      types: { type: "string" },
      out: { type: "string" },
      split: { type: "string" },
      embedder: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  })
  if (values.help) {
    console.log(usage)
    return
  }
  if (values.data === undefined) throw new Error(`--data is required\n${usage}`)
  if (values.embedder !== undefined) process.env.WM_EMBEDDER = values.embedder
  if (values.split !== undefined && values.questions !== undefined)
    throw new Error(`--split and --questions: give one\n${usage}`)
  const questions =
    values.questions !== undefined
      ? parseNames("--questions", values.questions)
      : values.split !== undefined
        ? splitMembers("longmemeval", values.split)
        : undefined
  await runLongMemEvalBenchmark({
    data: values.data,
    budgets: parseBudgets(values.budgets),
    ...(values.out !== undefined ? { out: values.out } : {}),
    ...(questions !== undefined ? { questions } : {}),
    ...(values.types !== undefined ? { types: parseNames("--types", values.types) } : {}),
    progress: streamProgress(process.stderr),
  })
}

main().catch((error: unknown) => {
  const expected = error instanceof DatasetFormatError || (error instanceof Error && error.message.startsWith("--"))
  console.error(expected ? (error as Error).message : error)
  process.exit(1)
})
