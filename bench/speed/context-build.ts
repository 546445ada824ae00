/**
 * Context build latency for a full supervisor view: ~12 000 tokens of
 * realistic entries (the oldest faded to summaries, the next to key points),
 * folded by the shared reducer, then built many times the way the working
 * service builds it for a `context.build` request.
 */
import type { AgentView } from "../../domain/agent-view.ts"
import { type BuiltContext, contextOfView } from "../../domain/context-builder.ts"
import { fullSupervisorView } from "../support/full-view.ts"
import { median, percentile } from "./stats.ts"

/**
 * What the working service does for a `context.build` request without a
 * limit, once the step's cues are in the view (`decideRead`): rank by
 * relevance to the focus (remembered with the view's parts), then pack and
 * render.
 */
export const buildAsTheServiceDoes = (view: AgentView): BuiltContext => contextOfView(view)

export interface ContextBuildRound {
  readonly p50Ms: number
  readonly p99Ms: number
}

export interface ContextBuildFigures {
  /** Medians over the rounds of each round's percentiles. */
  readonly p50Ms: number
  readonly p99Ms: number
  readonly rounds: ReadonlyArray<ContextBuildRound>
  readonly iterations: number
  readonly entries: number
  readonly usage: number
  readonly served: { readonly tokens: number; readonly items: number; readonly omitted: number }
}

export interface ContextBuildBench {
  /** Times `iterations` builds one by one; percentiles of the individual timings. */
  readonly round: () => ContextBuildRound
  /** The figures of the rounds run so far. */
  readonly figures: () => ContextBuildFigures
}

/**
 * Builds the view and warms the builder up; each `round()` then times
 * `iterations` builds. Rounds are meant to be spread over a run, so that one
 * burst of load on a shared machine does not decide the figure.
 */
export const contextBuildBench = (options: {
  readonly warmup: number
  readonly iterations: number
}): ContextBuildBench => {
  const view = fullSupervisorView()
  let sink = 0
  for (let i = 0; i < options.warmup; i++) sink += buildAsTheServiceDoes(view).tokens
  const built = buildAsTheServiceDoes(view)
  if (sink + built.tokens <= 0 || built.tokens > view.budgetInForce)
    throw new Error("context build produced nothing, or went over budget")
  const rounds: ContextBuildRound[] = []
  const samples = new Float64Array(options.iterations)
  return {
    round: () => {
      for (let i = 0; i < options.iterations; i++) {
        const start = performance.now()
        const b = buildAsTheServiceDoes(view)
        samples[i] = performance.now() - start
        sink += b.tokens
      }
      const all = Array.from(samples)
      const round = { p50Ms: percentile(all, 50), p99Ms: percentile(all, 99) }
      rounds.push(round)
      return round
    },
    figures: () => ({
      p50Ms: median(rounds.map((r) => r.p50Ms)),
      p99Ms: median(rounds.map((r) => r.p99Ms)),
      rounds,
      iterations: options.iterations,
      entries: built.items.length + built.omitted,
      usage: view.usage,
      served: { tokens: built.tokens, items: built.items.length, omitted: built.omitted },
    }),
  }
}
