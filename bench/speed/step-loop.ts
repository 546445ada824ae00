/**
 * The agent loop the step benchmark runs through the SDK, one step a second per agent (the pause
 * stands for the model call): record a user turn, a tool output and a thought; begin a step focused
 * on the user turn; build the context; reference one entry it served (a recalled cue when one was
 * served, else the newest entry); end the step. Every call is timed.
 */
import type { AgentClient } from "../../sdk/client.ts"
import { stepTexts } from "../support/realistic-entries.ts"
import { percentile } from "./stats.ts"

export const STEP_CALLS = ["record", "beginStep", "buildContext", "reference", "endStep"] as const
export type StepCall = (typeof STEP_CALLS)[number]

export interface TimedCall {
  readonly call: StepCall
  /** performance.now() when the SDK call was made and when it resolved. */
  readonly start: number
  readonly end: number
}

export interface TimedStep {
  readonly agent: string
  readonly start: number
  readonly end: number
  readonly calls: ReadonlyArray<TimedCall>
  /** Context items served, of them recalled cues, and the tokens of the built context. */
  readonly served: number
  readonly cues: number
  readonly contextTokens: number
  /** Whether the build held the step's recall from long-term, as its reply said. */
  readonly recalled: boolean
  /** Tokens of the three entries recorded, as the gateway counted them. */
  readonly recordedTokens: readonly [number, number, number]
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A call of a step that failed: which call, and its error. */
class StepCallFailed extends Error {
  readonly call: StepCall
  constructor(call: StepCall, cause: unknown) {
    super(`${call} failed`, { cause })
    this.call = call
  }
}

/** Failed steps under "<call> <error's tag or name>", with the first message of each. */
export interface Failures {
  readonly counts: Record<string, number>
  readonly messages: Record<string, string>
}

const newFailures = (): Failures => ({ counts: {}, messages: {} })

const countFailure = (failures: Failures, error: unknown) => {
  const call = error instanceof StepCallFailed ? error.call : "step"
  const cause = error instanceof StepCallFailed ? error.cause : error
  const tag = (cause as { _tag?: string; name?: string })._tag ?? (cause as Error).name ?? "Error"
  const key = `${call} ${tag}`
  failures.counts[key] = (failures.counts[key] ?? 0) + 1
  failures.messages[key] ??= String((cause as Error).message ?? cause).slice(0, 300)
}

/** One step of the loop; `seed` picks its texts. */
export const runStep = async (agent: AgentClient, seed: number): Promise<TimedStep> => {
  const calls: TimedCall[] = []
  const timed = async <A>(call: StepCall, body: () => Promise<A>): Promise<A> => {
    const start = performance.now()
    const value = await body().catch((error: unknown) => {
      throw new StepCallFailed(call, error)
    })
    calls.push({ call, start, end: performance.now() })
    return value
  }
  const texts = stepTexts(seed)
  const start = performance.now()
  const user = await timed("record", () => agent.record({ origin: "USER", content: texts.user }))
  const tool = await timed("record", () => agent.record({ origin: "SYSTEM", content: texts.tool, tags: ["tool"] }))
  const thought = await timed("record", () => agent.record({ origin: "INTERNAL", content: texts.thought }))
  const { stepId } = await timed("beginStep", () => agent.beginStep({ focus: { query: texts.user } }))
  try {
    const built = await timed("buildContext", () => agent.buildContext({ stepId }))
    const chosen = built.items.find((item) => item.cue) ?? built.items.at(-1)
    if (chosen !== undefined) await timed("reference", () => agent.reference(stepId, [chosen.entryId]))
    await timed("endStep", () => agent.endStep(stepId))
    return {
      agent: agent.agentId,
      start,
      end: performance.now(),
      calls,
      served: built.items.length,
      cues: built.items.filter((item) => item.cue).length,
      contextTokens: built.tokens,
      recalled: built.recall === "served",
      recordedTokens: [user.tokens, tool.tokens, thought.tokens],
    }
  } catch (error) {
    // A step left open would refuse the agent's next one.
    await agent.endStep(stepId).catch(() => undefined)
    throw error
  }
}

export interface LoopWindow {
  /** From the start until measuring begins (every agent has started by then). */
  readonly warmupMs: number
  readonly measureMs: number
}

export interface LoopRun {
  /** Steps that started inside the measured window, all run to their end. */
  readonly steps: ReadonlyArray<TimedStep>
  /** Steps that ended inside the measured window: what CPU over the window is divided by. */
  readonly endedInWindow: number
  readonly windowMs: number
  /** Failed steps, by the call that failed and its error's tag or name. */
  readonly errors: Readonly<Record<string, number>>
  /** The first message of each kind of failure. */
  readonly errorMessages: Readonly<Record<string, string>>
}

/**
 * Runs the loop for every agent, one step a second each, the agents' first steps spread evenly over
 * the first second; a step that overruns its second is followed at once by the next. `atWindow` is
 * called when the measured window opens and closes (to sample CPU).
 */
export const runAgentLoops = async (
  agents: ReadonlyArray<AgentClient>,
  window: LoopWindow,
  seedOf: (agent: number, step: number) => number,
  atWindow: (edge: "open" | "close") => void = () => undefined,
): Promise<LoopRun> => {
  const t0 = performance.now()
  const from = t0 + window.warmupMs
  const to = from + window.measureMs
  const all: TimedStep[] = []
  const failures = newFailures()
  const open = setTimeout(() => atWindow("open"), Math.max(0, from - performance.now()))
  const close = setTimeout(() => atWindow("close"), Math.max(0, to - performance.now()))
  let counter = 0
  await Promise.all(
    agents.map(async (agent, k) => {
      let next = t0 + (k * 1_000) / agents.length
      for (;;) {
        const wait = next - performance.now()
        if (wait > 0) await sleep(wait)
        if (performance.now() >= to) return
        try {
          all.push(await runStep(agent, seedOf(k, counter++)))
        } catch (error) {
          countFailure(failures, error)
        }
        next = Math.max(next + 1_000, performance.now())
      }
    }),
  )
  clearTimeout(open)
  clearTimeout(close)
  return {
    steps: all.filter((s) => s.start >= from && s.start < to),
    endedInWindow: all.filter((s) => s.end >= from && s.end < to).length,
    windowMs: window.measureMs,
    errors: failures.counts,
    errorMessages: failures.messages,
  }
}

/**
 * Every agent runs `stepsPerAgent` steps, one a second, the agents' first steps spread over the first
 * second: each agent sends the same requests however long its steps take.
 */
export const runStepsEach = async (
  agents: ReadonlyArray<AgentClient>,
  stepsPerAgent: number,
  seedOf: (agent: number, step: number) => number,
): Promise<Pick<LoopRun, "steps" | "errors" | "errorMessages">> => {
  const t0 = performance.now()
  const steps: TimedStep[] = []
  const failures = newFailures()
  await Promise.all(
    agents.map(async (agent, k) => {
      let next = t0 + (k * 1_000) / agents.length
      for (let s = 0; s < stepsPerAgent; s++) {
        const wait = next - performance.now()
        if (wait > 0) await sleep(wait)
        try {
          steps.push(await runStep(agent, seedOf(k, s)))
        } catch (error) {
          countFailure(failures, error)
        }
        next = Math.max(next + 1_000, performance.now())
      }
    }),
  )
  return { steps, errors: failures.counts, errorMessages: failures.messages }
}

export interface Quantiles {
  readonly p50Ms: number
  readonly p99Ms: number
}

const quantiles = (xs: ReadonlyArray<number>): Quantiles =>
  xs.length === 0 ? { p50Ms: Number.NaN, p99Ms: Number.NaN } : { p50Ms: percentile(xs, 50), p99Ms: percentile(xs, 99) }

/** Per-step and per-call latencies of a run: a step is the whole loop but the pause. */
export const stepLatencies = (
  steps: ReadonlyArray<TimedStep>,
): { readonly step: Quantiles; readonly calls: Readonly<Record<StepCall, Quantiles>> } => {
  const byCall = Object.fromEntries(STEP_CALLS.map((c) => [c, [] as number[]])) as Record<StepCall, number[]>
  for (const step of steps) for (const c of step.calls) byCall[c.call].push(c.end - c.start)
  return {
    step: quantiles(steps.map((s) => s.end - s.start)),
    calls: Object.fromEntries(STEP_CALLS.map((c) => [c, quantiles(byCall[c])])) as Record<StepCall, Quantiles>,
  }
}
