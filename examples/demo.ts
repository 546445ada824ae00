/**
 * The newcomer's demo: one agent's working memory filling up, its budget
 * use after every entry, and the context it builds. Uses only the SDK.
 */
import type { AgentClient } from "../sdk/client.ts"
import { demoQuestion, demoScript } from "./demo-script.ts"

const LABEL = { INTERNAL: "thought", USER: "user", ADVISOR: "advisor", SYSTEM: "system" } as const
const bar = (used: number, budget: number, width = 24) => {
  const filled = Math.min(width, Math.round((used / budget) * width))
  return "█".repeat(filled) + "░".repeat(width - filled)
}
const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s.padEnd(n))

export interface DemoOptions {
  readonly budget?: number
  readonly pauseMs?: number
  readonly log?: (line: string) => void
}

export const runDemo = async (agent: AgentClient, options: DemoOptions = {}) => {
  const log = options.log ?? console.log
  const budget = options.budget ?? 220
  await agent.register({ role: "custom", budget })
  log(`\nDemo agent '${agent.agentId}': role custom, working budget ${budget} tokens\n`)
  for (const entry of demoScript) {
    const recorded = await agent.record({ ...entry, tags: [...(entry.tags ?? [])] })
    const view = await agent.view()
    const rungs = `r0:${view.entriesByRung["0"]} r1:${view.entriesByRung["1"]} r2:${view.entriesByRung["2"]}`
    log(
      `  + ${LABEL[entry.origin].padEnd(7)} ${clip(entry.content, 46)} ${String(recorded.tokens).padStart(3)} tok  ` +
        `usage ${String(view.usage).padStart(4)}/${view.budget} ${bar(view.usage, view.budget)} ${rungs}`,
    )
    if (options.pauseMs) await new Promise((r) => setTimeout(r, options.pauseMs))
  }
  const step = await agent.beginStep({ focus: demoQuestion.focus })
  const context = await agent.buildContext({ stepId: step.stepId })
  const forms: Record<string, number> = {}
  for (const item of context.items) forms[item.form] = (forms[item.form] ?? 0) + 1
  log(
    `\nContext for step '${step.stepId}': ${context.tokens}/${context.budget} tokens, ` +
      `${context.items.length} entries served (${Object.entries(forms)
        .map(([f, n]) => `${n} ${f}`)
        .join(", ")}), ${context.omitted} left out\n`,
  )
  log(
    context.text
      .split("\n")
      .filter(Boolean)
      .map((l) => `  │ ${l}`)
      .join("\n"),
  )
  const missing = demoQuestion.answer.filter((fact) => !context.text.includes(fact))
  log(
    missing.length === 0
      ? `\nThe context answers "${demoQuestion.focus.query}": it holds ${demoQuestion.answer.join(" and ")}.`
      : `\nThe context misses ${missing.join(", ")} for "${demoQuestion.focus.query}".`,
  )
  log(
    context.text.includes(demoQuestion.kept)
      ? `It keeps what the advisor said not to lose: "${demoQuestion.kept}…".`
      : `It lost what the advisor said not to lose: "${demoQuestion.kept}…".`,
  )
  await agent.endStep(step.stepId)
  return context
}
