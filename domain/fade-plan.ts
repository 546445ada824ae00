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
 * Transient cues, and entries the agent cited in the open step, never fade.
 */
import { HashMap, HashSet } from "effect"
import type { WorkingEntry } from "../contracts/entry.ts"
import type { FadeScore } from "../contracts/fade.ts"
import { rungCost, type AgentView } from "./agent-view.ts"
import { fadeScore, scoringContext, type FadeConfig } from "./fade-score.ts"

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

export const planFade = (view: AgentView, config: FadeConfig): FadeMove[] => {
  const ctx = scoringContext(view, config)
  const inUse = view.step?.referenced
  const candidates: Array<{ entry: WorkingEntry; total: number; parts: FadeScore["parts"] }> = []
  for (const entry of HashMap.values(view.entries)) {
    if (entry.transient) continue
    if (inUse !== undefined && HashSet.has(inUse, entry.id)) continue
    candidates.push({ entry, ...fadeScore(entry, ctx) })
  }
  // Highest totals first; ties go to the older entry, so plans are deterministic.
  candidates.sort((a, b) => b.total - a.total || a.entry.ordinal - b.entry.ordinal)

  const moves: FadeMove[] = []
  const moving = new Set<string>()
  let projected = view.usage
  const score = (c: (typeof candidates)[number], to: 1 | 2 | 3, trigger: "threshold" | "pressure"): FadeScore => ({
    total: c.total,
    parts: c.parts,
    trigger,
    threshold: thresholdFor(config, to),
    usage: ctx.usageRatio,
    tau: ctx.tau,
    now: ctx.now,
  })
  const move = (c: (typeof candidates)[number], trigger: "threshold" | "pressure") => {
    const to = (c.entry.rung + 1) as 1 | 2 | 3
    moves.push({ entryId: c.entry.id, from: c.entry.rung, to, score: score(c, to, trigger), expectSeq: c.entry.lastEventSeq })
    moving.add(c.entry.id)
    projected += projectedCost(c.entry, to, config) - rungCost(c.entry)
  }

  for (const c of candidates) {
    const to = (c.entry.rung + 1) as 1 | 2 | 3
    if (c.total >= thresholdFor(config, to)) move(c, "threshold")
  }
  const limit = ctx.tau * view.budget
  for (const c of candidates) {
    if (projected <= limit) break
    if (!moving.has(c.entry.id)) move(c, "pressure")
  }
  return moves
}
