/**
 * What the fade worker keeps per entry beside the views is bounded by
 * working memory, not by the agent's history: a demotion carries the
 * entry's facts, so nothing is kept for a demoted entry. An entry promoted
 * back to working reads its earlier life from its subject when it demotes
 * again: its second demotion still carries the citations of both lives.
 */
import type { Effect } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { FadeWorker, type FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { fadeSettled } from "../support/fade-settled.ts"
import { FILLER_TURNS } from "../support/fillers.ts"
import { readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

const demotionsOf = async (agentId: string, entryId: string) =>
  (await readLog(system.server.url))
    .map((s) => s.event)
    .filter((e): e is EventOf<"EntryDemoted"> => e._tag === "EntryDemoted" && e.agentId === agentId)
    .filter((e) => e.entryId === entryId)

it("keeps nothing per demoted entry, and a re-promoted entry's second demotion carries both lives' citations", async () => {
  const agent = system.client.agent("fade-lives")
  await agent.register({ role: "custom", budget: 200 })
  const clock = steppingClock(Date.UTC(2024, 5, 3, 8), 60_000)
  const fill = async (n: number) => {
    for (let i = 0; i < n; i++)
      await agent.record({ origin: "USER", content: FILLER_TURNS[i % FILLER_TURNS.length]!, timestamp: clock.next() })
  }
  const { entryId } = await agent.record({
    origin: "USER",
    content: "The ferry to the island leaves at 7:40 from pier 3, and the return is at 18:10.",
    timestamp: clock.next(),
  })
  const first = await agent.beginStep()
  await agent.reference(first.stepId, [entryId])
  await agent.endStep(first.stepId)
  await fill(60)
  await eventually("the first demotion", async () => (await demotionsOf("fade-lives", entryId)).length === 1)
  // Read once fading is done: the fade worker and the working view then hold the log to the same point.
  await fadeSettled(system, "fade-lives")

  // Every filler that demoted left nothing behind in the fade worker.
  const fade = await system.services.runtime.runPromise(FadeWorker as unknown as Effect.Effect<FadeWorkerShape>)
  const demoted = (await readLog(system.server.url)).filter(
    (s) => s.event._tag === "EntryDemoted" && s.event.agentId === "fade-lives",
  ).length
  const inWorking = (await system.liveView("fade-lives"))!.entries
  expect(demoted).toBeGreaterThan(20)
  expect(fade.trackedHistories()).toBeLessThanOrEqual([...inWorking].length)

  // Referenced by id, the long-term entry comes back as native, is cited again, then fades out once more.
  const second = await agent.beginStep()
  await agent.reference(second.stepId, [entryId])
  await eventually("the promotion", async () =>
    (await readLog(system.server.url)).some((s) => s.event._tag === "CuePromoted"),
  )
  await agent.reference(second.stepId, [entryId])
  await agent.endStep(second.stepId)
  await fill(60)
  await eventually("the second demotion", async () => (await demotionsOf("fade-lives", entryId)).length === 2)
  const [once, twice] = await demotionsOf("fade-lives", entryId)
  expect(once!.entry!.citationCount).toBe(1)
  expect(twice!.entry!.citationCount).toBeGreaterThan(once!.entry!.citationCount)
  expect(twice!.entry!.keyPoints ?? once!.entry!.keyPoints).toEqual(once!.entry!.keyPoints)
}, 120_000)
