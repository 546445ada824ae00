/**
 * Memory quality on LoCoMo: evidence recall and answer-in-context of the
 * context built for each question at each token budget, beside FIFO and
 * BM25 fills of the same turns at the same token counts.
 *
 *   npm run bench:locomo -- --data <dir> [--budgets 512,1024,2048,4096] [--out <file.json>]
 *                           [--conversations conv-26,conv-30 | --split dev|held-out] [--embedder minilm-int8|minilm|offline]
 *
 * Every LoCoMo-format `*.json` file of <dir> is used, or with --conversations
 * only those named (file names without `.json`). Questions of categories 1–4
 * are asked after the whole conversation. --embedder sets WM_EMBEDDER for the
 * run (default: the environment's, else the sentence model). --split takes the
 * conversations of the committed tuning split (quality/splits.json). With --out, the summary
 * goes to <file.json> and the diagnostics to <file>.details.json.
 */
import { DatasetFormatError } from "./quality/dataset.ts"
import { runLocomoBenchmark } from "./quality/locomo.ts"
import { DEFAULT_BUDGETS, parseQualityArgs } from "./quality/options.ts"
import { streamProgress } from "./quality/report.ts"

const usage =
  "usage: npm run bench:locomo -- --data <dir> [--budgets 512,1024,2048,4096] [--out <file.json>] [--conversations conv-26,conv-30 | --split dev|held-out] [--embedder minilm-int8|minilm|offline]"

const main = async () => {
  const args = parseQualityArgs({
    usage,
    dataset: "locomo",
    budgets: DEFAULT_BUDGETS,
    members: "conversations",
    options: {},
  })
  if (args === null) return
  await runLocomoBenchmark({
    data: args.data,
    budgets: args.budgets,
    ...(args.out !== undefined ? { out: args.out } : {}),
    ...(args.members !== undefined ? { conversations: args.members } : {}),
    progress: streamProgress(process.stderr),
  })
}

main().catch((error: unknown) => {
  const expected = error instanceof DatasetFormatError || (error instanceof Error && error.message.startsWith("--"))
  console.error(expected ? (error as Error).message : error)
  process.exit(1)
})
