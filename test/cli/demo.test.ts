/** The newcomer's demo against a real nats-server: its closing context answers its closing question. */
import { afterAll, beforeAll, expect, it } from "vitest"
import { runDemo } from "../../examples/demo.ts"
import { demoQuestion } from "../../examples/demo-script.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

it("the demo's final context holds what answers its final question and what the advisor said to keep, within the budget", {
  timeout: 60_000,
}, async () => {
  const lines: string[] = []
  const context = await runDemo(system.client.agent("demo-test"), { log: (l) => lines.push(l) })
  for (const fact of demoQuestion.answer) expect(context.text).toContain(fact)
  expect(context.text).toContain(demoQuestion.kept)
  expect(context.tokens).toBeLessThanOrEqual(context.budget)
  expect(lines.at(-2)).toContain("The context answers")
  expect(lines.at(-1)).toContain("It keeps what the advisor said")
})
