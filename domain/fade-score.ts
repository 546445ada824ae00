/**
 * The composite fade score of a working entry. Higher means "let it fade":
 *
 *   total = w_age·age + w_pressure·pressure − w_freq·frequency − w_emo·emotion − w_focus·focus
 *
 * - age ∈ [0,1]: half from entries recorded since (1 − e^(−n/turnHorizon)), half from the agent's own
 *   time since the entry was recorded or last cited (1 − e^(−Δt/timeHorizon)). Time is the agent's
 *   clock (its newest entry's timestamp), so an idle agent does not forget and imported history ages
 *   exactly as live history would.
 * - frequency ∈ [0,1]: log(1 + citations + 0.1·reads) / log(1 + 10), capped at 1.
 * - emotion ∈ [0,1]: the emotional weight, or |valence|·arousal of the mood snapshot if larger.
 * - focus ∈ [0,1]: the share of the current focus's terms (task, subgoal, query) the entry contains.
 * - pressure ∈ [0,1]: how far working usage is above τ: (usage/budget − τ)/(1 − τ), 0 below τ.
 *
 * Each part is recorded as its signed contribution, so the parts add up to the total.
 */

import type { WorkingEntry } from "../contracts/entry.ts"
import type { FadeScoreParts } from "../contracts/fade.ts"
import { focusText } from "../contracts/focus.ts"
import { type AgentView, currentFocus, fullestText } from "./agent-view.ts"
import { queryTerms, termStats } from "./terms.ts"

export interface FadeWeights {
  readonly age: number
  readonly frequency: number
  readonly emotion: number
  readonly focus: number
  readonly pressure: number
}

export interface FadeConfig {
  readonly weights: FadeWeights
  /** Totals at which an entry moves to rung 1, to rung 2, and out of working. */
  readonly thresholds: { readonly keyPoints: number; readonly summary: number; readonly demote: number }
  /** Usage threshold τ as a share of the budget, unless the agent or its task kind sets one. */
  readonly tau: number
  readonly tauByTaskKind: Readonly<Record<string, number>>
  readonly turnHorizon: number
  readonly timeHorizonMs: number
  /** Target share of the raw tokens for key points and for the summary. */
  readonly keyPointsShare: number
  readonly summaryShare: number
}

export const DEFAULT_FADE_CONFIG: FadeConfig = {
  weights: { age: 1, frequency: 0.5, emotion: 0.6, focus: 0.5, pressure: 0.5 },
  thresholds: { keyPoints: 0.45, summary: 0.7, demote: 0.9 },
  tau: 0.8,
  tauByTaskKind: {},
  turnHorizon: 40,
  timeHorizonMs: 60 * 60_000,
  keyPointsShare: 0.5,
  summaryShare: 0.25,
}

/** τ in force: the agent's setting for its task kind, the agent's own, the service's for the kind, the default. */
export const tauFor = (view: AgentView, config: FadeConfig): number => {
  const kind = view.taskKind
  const agent = view.config.fade
  return (
    (kind !== null ? agent?.tauByTaskKind?.[kind] : undefined) ??
    agent?.tau ??
    (kind !== null ? config.tauByTaskKind[kind] : undefined) ??
    config.tau
  )
}

export interface ScoringContext {
  readonly config: FadeConfig
  readonly entryCount: number
  readonly now: number
  readonly focusTerms: ReadonlySet<string>
  readonly usageRatio: number
  readonly tau: number
}

export const scoringContext = (view: AgentView, config: FadeConfig): ScoringContext => ({
  config,
  entryCount: view.entryCount,
  now: view.clock,
  focusTerms: new Set(queryTerms(focusText(currentFocus(view)))),
  usageRatio: view.budgetInForce > 0 ? view.usage / view.budgetInForce : 0,
  tau: tauFor(view, config),
})

const coverage = (focusTerms: ReadonlySet<string>, entry: WorkingEntry): number => {
  if (focusTerms.size === 0) return 0
  const own = termStats(fullestText(entry)).frequencies
  let hit = 0
  for (const t of focusTerms) if (own.has(t)) hit++
  return hit / focusTerms.size
}

export const fadeScore = (entry: WorkingEntry, ctx: ScoringContext): { total: number; parts: FadeScoreParts } => {
  const w = ctx.config.weights
  const since = Math.max(0, ctx.entryCount - entry.ordinal - 1)
  const elapsed = Math.max(0, ctx.now - Math.max(entry.trackedSince, entry.lastCitedAt ?? 0))
  const age =
    0.5 * (1 - Math.exp(-since / ctx.config.turnHorizon)) + 0.5 * (1 - Math.exp(-elapsed / ctx.config.timeHorizonMs))
  const frequency = Math.min(1, Math.log1p(entry.citationCount + 0.1 * entry.referenceCount) / Math.log1p(10))
  const mood = entry.moodSnapshot ? Math.abs(entry.moodSnapshot.valence) * entry.moodSnapshot.arousal : 0
  const emotion = Math.max(entry.emotionalWeight, mood)
  const focus = coverage(ctx.focusTerms, entry)
  const pressure = ctx.usageRatio > ctx.tau ? Math.min(1, (ctx.usageRatio - ctx.tau) / Math.max(1e-9, 1 - ctx.tau)) : 0
  const parts: FadeScoreParts = {
    age: w.age * age,
    frequency: -w.frequency * frequency,
    emotion: -w.emotion * emotion,
    focus: -w.focus * focus,
    pressure: w.pressure * pressure,
  }
  return { total: parts.age + parts.frequency + parts.emotion + parts.focus + parts.pressure, parts }
}
