/**
 * The LongMemEval benchmark: one agent per question, its sessions fed in
 * date order, the question recorded and asked as a focused step at its date.
 */
import { loadLongMemEval } from "./longmemeval-dataset.ts"
import { LONGMEMEVAL_BUDGETS } from "./options.ts"
import type { Progress } from "./report.ts"
import { type QualityResult, runQualityBenchmark } from "./run.ts"

export interface LongMemEvalOptions {
  /** A LongMemEval file in the official format (S, M or oracle), `.json` or `.json.gz`. */
  readonly data: string
  readonly budgets?: ReadonlyArray<number>
  readonly out?: string
  readonly print?: (line: string) => void
  readonly progress?: Progress
  /** Only these question ids; all when absent. */
  readonly questions?: ReadonlyArray<string>
  /** Only these question types; all when absent. */
  readonly types?: ReadonlyArray<string>
}

export const runLongMemEvalBenchmark = (options: LongMemEvalOptions): Promise<QualityResult> => {
  const loaded = loadLongMemEval(options.data)
  const known = new Set(loaded.conversations.map((c) => c.name))
  const unknown = (options.questions ?? []).filter((id) => !known.has(id) && !loaded.abstentions.includes(id))
  if (unknown.length > 0) throw new Error(`--questions: no question ${unknown.join(", ")} in ${options.data}`)
  const types = new Set(loaded.conversations.map((c) => c.questions[0]!.group))
  const unknownTypes = (options.types ?? []).filter((t) => !types.has(t))
  if (unknownTypes.length > 0)
    throw new Error(`--types: no question of type ${unknownTypes.join(", ")} (have ${[...types].sort().join(", ")})`)
  const conversations = loaded.conversations.filter(
    (c) =>
      (options.questions === undefined || options.questions.includes(c.name)) &&
      (options.types === undefined || options.types.includes(c.questions[0]!.group)),
  )
  if (conversations.length === 0) throw new Error(`--questions/--types: no question of ${options.data} is selected`)
  const notes = [
    loaded.abstentions.length > 0
      ? `${loaded.abstentions.length} abstention question(s) (_abs) counted and skipped`
      : "",
    loaded.emptyTurns > 0 ? `${loaded.emptyTurns} turn(s) without text left out` : "",
  ].filter((n) => n.length > 0)
  return runQualityBenchmark({
    title: "LongMemEval",
    agentPrefix: "lme",
    data: options.data,
    conversations,
    budgets: options.budgets ?? LONGMEMEVAL_BUDGETS,
    skipped: loaded.abstentions,
    notes,
    ...(options.out !== undefined ? { out: options.out } : {}),
    ...(options.print !== undefined ? { print: options.print } : {}),
    ...(options.progress !== undefined ? { progress: options.progress } : {}),
  })
}
