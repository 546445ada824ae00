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
 *                                [--split dev|held-out] [--embedder minilm-int8|minilm|offline]
 *
 * The file is in LongMemEval's official format (S, M or oracle), plain or
 * gzipped. Abstention questions (`_abs`) are counted and skipped. With --out,
 * the summary goes to <file.json> (the shape of bench:locomo's) and the
 * diagnostics to <file>.details.json. --split takes the questions of the
 * committed tuning split (quality/splits.json).
 */
import { DatasetFormatError } from "./quality/dataset.ts"
import { runLongMemEvalBenchmark } from "./quality/longmemeval.ts"
import { LONGMEMEVAL_BUDGETS, parseNames, parseQualityArgs } from "./quality/options.ts"
import { streamProgress } from "./quality/report.ts"

const usage =
  "usage: npm run bench:longmemeval -- --data <file.json[.gz]> [--budgets 1024,2048,4096,8192] [--questions <id,…>] [--types <type,…>] [--out <file.json>] [--split dev|held-out] [--embedder minilm-int8|minilm|offline]"

const main = async () => {
  const args = parseQualityArgs({
    usage,
    dataset: "longmemeval",
    budgets: LONGMEMEVAL_BUDGETS,
    members: "questions",
    options: { types: { type: "string" } },
  })
  if (args === null) return
  const { types } = args.values
  await runLongMemEvalBenchmark({
    data: args.data,
    budgets: args.budgets,
    ...(args.out !== undefined ? { out: args.out } : {}),
    ...(args.members !== undefined ? { questions: args.members } : {}),
    ...(types !== undefined ? { types: parseNames("--types", types) } : {}),
    progress: streamProgress(process.stderr),
  })
}

main().catch((error: unknown) => {
  const expected = error instanceof DatasetFormatError || (error instanceof Error && error.message.startsWith("--"))
  console.error(expected ? (error as Error).message : error)
  process.exit(1)
})
