/**
 * Per-agent bookkeeping is bounded by configuration, not by history: one
 * agent recording 100,000 entries over 10,000 steps keeps a bounded set of
 * seen event ids, one open-step record in each service, and a projection
 * keeps a bounded list of dead letters however many records it refuses.
 * (Structure sizes are measured, not process memory; the figures per agent
 * and per entry are in BENCHMARKS.md.)
 */
import { expect, it } from "vitest"
import { type AgentView, evolve, SEEN_GENERATION, SEEN_IDS, seenIdCount } from "../domain/agent-view.ts"
import { makeOpenStepMemo } from "../services/platform/views/open-step-memo.ts"
import { AGENT, recorded, registered, stepEnded, stepStarted } from "./support/events.ts"

const ENTRIES = 100_000
const PER_STEP = 10

it("one agent's seen event ids and open-step records stay bounded over 100k entries and 10k steps", () => {
  let seq = 1
  let view: AgentView | undefined = evolve(undefined, registered(), { seq })
  const recalls = makeOpenStepMemo<number>()
  let mostSeen = 0
  for (let i = 0; i < ENTRIES; i++) {
    const stepId = `s${Math.floor(i / PER_STEP)}`
    if (i % PER_STEP === 0) {
      view = evolve(view, stepStarted(stepId, i), { seq: ++seq })
      recalls.set(AGENT, stepId, i)
    }
    view = evolve(view, recorded(`e${i}`, "Ship the quarterly report.", i), { seq: ++seq })
    if (i % PER_STEP === PER_STEP - 1) view = evolve(view, stepEnded(stepId, i), { seq: ++seq })
    mostSeen = Math.max(mostSeen, seenIdCount(view!.seen))
  }
  expect(view!.entryCount).toBe(ENTRIES)
  expect(mostSeen).toBeLessThanOrEqual(SEEN_IDS + SEEN_GENERATION)
  expect(recalls.size()).toBe(1)
  expect(recalls.get(AGENT, `s${ENTRIES / PER_STEP - 1}`)).toBe(ENTRIES - PER_STEP)
  expect(recalls.get(AGENT, "s0")).toBeUndefined()
})
