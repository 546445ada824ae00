import { Schema } from "effect"
import { FadeSettings } from "./fade.ts"
import { AgentId } from "./ids.ts"

export const Role = Schema.Literals(["supervisor", "main", "generator", "mood-advisor", "time-actor", "custom"])
export type Role = typeof Role.Type

/** Working budgets by role, in tokens, as the design sets them. */
export const ROLE_DEFAULT_BUDGETS: Readonly<Record<Exclude<Role, "custom">, number>> = {
  supervisor: 12_000,
  main: 8_000,
  generator: 8_000,
  "mood-advisor": 2_000,
  "time-actor": 256,
}

/** How far hyperfocus expands the budget when the request does not say. */
export const DEFAULT_HYPERFOCUS_FACTOR = 2

export const MAX_BUDGET = 1_000_000
export const Budget = Schema.Int.check(Schema.isBetween({ minimum: 16, maximum: MAX_BUDGET })).annotate({
  description: `token budget, 16..${MAX_BUDGET}`,
})

export const Encoding = Schema.Literals(["o200k_base", "cl100k_base", "p50k_base", "r50k_base"])
export type Encoding = typeof Encoding.Type
export const DEFAULT_ENCODING: Encoding = "o200k_base"

const Weight = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))
/** Weights of the relevance score r = α·sim + β·recency + γ·log(1+freq) + δ·emotion (δ optional). */
export const RelevanceWeights = Schema.Struct({
  alpha: Weight,
  beta: Weight,
  gamma: Weight,
  delta: Schema.optionalKey(Weight),
})
export type RelevanceWeights = typeof RelevanceWeights.Type

export const AgentConfig = Schema.Struct({
  id: AgentId,
  role: Role,
  /** The budget outside hyperfocus. */
  budget: Budget,
  encoding: Encoding,
  fade: Schema.optionalKey(FadeSettings),
  relevance: Schema.optionalKey(RelevanceWeights),
})
export type AgentConfig = typeof AgentConfig.Type
