/**
 * One oversized entry does not push the rest out of working memory. Specs of
 * the pure fade plan in the given/when/then form: given an agent's events,
 * when the plan is made (and, for a whole run, applied until nothing moves),
 * then only the oversized entry leaves, straight to the representation that
 * fits, and the others stay where their fade score puts them.
 */
import { HashMap, Option } from "effect"
import { describe, expect, it } from "vitest"
import type { MemoryEvent } from "../../contracts/events.ts"
import { type AgentView, rungCost } from "../../domain/agent-view.ts"
import { type FadeMove, planFade } from "../../domain/fade-plan.ts"
import { DEFAULT_FADE_CONFIG } from "../../domain/fade-score.ts"
import { given } from "../support/decider-spec.ts"
import { demoted, faded, recorded, referenced, registered, stepStarted } from "../support/events.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 4, 8, 13)
const config = DEFAULT_FADE_CONFIG
const WORDS = [
  "budget",
  "meeting",
  "supplier",
  "invoice",
  "delivery",
  "Porto",
  "Tuesday",
  "pallet",
  "contract",
  "review",
]

/** A note of about `tokens` tokens (one per word). */
const note = (tokens: number, seed = 0) =>
  `${Array.from({ length: tokens }, (_, i) => WORDS[(i * 7 + seed) % WORDS.length]).join(" ")}.`
/** A tool output of one line per record, about `tokens` tokens in all. */
const toolOutput = (tokens: number) =>
  Array.from({ length: Math.ceil(tokens / 8) }, (_, i) => `row ${i}: status ok, latency fine.`).join("\n")

const entryOf = (view: AgentView, id: string) => Option.getOrUndefined(HashMap.get(view.entries, id))
const rungOf = (view: AgentView, id: string) => entryOf(view, id)?.rung ?? 3

/** Folds `events`, then plans and applies the plan (as the fade worker would) until nothing moves. */
const settled = (events: MemoryEvent[]): { view: AgentView; moves: FadeMove[]; log: MemoryEvent[] } => {
  const log = [...events]
  const moves: FadeMove[] = []
  for (let pass = 0; pass < 30; pass++) {
    const view = given(...log).view!
    const plan = planFade(view, config)
    if (plan.length === 0) return { view, moves, log }
    for (const m of plan) {
      moves.push(m)
      const entry = entryOf(view, m.entryId)!
      const original = log.find(
        (e): e is Extract<MemoryEvent, { _tag: "EntryRecorded" }> =>
          e._tag === "EntryRecorded" && e.entryId === m.entryId,
      )!
      const words = (entry.content ?? original.content).split(" ")
      // Key points: half of the words; summary: a quarter (what the fade service aims for).
      log.push(
        m.to === 3
          ? demoted(m.entryId, T0)
          : faded(original, m.to, words.slice(0, Math.ceil(words.length * (m.to === 1 ? 0.5 : 0.25))).join(" ")),
      )
    }
  }
  throw new Error("the plan never settled")
}

describe("an oversized entry", () => {
  it("given working under τ, when a tool output larger than the whole budget arrives, then only it leaves working, straight to long-term", () => {
    const smalls = Array.from({ length: 5 }, (_, i) => recorded(`note-${i}`, note(60, i), T0 + i * MINUTE))
    const big = recorded("tool-output", toolOutput(3_085), T0 + 10 * MINUTE)
    const spec = given(registered({ role: "custom", budget: 500 }), ...smalls, big)
    expect(big.tokens).toBeGreaterThan(3_000)

    const plan = planFade(spec.view!, config)

    expect(plan).toHaveLength(1)
    expect(plan[0]).toMatchObject({ entryId: "tool-output", from: 0, to: 3, score: { trigger: "pressure" } })
    // The decision records the usage as it was: the oversized entry alone holds working above τ.
    expect(plan[0]!.score.usage).toBeGreaterThan(plan[0]!.score.tau)
  })

  it("given ten 200-token entries in a 500-token budget, when a 3 085-token tool output arrives, then working keeps what it held before", () => {
    const events: MemoryEvent[] = [registered({ role: "custom", budget: 500 })]
    for (let i = 0; i < 10; i++) events.push(recorded(`note-${i}`, note(200, i), T0 + i * MINUTE))
    const { view: before, log } = settled(events)
    expect(before.usage).toBeGreaterThan(0)
    expect(before.usage).toBeLessThanOrEqual(0.8 * 500)

    const big = recorded("tool-output", toolOutput(3_085), T0 + 11 * MINUTE)
    const { view: after, moves } = settled([...log, big])

    expect(rungOf(after, "tool-output")).toBe(3)
    expect(moves.filter((m) => m.entryId === "tool-output").map((m) => [m.from, m.to])).toEqual([[0, 3]])
    for (let i = 0; i < 10; i++) expect(rungOf(after, `note-${i}`)).toBe(rungOf(before, `note-${i}`))
    expect(after.usage).toBe(before.usage)
  })

  it("given a budget whose τ share holds the entry's key points, when it arrives oversized, then it goes to key points at once and nothing else moves", () => {
    const smalls = Array.from({ length: 4 }, (_, i) => recorded(`note-${i}`, note(60, i), T0 + i * MINUTE))
    const big = recorded("report", note(2_400, 3), T0 + 10 * MINUTE)
    const spec = given(registered({ role: "custom", budget: 2_000 }), ...smalls, big)

    const plan = planFade(spec.view!, config)

    // Key points are projected at half the raw tokens: about 1 200, and 240 for the others, of the 1 600 under τ.
    expect(plan).toEqual([expect.objectContaining({ entryId: "report", from: 0, to: 1 })])
  })

  it("given key points that would not fit but a summary that would, when the entry arrives oversized, then it goes to the summary in one move", () => {
    const big = recorded("transcript", note(5_000, 1), T0 + 10 * MINUTE)
    const spec = given(registered({ role: "custom", budget: 2_000 }), recorded("note", note(100), T0), big)

    const plan = planFade(spec.view!, config)

    expect(plan).toEqual([expect.objectContaining({ entryId: "transcript", from: 0, to: 2 })])
  })

  it("given an oversized entry whose summary came out larger than projected, when planning again, then it leaves working and the others stay", () => {
    const smalls = Array.from({ length: 4 }, (_, i) => recorded(`note-${i}`, note(60, i), T0 + i * MINUTE))
    const big = recorded("blob", note(5_000, 1), T0 + 10 * MINUTE)
    // The summariser could not shorten it much (one long sentence, say): 3 000 tokens, over τ·2 000.
    const summary = { ...faded(big, 2, note(3_000, 1)), from: 0 as const }
    const spec = given(registered({ role: "custom", budget: 2_000 }), ...smalls, big, summary)
    expect(rungCost(entryOf(spec.view!, "blob")!)).toBeGreaterThan(1_600)

    const plan = planFade(spec.view!, config)

    expect(plan).toEqual([expect.objectContaining({ entryId: "blob", from: 2, to: 3 })])
  })

  it("given pressure that only the oversized entry causes, when the plan is made, then the others are scored without that pressure", () => {
    // Old entries near the key-points threshold: budget pressure would push them over it.
    const events: MemoryEvent[] = [registered({ role: "custom", budget: 1_000 })]
    for (let i = 0; i < 6; i++) events.push(recorded(`note-${i}`, note(50, i), T0 + i * 10 * MINUTE))
    const calm = planFade(given(...events, recorded("small", note(20), T0 + 61 * MINUTE)).view!, config)
    const big = planFade(given(...events, recorded("huge", toolOutput(4_000), T0 + 61 * MINUTE)).view!, config)

    expect(big.filter((m) => m.entryId !== "huge")).toEqual(calm)
    expect(big.find((m) => m.entryId === "huge")).toMatchObject({ to: 3 })
  })

  it("given an oversized entry the agent cited in the open step, when the plan is made, then it stays (cited entries never fade)", () => {
    const big = recorded("cited", toolOutput(3_000), T0 + MINUTE)
    const spec = given(
      registered({ role: "custom", budget: 500 }),
      recorded("note", note(50), T0),
      big,
      stepStarted("s1", T0 + 2 * MINUTE),
      referenced("s1", ["cited"], T0 + 2 * MINUTE),
    )

    const plan = planFade(spec.view!, config)

    expect(plan.map((m) => m.entryId)).not.toContain("cited")
  })
})
