import fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Encoding } from "../../contracts/agent.ts"
import { buildContext, candidatesOf } from "../../domain/context-builder.ts"
import { countTokens } from "../../domain/tokens.ts"
import { faded, recorded, registered, viewOf } from "../support/events.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 0, 1, 9, 0)

describe("context builder", () => {
  it("serves every entry raw, oldest first, when the budget allows", () => {
    const view = viewOf(
      registered(),
      recorded("b", "second thing said", T0 + 2 * MINUTE),
      recorded("a", "first thing said", T0 + MINUTE),
      recorded("c", "a private thought", T0 + 3 * MINUTE, { origin: "INTERNAL" }),
    )
    const built = buildContext(candidatesOf(view), 8_000)
    expect(built.items.map((i) => i.entryId)).toEqual(["a", "b", "c"])
    expect(built.items.every((i) => i.form === "raw")).toBe(true)
    expect(built.text).toBe(
      "[Mon 2024-01-01]\n" + "first thing said\n" + "second thing said\n" + "thought: a private thought\n",
    )
    expect(built.tokens).toBe(countTokens(built.text, "o200k_base"))
  })

  it("keeps the newest entries raw and serves older ones at their faded rungs when the budget is tight", () => {
    const long = (n: number) =>
      `Entry ${n}: ${"The quarterly report covers revenue, costs and the hiring plan in detail. ".repeat(6)}`
    const old1 = recorded("old1", long(1), T0 + 1 * MINUTE)
    const old2 = recorded("old2", long(2), T0 + 2 * MINUTE)
    const mid = recorded("mid", long(3), T0 + 3 * MINUTE)
    const recent = recorded("recent", long(4), T0 + 4 * MINUTE)
    const view = viewOf(
      registered(),
      old1,
      old2,
      mid,
      recent,
      faded(old1, 1, "Entry 1 covers revenue."),
      faded(old1, 2, "Report summary 1."),
      faded(old2, 1, "Entry 2 covers costs."),
      faded(mid, 1, "Entry 3 covers hiring."),
    )
    // Room for the recent entry raw plus everything else at its rung (and the date line), but not two raw entries.
    const budget = view.usage + 8 + 10
    const built = buildContext(candidatesOf(view), budget)
    const forms = Object.fromEntries(built.items.map((i) => [i.entryId, i.form]))
    expect(forms).toEqual({ old1: "summary", old2: "keyPoints", mid: "keyPoints", recent: "raw" })
    expect(built.tokens).toBeLessThanOrEqual(budget)
    expect(built.tokens).toBe(countTokens(built.text, "o200k_base"))
    expect(built.text).toContain("\nsummary: Report summary 1.\n")
  })

  it("drops the oldest entries first when not everything fits", () => {
    const view = viewOf(
      registered(),
      ...Array.from({ length: 10 }, (_, i) =>
        recorded(`e${i}`, `message number ${i} with some words`, T0 + i * MINUTE),
      ),
    )
    const one = view.usage / 10
    const built = buildContext(candidatesOf(view), Math.floor(one * 3.5) + 8)
    expect(built.items.map((i) => i.entryId)).toEqual(["e7", "e8", "e9"])
    expect(built.omitted).toBe(7)
  })

  it("writes each date once in time order, the time only to tell a day's sittings apart, and a header whenever the sitting changes in priority order", () => {
    const DAY = 24 * 60 * MINUTE
    const view = viewOf(
      registered(),
      recorded("a", "day one morning", T0),
      recorded("a2", "day one morning, a minute later", T0 + MINUTE),
      recorded("b", "day two", T0 + DAY),
      recorded("c", "day one evening", T0 + 9 * 60 * MINUTE),
    )
    expect(buildContext(candidatesOf(view), 1_000).text).toBe(
      "[Mon 2024-01-01 09:00]\nday one morning\nday one morning, a minute later\n[18:00]\nday one evening\n[Tue 2024-01-02]\nday two\n",
    )
    const byPriority = buildContext(candidatesOf(view), 1_000, "priority")
    expect(byPriority.text).toBe(
      "[Tue 2024-01-02]\nday two\n[Mon 2024-01-01 18:00]\nday one evening\n[Mon 2024-01-01 09:00]\nday one morning, a minute later\nday one morning\n",
    )
    expect(byPriority.tokens).toBe(countTokens(byPriority.text, "o200k_base"))
  })

  it("labels every origin but what the agent heard, and a heard text that would read as a label or a header", () => {
    const view = viewOf(
      registered(),
      recorded("a", "Ana: the lease ends in May", T0),
      recorded("b", "thought: not mine", T0 + MINUTE),
      recorded("c", "[Tue 2024-01-02] is not a date line", T0 + 2 * MINUTE),
      recorded("d", "check the lease", T0 + 3 * MINUTE, { origin: "INTERNAL" }),
      recorded("e", "the user sounds rushed", T0 + 4 * MINUTE, { origin: "ADVISOR" }),
      recorded("f", "budget retuned", T0 + 5 * MINUTE, { origin: "SYSTEM" }),
    )
    const built = buildContext(candidatesOf(view), 1_000)
    expect(built.text).toBe(
      "[Mon 2024-01-01]\n" +
        "Ana: the lease ends in May\n" +
        "user: thought: not mine\n" +
        "user: [Tue 2024-01-02] is not a date line\n" +
        "thought: check the lease\n" +
        "advisor: the user sounds rushed\n" +
        "system: budget retuned\n",
    )
    expect(built.tokens).toBe(countTokens(built.text, "o200k_base"))
  })

  it("packs the best-ranked entries raw, the next as key points, and the tail in its most compact form", () => {
    const long = (n: number) =>
      `Entry ${n}: ${`Point ${n} on the quarterly report covers revenue, costs and hiring. `.repeat(5)}`
    const entries = Array.from({ length: 6 }, (_, i) => recorded(`e${i}`, long(i), T0 + i * MINUTE))
    const view = viewOf(
      registered(),
      ...entries,
      ...entries.map((e, i) => faded(e, 1, `Entry ${i}: point ${i} covers revenue.`)),
      faded(entries[0]!, 2, "Report 0."),
      faded(entries[1]!, 2, "Report 1."),
    )
    // e5 is the best-ranked, e0 the least; room for about two raw texts' worth.
    const candidates = candidatesOf(view, (entry) => entry.ordinal)
    const raw = entries[5]!.tokens
    const built = buildContext(candidates, Math.ceil(2.6 * raw))
    const forms = Object.fromEntries(built.items.map((i) => [i.entryId, i.form]))
    expect(forms.e5).toBe("raw")
    expect(forms.e3).toBe("keyPoints")
    expect(forms.e1).toBe("summary")
    expect(forms.e0).toBe("summary")
    expect(built.tokens).toBe(countTokens(built.text, "o200k_base"))
  })

  it("returns entries in priority order when asked", () => {
    const view = viewOf(registered(), recorded("a", "alpha", T0), recorded("b", "beta", T0 + MINUTE))
    const built = buildContext(candidatesOf(view), 1_000, "priority")
    expect(built.items.map((i) => i.entryId)).toEqual(["b", "a"])
  })

  it("never exceeds the budget, for any entries, budgets and encodings (property)", () => {
    const encodings: Encoding[] = ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"]
    const text = fc
      .oneof(
        fc.string({ minLength: 1, maxLength: 400 }),
        fc.lorem({ maxCount: 80 }),
        fc.string({ unit: "grapheme", minLength: 1, maxLength: 120 }),
        fc.string({
          unit: fc.constantFrom(" ", "\n", "\t", "[", "]", ".", "a", "1", "é", "🙂", "/", "\r", "…", ":", "thought"),
          minLength: 1,
          maxLength: 60,
        }),
      )
      .filter((s) => s.trim().length > 0)
    fc.assert(
      fc.property(
        fc.constantFrom(...encodings),
        fc.array(
          fc.record({
            text,
            minutes: fc.integer({ min: 0, max: 100_000 }),
            origin: fc.constantFrom("INTERNAL", "USER", "ADVISOR", "SYSTEM" as const),
            fade: fc.constantFrom(0, 1, 2),
          }),
          { minLength: 0, maxLength: 40 },
        ),
        fc.integer({ min: 16, max: 3_000 }),
        fc.constantFrom("timestamp" as const, "priority" as const),
        (encoding, specs, budget, order) => {
          const events = specs.flatMap((s, i) => {
            const r = recorded(`e${i}`, s.text, T0 + s.minutes * MINUTE, { origin: s.origin, encoding })
            const words = s.text.split(/\s+/).filter(Boolean)
            const shorter = words.slice(0, Math.max(1, Math.ceil(words.length / 3))).join(" ") || "x"
            return s.fade === 0
              ? [r]
              : s.fade === 1
                ? [r, faded(r, 1, shorter, encoding)]
                : [r, faded(r, 1, shorter, encoding), faded(r, 2, `summary of ${shorter.slice(0, 30)}`, encoding)]
          })
          const view = viewOf(registered({ encoding }), ...events)
          const built = buildContext(candidatesOf(view), budget, order, encoding)
          const exact = countTokens(built.text, encoding)
          expect(exact).toBe(built.tokens)
          expect(exact).toBeLessThanOrEqual(budget)
        },
      ),
      { numRuns: 400 },
    )
  })
})

describe("full fidelity within its share", () => {
  it("serves a long best-ranked entry by its key points, so the entries after it still fit", () => {
    const report = `Tool result: ${"Row of the quarterly sales table with region, revenue and cost. ".repeat(40)}`
    const view = viewOf(
      registered(),
      recorded("report", report, T0),
      ...Array.from({ length: 8 }, (_, i) =>
        recorded(`n${i}`, `note ${i} about the launch plan`, T0 + (i + 1) * MINUTE),
      ),
      faded(recorded("report", report, T0), 1, "Tool result: … Row of the quarterly sales table …"),
    )
    // The report ranks first; raw, it would take most of the budget.
    const candidates = candidatesOf(view, (entry) => (entry.id === "report" ? 100 : entry.ordinal))
    const reportTokens = view.entries.pipe((m) => [...m].find(([id]) => id === "report")![1].tokens.raw)
    // Room for the report whole and a date line, not for the report and the notes.
    const budget = reportTokens + 12
    const built = buildContext(candidates, budget)
    const forms = Object.fromEntries(built.items.map((i) => [i.entryId, i.form]))
    expect(forms.report).toBe("keyPoints")
    expect(built.items).toHaveLength(9)
    // With room for everything, the report is served whole.
    const roomy = buildContext(candidates, 8 * reportTokens)
    expect(roomy.items.find((i) => i.entryId === "report")!.form).toBe("raw")
  })
})
