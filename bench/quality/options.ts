/** Command-line values of the memory-quality benchmarks, parsed and checked. */
import { readFileSync } from "node:fs"
import { type ParseArgsOptionsConfig, parseArgs } from "node:util"

/** LoCoMo's budgets; LongMemEval's histories are longer and its turns larger (LONGMEMEVAL_BUDGETS). */
export const DEFAULT_BUDGETS: ReadonlyArray<number> = [512, 1024, 2048, 4096]
export const LONGMEMEVAL_BUDGETS: ReadonlyArray<number> = [1024, 2048, 4096, 8192]
/** The smallest budget the API accepts. */
export const MIN_BUDGET = 16

/** "512,1024" -> [512, 1024]: positive integers, ascending, without repeats. */
export const parseBudgets = (text: string): number[] => {
  const parts = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
  if (parts.length === 0) throw new Error(`--budgets: expected comma-separated token budgets, got '${text}'`)
  const budgets = parts.map((part) => {
    if (!/^\d+$/.test(part) || Number(part) < MIN_BUDGET) {
      throw new Error(`--budgets: '${part}' is not a whole number of tokens of at least ${MIN_BUDGET}`)
    }
    return Number(part)
  })
  return [...new Set(budgets)].sort((a, b) => a - b)
}

/** Where the diagnostics go beside `--out`: "results/locomo.json" -> "results/locomo.details.json". */
export const detailsPath = (out: string): string => `${out.replace(/\.json$/i, "")}.details.json`

/** `--conversations "conv-26, conv-30.json"` -> ["conv-26", "conv-30"]: names without `.json`, without repeats. */
export const parseNames = (flag: string, text: string): string[] => {
  const names = text
    .split(",")
    .map((s) => s.trim().replace(/\.json$/i, ""))
    .filter((s) => s.length > 0)
  if (names.length === 0) throw new Error(`${flag}: expected comma-separated names, got '${text}'`)
  return [...new Set(names)]
}

/** The committed tuning split (splits.json): `dev` was tuned on, `held-out` looked at only at the end. */
export const SPLITS = ["dev", "held-out"] as const

/** The question ids (LongMemEval) or conversation names (LoCoMo) of a split named by `--split`. */
export const splitMembers = (dataset: "longmemeval" | "locomo", name: string): string[] => {
  if (!(SPLITS as ReadonlyArray<string>).includes(name))
    throw new Error(`--split: '${name}' is not one of ${SPLITS.join(", ")}`)
  const splits = JSON.parse(readFileSync(new URL("./splits.json", import.meta.url), "utf8")) as Record<
    string,
    { readonly dev: string[]; readonly heldOut: string[] }
  >
  const split = splits[dataset]!
  return name === "dev" ? split.dev : split.heldOut
}

/** An entry point's part of the command line: the options only it takes, beside the shared ones. */
export interface QualityCommand<O extends ParseArgsOptionsConfig> {
  readonly usage: string
  /** Whose split `--split` names. */
  readonly dataset: "longmemeval" | "locomo"
  /** `--budgets` when not given. */
  readonly budgets: ReadonlyArray<number>
  /** The option naming the members to run, instead of a split: `conversations` (LoCoMo), `questions` (LongMemEval). */
  readonly members: "conversations" | "questions"
  readonly options: O
}

/** The shared options, checked, and the values of the entry point's own. */
export interface QualityArgs<O extends ParseArgsOptionsConfig> {
  readonly data: string
  readonly budgets: number[]
  readonly out?: string
  /** Those named by the members option or the split; undefined: all. */
  readonly members?: string[]
  readonly values: ReturnType<typeof parseArgs<{ options: O }>>["values"]
}

/**
 * The command line: --data, --budgets, --out, --split, --embedder, --help and the members option, with the
 * entry point's own. Null once --help has printed the usage. --embedder sets WM_EMBEDDER for the run.
 */
export const parseQualityArgs = <const O extends ParseArgsOptionsConfig>(
  command: QualityCommand<O>,
): QualityArgs<O> | null => {
  const { usage, members: flag } = command
  const parsed = parseArgs({
    options: {
      data: { type: "string" },
      budgets: { type: "string", default: command.budgets.join(",") },
      out: { type: "string" },
      [flag]: { type: "string" },
      split: { type: "string" },
      embedder: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
      ...command.options,
    },
  }).values
  const values = parsed as Record<string, unknown>
  const text = (name: string) => values[name] as string | undefined
  if (values.help === true) {
    console.log(usage)
    return null
  }
  const data = text("data")
  if (data === undefined) throw new Error(`--data is required\n${usage}`)
  const embedder = text("embedder")
  if (embedder !== undefined) process.env.WM_EMBEDDER = embedder
  const named = text(flag)
  const split = text("split")
  if (split !== undefined && named !== undefined) throw new Error(`--split and --${flag}: give one\n${usage}`)
  const members =
    named !== undefined
      ? parseNames(`--${flag}`, named)
      : split !== undefined
        ? splitMembers(command.dataset, split)
        : undefined
  const out = text("out")
  return {
    data,
    budgets: parseBudgets(text("budgets")!),
    ...(out !== undefined ? { out } : {}),
    ...(members !== undefined ? { members } : {}),
    values: parsed as QualityArgs<O>["values"],
  }
}
