/**
 * The prompt builder: serialises working memory into a context that never
 * exceeds the budget, packing at several resolutions.
 *
 * 1. Packing, in priority order (newest first unless the caller ranks
 *    otherwise). The best-ranked entries are taken at full fidelity (the
 *    highest form working holds for them) while it fits in the first
 *    FULL_SHARE of the budget (a longer one comes compressed); the next ones compressed (key points where held) until
 *    COMPRESSED_SHARE; the tail in the most compact form held (a summary
 *    where there is one). An entry that does not fit is skipped, so smaller
 *    ones behind it still get in.
 * 2. Fidelity: with what is left, again in priority order, each taken entry
 *    is raised to the highest-fidelity form the remaining budget pays for.
 * 3. Output in timestamp order (oldest first), under a line for each date
 *    and sitting (render.ts), unless asked for priority order (then a header
 *    precedes every block whose sitting differs from the block before it).
 *    Headers are counted exactly once the blocks are laid out; should the
 *    sittings cost more than planned, the least important blocks go.
 *
 * Costs are the block token counts recorded when each representation was
 * made, plus the header lines; both are token-additive (see render.ts), so
 * the sum is the exact count of the text. Only header lines are tokenised
 * here, once per distinct line.
 */
import { DEFAULT_ENCODING, type Encoding } from "../contracts/agent.ts"
import type { BuiltContext as BuiltContextSchema, ContextItem as ContextItemSchema } from "../contracts/api.ts"
import type { RepresentationKind, WorkingEntry } from "../contracts/entry.ts"
import { type AgentView, formTokens } from "./agent-view.ts"
import { type Candidate, rankCandidates, rankedCandidates, timeOrderOf } from "./context-ranking.ts"
import { blockOf, formsOf } from "./entry-memo.ts"
import { dateLineTokens, dayOf, lineTokens, renderDateLine, renderSittingLine, SITTING_GAP_MS } from "./render.ts"

export {
  type Candidate,
  candidatesOf,
  entryStats,
  priorityFor,
  rankCandidates,
  rankedCandidates,
  recencyPriority,
} from "./context-ranking.ts"

export type ContextItem = typeof ContextItemSchema.Type

/** The API's built context before it is stamped with the log position it was built at (`omitted`: candidates that did not fit at all). */
export type BuiltContext = Omit<typeof BuiltContextSchema.Type, "seq">

export type ContextOrder = "timestamp" | "priority"

/** The share of the budget that buys full fidelity for the best-ranked entries. */
export const FULL_SHARE = 0.3
/** Up to this share, the next entries come as key points where working holds them; beyond it, the most compact form. */
export const COMPRESSED_SHARE = 0.65

/** The most compact form working holds for an entry. */
const compactForm = (entry: WorkingEntry): RepresentationKind =>
  entry.summary !== null ? "summary" : entry.keyPoints !== null ? "keyPoints" : "raw"

/** Key points where held, else the most compact form. */
const compressedForm = (entry: WorkingEntry): RepresentationKind =>
  entry.keyPoints !== null ? "keyPoints" : compactForm(entry)

// What a build decides for each candidate, by rank: whether it is taken,
// the form it serves, its tokens, the start of its sitting and the header
// line before it. Shared by every build and grown to the largest view seen:
// a build runs to its end without yielding, and reads only what it wrote, so
// a build of a remembered ranking allocates little beyond its output.
let takenAt = new Uint8Array(256)
const formAt: RepresentationKind[] = []
const tokensAt: number[] = []
const sittingAt: number[] = []
const headerAt: string[] = []

const makeRoom = (candidates: number) => {
  if (takenAt.length < candidates) takenAt = new Uint8Array(Math.max(candidates, 2 * takenAt.length))
  takenAt.fill(0, 0, candidates)
  while (formAt.length < candidates) {
    formAt.push("raw")
    tokensAt.push(0)
    sittingAt.push(0)
    headerAt.push("")
  }
}

/**
 * Writes the header line before each taken rank (`headerAt`), or "" for
 * none, for the blocks laid out in `order`, and returns the tokens of the
 * taken blocks and their headers. Sittings are found in time order: a new
 * one starts on a new day or after a gap of more than SITTING_GAP_MS; a day
 * with several sittings shows the time of each.
 */
const layOut = (
  ranked: ReadonlyArray<Candidate>,
  inTime: Int32Array,
  order: ContextOrder,
  encoding: Encoding,
): number => {
  const n = ranked.length
  const sittingsPerDay = new Map<number, number>()
  let start = Number.NaN
  let previous = Number.NaN
  for (let i = 0; i < n; i++) {
    const rank = inTime[i]!
    if (takenAt[rank] === 0) continue
    const t = ranked[rank]!.entry.timestamp
    if (Number.isNaN(previous) || dayOf(t) !== dayOf(previous) || t - previous > SITTING_GAP_MS) {
      start = t
      sittingsPerDay.set(dayOf(t), (sittingsPerDay.get(dayOf(t)) ?? 0) + 1)
    }
    sittingAt[rank] = start
    previous = t
  }
  let shown = Number.NaN
  let shownDay = Number.NaN
  let tokens = 0
  for (let i = 0; i < n; i++) {
    const rank = order === "timestamp" ? inTime[i]! : i
    if (takenAt[rank] === 0) continue
    tokens += tokensAt[rank]!
    const sitting = sittingAt[rank]!
    if (sitting === shown) {
      headerAt[rank] = ""
      continue
    }
    const day = dayOf(sitting)
    const several = (sittingsPerDay.get(day) ?? 1) > 1
    const line =
      order === "timestamp" && day === shownDay && several
        ? renderSittingLine(sitting)
        : renderDateLine(sitting, several)
    headerAt[rank] = line
    tokens += lineTokens(line, encoding)
    shown = sitting
    shownDay = day
  }
  return tokens
}

export const buildContext = (
  candidates: ReadonlyArray<Candidate>,
  budget: number,
  order: ContextOrder = "timestamp",
  encoding: Encoding = DEFAULT_ENCODING,
): BuiltContext => packContext(rankCandidates(candidates), budget, order, encoding)

/** `buildContext` of candidates already in priority order (`rankCandidates`, `rankedCandidates`). */
export const packContext = (
  ranked: ReadonlyArray<Candidate>,
  budget: number,
  order: ContextOrder = "timestamp",
  encoding: Encoding = DEFAULT_ENCODING,
): BuiltContext => {
  const n = ranked.length
  makeRoom(n)
  let taken = 0
  const days = new Set<number>()
  let used = 0
  for (let rank = 0; rank < n; rank++) {
    const entry = ranked[rank]!.entry
    const day = dayOf(entry.timestamp)
    const header = days.has(day) ? 0 : dateLineTokens(entry.timestamp, encoding)
    const forms = formsOf(entry)
    const wanted =
      used < FULL_SHARE * budget
        ? forms[0]!
        : used < COMPRESSED_SHARE * budget
          ? compressedForm(entry)
          : compactForm(entry)
    // The wanted form if it fits, else anything more compact that does. Full fidelity is bought only inside its
    // share: one long entry (a tool output, a long reply) shown whole would leave no room for the rest.
    for (let f = forms.indexOf(wanted); f < forms.length; f++) {
      const form = forms[f]!
      const tokens = formTokens(entry, form)
      const limit = f === 0 && f < forms.length - 1 && used < FULL_SHARE * budget ? FULL_SHARE * budget : budget
      if (used + tokens + header > limit) continue
      used += tokens + header
      days.add(day)
      takenAt[rank] = 1
      formAt[rank] = form
      tokensAt[rank] = tokens
      taken++
      break
    }
  }
  for (let rank = 0; rank < n; rank++) {
    if (takenAt[rank] === 0) continue
    const entry = ranked[rank]!.entry
    for (const form of formsOf(entry)) {
      if (form === formAt[rank]) break
      const tokens = formTokens(entry, form)
      if (used - tokensAt[rank]! + tokens <= budget) {
        used += tokens - tokensAt[rank]!
        formAt[rank] = form
        tokensAt[rank] = tokens
        break
      }
    }
  }
  const inTime = timeOrderOf(ranked)
  // Headers exactly: sittings may cost more lines than the plan's one per day. Drop the least important blocks until they fit.
  used = layOut(ranked, inTime, order, encoding)
  while (used > budget && taken > 0) {
    let worst = n - 1
    while (takenAt[worst] === 0) worst--
    takenAt[worst] = 0
    taken--
    used = layOut(ranked, inTime, order, encoding)
  }
  let text = ""
  const items = new Array<ContextItem>(taken)
  let next = 0
  for (let i = 0; i < n; i++) {
    const rank = order === "timestamp" ? inTime[i]! : i
    if (takenAt[rank] === 0) continue
    const candidate = ranked[rank]!
    const e = candidate.entry
    const form = formAt[rank]!
    text += headerAt[rank]! + blockOf(e, form)
    items[next++] = {
      entryId: e.id,
      timestamp: e.timestamp,
      origin: e.origin,
      rung: e.rung,
      form,
      cue: candidate.cue,
      tokens: tokensAt[rank]!,
    }
  }
  return { text, tokens: used, budget, items, omitted: n - taken }
}

/** The budget a build may use: the agent's, or a lower per-call limit. */
export const effectiveBudget = (view: AgentView, limit?: number): number =>
  limit === undefined ? view.budgetInForce : Math.min(view.budgetInForce, limit)

export interface ContextOptions {
  readonly limit?: number
  readonly order?: ContextOrder
}

/**
 * The context an agent's view yields: what the working service serves for a
 * build, and what `wm replay` and the dashboard rebuild at a past instant.
 */
export const contextOfView = (view: AgentView, options: ContextOptions = {}): BuiltContext =>
  packContext(
    rankedCandidates(view),
    effectiveBudget(view, options.limit),
    options.order ?? "timestamp",
    view.config.encoding,
  )
