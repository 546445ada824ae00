/** The README's examples, run against a real nats-server with every service. */
import { afterAll, beforeAll, expect, it } from "vitest"
import { runCues } from "../../examples/cues.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
}, 60_000)
afterAll(async () => system?.stop())

it("examples/cues.ts: the demoted puppy entry comes back as a cue, is promoted, and is found with its raw text", {
  timeout: 90_000,
}, async () => {
  const { context, results, raw } = await runCues(system.client.agent("cues-example"))
  const cue = context.items.find((i) => i.cue)
  expect(cue).toBeDefined()
  expect(context.text).toContain("puppy")
  expect(results[0]?.entryId).toBe(cue!.entryId)
  expect(raw.content).toBe("We adopted a golden retriever puppy called Biscuit last week.")
})
