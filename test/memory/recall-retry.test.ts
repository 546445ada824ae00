/**
 * A focused step's first build asks retrieval for the step's cues. When retrieval does not answer (here:
 * not running yet), the build is served without them and says so (`recall: "unavailable"`), and the step's
 * next build asks again: the cues come back within the same step once retrieval answers. Against a real
 * nats-server, the services in this process.
 */
import { Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { memoryService, substrateService } from "../../services/system.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { recordThenDemote } from "../support/fillers.ts"
import { settingsFor, startTestSystem, type TestSystem } from "../support/system.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 5, 3, 8)
const AGENT = "recall-retry"
const TURN = "Maria keeps the spare key to the boathouse under the blue flowerpot by the door."

let system: TestSystem
beforeAll(async () => {
  // Working, the gateway and fade: no substrate, no long-term, no retrieval.
  system = await startTestSystem({}, { memory: false })
})
afterAll(async () => system?.stop())

it("a build served without cues because retrieval did not answer is followed by one that has them", {
  timeout: 90_000,
}, async () => {
  const agent = system.client.agent(AGENT)
  await agent.register({ role: "custom", budget: 200 })
  const clock = steppingClock(T0, MINUTE)
  const entryId = await recordThenDemote(agent, system.server.url, TURN, clock)

  // Without a focused step nothing is recalled, whether retrieval answers or not.
  expect((await agent.buildContext({})).recall).toBe("none")
  const { stepId } = await agent.beginStep({ focus: { query: "Where is the spare key to the boathouse?" } })
  const without = await agent.buildContext({ stepId })
  expect(without.items.some((i) => i.cue)).toBe(false)
  // The caller is told that this context lacks long-term memory, and why.
  expect(without.recall).toBe("unavailable")

  const url = system.server.url
  await system.startReplica(
    Layer.mergeAll(substrateService(settingsFor(url)("wm-substrate")), memoryService(settingsFor(url)("wm-memory"))),
  )
  // Retrieval catches up from the log; the step's next build that finds it answering has the cue.
  const withCue = await eventually(
    "a build of the same step with the recalled turn",
    async () => {
      const built = await agent.buildContext({ stepId })
      return built.items.some((i) => i.entryId === entryId && i.cue) ? built : undefined
    },
    30_000,
    500,
  )
  expect(withCue.text).toContain("blue flowerpot")
  expect(withCue.recall).toBe("served")
  await agent.endStep(stepId)
})
