/**
 * A burst larger than the background work absorbs, with back-pressure close (WM_MAX_PROJECTION_LAG 25),
 * against every service in one process: every later write is answered — accepted, or refused with a
 * typed retryable error and then stored — none goes unanswered, and every acknowledged record is in the
 * log exactly once. (The figures of the full-size run, with the sentence model, are in RELIABILITY.md:
 * `npm run bench:burst`.)
 */
import { describe, expect, it } from "vitest"
import { runBurst } from "../../bench/burst/run.ts"
import { memoryText } from "../../bench/support/realistic-entries.ts"

describe("a burst the background work cannot absorb at once", () => {
  it("answers every later write and loses no acknowledged one", async () => {
    const figures = await runBurst(
      { agents: 3, turns: 300, inFlight: 32, later: 40, laterAfterSeconds: 1, answerWithinMs: 30_000 },
      "offline",
      (i) => `${Array.from({ length: 6 }, (_, k) => memoryText(i * 6 + k)).join(" ")} (turn ${i})`,
      () => undefined,
      { WM_MAX_PROJECTION_LAG: "25" },
    )
    expect(figures.burst.unanswered).toBe(0)
    expect(figures.burst.accepted + figures.burst.overloaded + figures.burst.refused).toBe(300)
    expect(figures.later.unanswered).toBe(0)
    expect(figures.later.answered).toBe(40)
    expect(figures.lost).toBe(0)
    expect(figures.storedTwice).toBe(0)
    expect(figures.bystander.builds).toBeGreaterThan(0)
  }, 240_000)
})
