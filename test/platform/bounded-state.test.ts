/**
 * Per-agent bookkeeping is bounded by configuration, not by history: one
 * agent recording 100,000 entries over 10,000 steps keeps a bounded set of
 * seen event ids, one open-step record in each service, and a projection
 * keeps a bounded list of dead letters however many records it refuses.
 * Entries that left working for long-term leave nothing behind in the view:
 * where they stand is on their own subjects in the log.
 * (Structure sizes are measured, not process memory; the figures per agent
 * and per entry are in BENCHMARKS.md.)
 */
import { HashMap } from "effect"
import { expect, it } from "vitest"
import { type AgentView, evolve, SEEN_GENERATION, SEEN_IDS, seenIdCount } from "../../domain/agent-view.ts"
import { encodeView } from "../../services/platform/partitions/view-codec.ts"
import { makeOpenStepMemo } from "../../services/platform/views/open-step-memo.ts"
import { AGENT, demoted, recorded, registered, stepEnded, stepStarted } from "../support/events.ts"

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

it("one agent's view stays the same size however many of its 100k entries were demoted to long-term", () => {
  const IN_WORKING = 10
  let seq = 1
  let view: AgentView | undefined = evolve(undefined, registered(), { seq })
  /** The view as a partition snapshot stores it, in bytes of JSON, after each count of demoted entries. */
  const encodedAfter = new Map<number, number>()
  for (let i = 0; i < ENTRIES + IN_WORKING; i++) {
    view = evolve(view, recorded(`entry-${i}`, "Ship the quarterly report.", i), { seq: ++seq })
    if (i >= IN_WORKING) view = evolve(view, demoted(`entry-${i - IN_WORKING}`, i), { seq: ++seq })
    const demotedSoFar = Math.max(0, i - IN_WORKING + 1)
    if (demotedSoFar === 1_000 || demotedSoFar === ENTRIES)
      encodedAfter.set(demotedSoFar, JSON.stringify(encodeView(view!)).length)
  }
  expect(view!.entryCount).toBe(ENTRIES + IN_WORKING)
  expect(HashMap.size(view!.entries)).toBe(IN_WORKING)
  // A hundred times the history, the same working set: only the digits of ids and positions grow.
  expect(encodedAfter.get(ENTRIES)!).toBeLessThan(encodedAfter.get(1_000)! * 1.25)
})
