/** Command-line values of the memory-quality benchmarks, parsed and checked. */
import { readFileSync } from "node:fs"

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
