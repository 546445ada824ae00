/**
 * Which entries move down a rung now. Pure: the same view and configuration
 * always give the same plan.
 *
 * 1. Thresholds: an entry whose total reaches the threshold of the next rung
 *    moves one rung down (0→1, 1→2, 2→out of working). One rung per pass:
 *    a worker applies the plan, lets the view catch up, and plans again.
 * 2. Pressure: while working would still carry more than τ of the budget,
 *    the entries with the highest totals move one rung further, until the
 *    projected usage is at or below τ.
 *
 * Before both, an oversized entry — one that alone keeps working above τ at
 * its rung, so that moving every other entry could not relieve the pressure —
 * moves straight to the first rung projected to fit under τ (key points, the
 * summary), or out of working when none does (its raw text stays in the
 * substrate). The others are then scored and relieved as if it were already
 * there: one huge tool output does not push the rest of working memory out.
 *
 * Transient cues, and entries the agent cited in the open step, never fade.
 */
import { HashMap, HashSet } from "effect"
import type { WorkingEntry } from "../contracts/entry.ts"
import type { FadeScore } from "../contracts/fade.ts"
import { type AgentView, rungCost } from "./agent-view.ts"
import { type FadeConfig, fadeScore, type ScoringContext, scoringContext } from "./fade-score.ts"

export interface FadeMove {
  readonly entryId: string
  readonly from: 0 | 1 | 2
  /** 3 means out of working, to long-term. */
  readonly to: 1 | 2 | 3
  readonly score: FadeScore
  /** The entry's last event sequence the decision was taken on. */
  readonly expectSeq: number
}

const thresholdFor = (config: FadeConfig, to: 1 | 2 | 3) =>
  to === 1 ? config.thresholds.keyPoints : to === 2 ? config.thresholds.summary : config.thresholds.demote

/** Projected cost of an entry once at rung `to`. */
const projectedCost = (entry: WorkingEntry, to: 1 | 2 | 3, config: FadeConfig): number => {
  if (to === 3) return 0
  const raw = entry.tokens.raw
  if (to === 1) return entry.tokens.keyPoints ?? Math.ceil(raw * config.keyPointsShare)
  return entry.tokens.summary ?? Math.ceil(raw * config.summaryShare)
}

const projectedUsage = (
  view: AgentView,
  moves: ReadonlyArray<{ entry: WorkingEntry; to: 1 | 2 | 3 }>,
  config: FadeConfig,
) => moves.reduce((usage, m) => usage + projectedCost(m.entry, m.to, config) - rungCost(m.entry), view.usage)

/** The rung an oversized entry goes to: the first one below its own projected to fit under `limit`, else out. */
const fittingRung = (entry: WorkingEntry, limit: number, config: FadeConfig): 1 | 2 | 3 => {
  for (let to = entry.rung + 1; to <= 2; to++)
    if (projectedCost(entry, to as 1 | 2, config) <= limit) return to as 1 | 2
  return 3
}

export const planFade = (view: AgentView, config: FadeConfig): FadeMove[] => {
  const inUse = view.step?.referenced
  const movable: WorkingEntry[] = []
  for (const entry of HashMap.values(view.entries)) {
    if (entry.transient) continue
    if (inUse !== undefined && HashSet.has(inUse, entry.id)) continue
    movable.push(entry)
  }
  const actual = scoringContext(view, config)
  const limit = actual.tau * view.budgetInForce
  const oversized = movable
    .filter((entry) => rungCost(entry) > limit)
    .map((entry) => ({ entry, to: fittingRung(entry, limit, config) }))
  // Everyone is scored against the usage working will have once the oversized entries are where they fit.
  let projected = projectedUsage(view, oversized, config)
  const ctx =
    oversized.length === 0
      ? actual
      : { ...actual, usageRatio: view.budgetInForce > 0 ? projected / view.budgetInForce : 0 }

  const candidates = movable.map((entry) => ({ entry, ...fadeScore(entry, ctx) }))
  // Highest totals first; ties go to the older entry, so plans are deterministic.
  candidates.sort((a, b) => b.total - a.total || a.entry.ordinal - b.entry.ordinal)

  const moves: FadeMove[] = []
  const moving = new Set<string>()
  const score = (
    scored: { readonly total: number; readonly parts: FadeScore["parts"] },
    to: 1 | 2 | 3,
    trigger: "threshold" | "pressure",
    context: ScoringContext,
  ): FadeScore => ({
    total: scored.total,
    parts: scored.parts,
    trigger,
    threshold: thresholdFor(config, to),
    usage: context.usageRatio,
    tau: context.tau,
    now: context.now,
  })
  const move = (c: (typeof candidates)[number], trigger: "threshold" | "pressure") => {
    const to = (c.entry.rung + 1) as 1 | 2 | 3
    moves.push({
      entryId: c.entry.id,
      from: c.entry.rung,
      to,
      score: score(c, to, trigger, ctx),
      expectSeq: c.entry.lastEventSeq,
    })
    moving.add(c.entry.id)
    projected += projectedCost(c.entry, to, config) - rungCost(c.entry)
  }

  for (const { entry, to } of oversized) {
    // Scored and recorded against the usage as it is, which this entry alone keeps above τ.
    const scored = score(fadeScore(entry, actual), to, "pressure", actual)
    moves.push({ entryId: entry.id, from: entry.rung, to, score: scored, expectSeq: entry.lastEventSeq })
    moving.add(entry.id)
  }
  for (const c of candidates) {
    if (moving.has(c.entry.id)) continue
    const to = (c.entry.rung + 1) as 1 | 2 | 3
    if (c.total >= thresholdFor(config, to)) move(c, "threshold")
  }
  for (const c of candidates) {
    if (projected <= limit) break
    if (!moving.has(c.entry.id)) move(c, "pressure")
  }
  return moves
}
