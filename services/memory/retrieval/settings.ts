/**
 * How retrieval recalls and warms up: which hits come back as cues, how many a recall considers, the share
 * of the agent's budget a step's cues may fill, and how many records a warm-up promotes.
 */
import { Context, Effect, Layer } from "effect"
import { settings as configured } from "../../../contracts/settings.ts"

export interface RetrievalSettingsShape {
  /**
   * Hits come back as cues only when their dense cosine, or their lexical match scaled to the best, reaches this
   * (0 by default: the `recallDepth` best hits qualify, and the builder ranks them).
   */
  readonly cueThreshold: number
  /** How many hits a recall considers. */
  readonly recallDepth: number
  /** Cues of one step may carry at most this share of the agent's budget. */
  readonly cueBudgetShare: number
  readonly warmUpCount: number
}

export class RetrievalSettings extends Context.Service<RetrievalSettings, RetrievalSettingsShape>()(
  "wm/RetrievalSettings",
) {
  /** WM_CUE_THRESHOLD, WM_RECALL_DEPTH, WM_CUE_BUDGET_SHARE, WM_WARMUP_COUNT, read with Effect Config; `settings` overrides them. */
  static readonly make = (settings: Partial<RetrievalSettingsShape> = {}) =>
    Layer.unwrap(
      Effect.gen(function* () {
        return Layer.succeed(RetrievalSettings, {
          cueThreshold: yield* configured.WM_CUE_THRESHOLD.config,
          recallDepth: yield* configured.WM_RECALL_DEPTH.config,
          cueBudgetShare: yield* configured.WM_CUE_BUDGET_SHARE.config,
          warmUpCount: yield* configured.WM_WARMUP_COUNT.config,
          ...settings,
        })
      }).pipe(Effect.orDie),
    )
}
