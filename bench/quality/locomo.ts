/** The LoCoMo benchmark: a directory of LoCoMo conversations, their questions of categories 1–4 asked after each. */
import { askedOnly, loadLocomoDirectory, selectConversations } from "./locomo-dataset.ts"
import { DEFAULT_BUDGETS } from "./options.ts"
import type { Progress } from "./report.ts"
import { type QualityResult, runQualityBenchmark } from "./run.ts"

export interface LocomoOptions {
  /** A directory of LoCoMo-format `*.json` files. */
  readonly data: string
  readonly budgets?: ReadonlyArray<number>
  readonly out?: string
  readonly print?: (line: string) => void
  readonly progress?: Progress
  /** Only these conversations (file names without `.json`, or `file#sample`); all when absent. */
  readonly conversations?: ReadonlyArray<string>
}

export const runLocomoBenchmark = (options: LocomoOptions): Promise<QualityResult> => {
  const loaded = loadLocomoDirectory(options.data)
  const conversations =
    options.conversations === undefined
      ? loaded.conversations
      : selectConversations(loaded.conversations, options.conversations)
  return runQualityBenchmark({
    title: "LoCoMo",
    agentPrefix: "locomo",
    data: options.data,
    conversations: conversations.map(askedOnly),
    budgets: options.budgets ?? DEFAULT_BUDGETS,
    skipped: loaded.skipped,
    notes: loaded.skipped.map((file) => `skipped ${file}: not a LoCoMo conversation`),
    ...(options.out !== undefined ? { out: options.out } : {}),
    ...(options.print !== undefined ? { print: options.print } : {}),
    ...(options.progress !== undefined ? { progress: options.progress } : {}),
  })
}
