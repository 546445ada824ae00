import { afterAll, beforeAll, expect, it } from "vitest"
import { startTestSystem, type TestSystem } from "./support/system.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

it("records and builds", async () => {
  const agent = system.client.agent("a1")
  await agent.register({ role: "main" })
  await agent.record({ origin: "USER", content: "hello world" })
  const ctx = await agent.buildContext()
  expect(ctx.text).toContain("hello world")
})
