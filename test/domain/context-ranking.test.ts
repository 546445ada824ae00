import { HashMap } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Origin } from "../../contracts/entry.ts"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import {
  type BuiltContext,
  buildContext,
  type ContextOptions,
  candidatesOf,
  contextOfView,
  effectiveBudget,
  priorityFor,
  rankedCandidates,
} from "../../domain/context-builder.ts"
import { blockTokens } from "../../domain/render.ts"
import {
  AGENT,
  faded,
  recalledEntry,
  recorded,
  referenced,
  registered,
  stepStarted,
  viewOf,
} from "../support/events.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2025, 4, 5, 8, 0)
const WORDS = ["budget", "figures", "table", "Lisbon", "office", "review", "hiring", "garden", "puppy", "lease", "plan"]
const ORIGINS: ReadonlyArray<Origin> = ["USER", "INTERNAL", "ADVISOR", "SYSTEM"]

/** The same view with every entry and map a new object: nothing remembered of the original applies to it. */
const withFreshParts = (view: AgentView): AgentView => ({
  ...view,
  entries: HashMap.map(view.entries, (entry) => ({ ...entry, tokens: { ...entry.tokens } })),
  cues: HashMap.map(view.cues, (entry) => ({ ...entry, tokens: { ...entry.tokens } })),
  cueRelevance: HashMap.map(view.cueRelevance, (r) => r),
})

/** The build with nothing remembered: ranked from scratch, on entries never met before. */
const coldContext = (view: AgentView, options: ContextOptions = {}): BuiltContext => {
  const fresh = withFreshParts(view)
  return buildContext(
    candidatesOf(fresh, priorityFor(fresh)),
    effectiveBudget(fresh, options.limit),
    options.order ?? "timestamp",
    fresh.config.encoding,
  )
}

/** Byte for byte: the JSON a build is served as, and the values. */
const expectSame = (actual: BuiltContext, expected: BuiltContext) => {
  expect(JSON.stringify(actual)).toBe(JSON.stringify(expected))
  expect(actual).toEqual(expected)
}

/** The view after one more event. */
const folded = (view: AgentView, event: MemoryEvent, seq: number): AgentView => {
  const next = evolve(view, event, { seq })
  if (next === undefined) throw new Error(`${event._tag} left no view`)
  return next
}

let eventCounter = 0
const stamped = (at: number) => ({
  v: 1 as const,
  eventId: `ranking-${++eventCounter}`,
  agentId: AGENT,
  at,
  causationId: null,
  correlationId: null,
})

const cue = (entryId: string, text: string, timestamp: number, relevance: number): EventOf<"CueRehydrated"> => ({
  _tag: "CueRehydrated",
  ...stamped(timestamp + 1),
  stepId: "s1",
  entryId,
  trigger: "similarity",
  relevance,
  recalled: recalledEntry(text, {
    timestamp,
    tokens: blockTokens({ timestamp, origin: "USER" }, "raw", text, "o200k_base"),
  }),
})

const recalled = (similarities: ReadonlyArray<readonly [string, number]>, at: number): EventOf<"StepRecalled"> => ({
  _tag: "StepRecalled",
  ...stamped(at),
  stepId: "s1",
  trigger: "similarity",
  similarities: similarities.map(([entryId, similarity]) => ({ entryId, similarity })),
})

const read = (built: BuiltContext, at: number): EventOf<"EntriesRead"> => ({
  _tag: "EntriesRead",
  ...stamped(at),
  stepId: null,
  budget: built.budget,
  tokens: built.tokens,
  served: built.items.map((i) => ({ entryId: i.entryId, form: i.form, cue: i.cue })),
})

const sentence = fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 14 }).map((w) => `${w.join(" ")}.`)
/** Gaps that put entries in the same sitting, in another sitting of the day, or on another day. */
const gap = fc.constantFrom(MINUTE, 20 * MINUTE, 90 * MINUTE, 26 * 60 * MINUTE)

const plannedEntry = fc.record({
  text: fc.tuple(sentence, sentence, sentence).map((s) => s.join(" ")),
  gap,
  origin: fc.constantFrom(...ORIGINS),
  rung: fc.constantFrom(0, 0, 1, 2),
  keyPoints: sentence,
  summary: sentence,
  citations: fc.nat({ max: 3 }),
})

/** A random agent's view as events: entries at several rungs and sittings, citations, and maybe a focused step with recalled similarities and cues. */
const randomView = fc
  .record({
    budget: fc.integer({ min: 40, max: 2_500 }),
    entries: fc.array(plannedEntry, { minLength: 0, maxLength: 30 }),
    focus: fc.option(fc.subarray(WORDS, { minLength: 1, maxLength: 4 }), { nil: null }),
    similarities: fc.option(fc.array(fc.tuple(fc.nat({ max: 29 }), fc.double({ min: 0, max: 1, noNaN: true }))), {
      nil: null,
    }),
    cues: fc.array(fc.tuple(sentence, fc.double({ min: 0, max: 1, noNaN: true })), { maxLength: 3 }),
  })
  .map((plan) => {
    const events: MemoryEvent[] = [registered({ budget: plan.budget })]
    let t = T0
    const ids: string[] = []
    plan.entries.forEach((p, i) => {
      t += p.gap
      const entry = recorded(`e${i}`, p.text, t, { origin: p.origin })
      ids.push(entry.entryId)
      events.push(entry)
      if (p.rung >= 1) events.push(faded(entry, 1, p.keyPoints))
      if (p.rung === 2) events.push(faded(entry, 2, p.summary))
      for (let c = 0; c < p.citations; c++) events.push(referenced("s0", [entry.entryId], t + c + 2))
    })
    if (plan.focus !== null) {
      events.push(stepStarted("s1", t + MINUTE, { query: plan.focus.join(" ") }))
      if (plan.similarities !== null && ids.length > 0)
        events.push(
          recalled(
            plan.similarities.map(([i, s]) => [ids[i % ids.length]!, s] as const),
            t + MINUTE + 1,
          ),
        )
      plan.cues.forEach(([text, relevance], i) => {
        events.push(cue(`long-term-${i}`, text, T0 - i * MINUTE, relevance))
      })
    }
    return { events, ids, end: t }
  })

const request = fc.record({
  limit: fc.option(fc.integer({ min: 0, max: 3_000 }), { nil: undefined }),
  order: fc.constantFrom("timestamp" as const, "priority" as const),
})

const optionsOf = (r: { limit: number | undefined; order: "timestamp" | "priority" }): ContextOptions =>
  r.limit === undefined ? { order: r.order } : { limit: r.limit, order: r.order }

describe("context build with the view's ranking remembered", () => {
  it("builds, warm, exactly the context a build with nothing remembered makes, for any view, focus, limit and order", () => {
    fc.assert(
      fc.property(randomView, fc.array(request, { minLength: 1, maxLength: 6 }), ({ events }, requests) => {
        const view = viewOf(...events)
        for (const r of requests) contextOfView(view, optionsOf(r))
        for (const r of requests) expectSame(contextOfView(view, optionsOf(r)), coldContext(view, optionsOf(r)))
      }),
      { numRuns: 300 },
    )
  })

  it("after a change of one entry, of the focus, the step or its cues, builds what a fresh build of the new view makes", () => {
    fc.assert(
      fc.property(
        randomView,
        request,
        fc.nat(),
        fc.constantFrom("record", "fade", "cite", "read", "focus", "new step", "cue", "recall"),
        sentence,
        ({ events, ids, end }, r, pick, change, words) => {
          const before = viewOf(...events)
          const warm = contextOfView(before, optionsOf(r))
          const id = ids.length > 0 ? ids[pick % ids.length]! : "e0"
          const next = (() => {
            switch (change) {
              case "record":
                return recorded(`e-new-${pick}`, words, end + MINUTE, { origin: "INTERNAL" })
              case "fade": {
                const entry = events.find((e): e is EventOf<"EntryRecorded"> => e._tag === "EntryRecorded")
                return entry !== undefined
                  ? faded(entry, pick % 2 === 0 ? 1 : 2, words)
                  : recorded("e-only", words, end + MINUTE)
              }
              case "cite":
                return referenced("s1", [id], end + 2 * MINUTE)
              case "read":
                return read(warm, end + 2 * MINUTE)
              case "focus":
                return {
                  _tag: "FocusChanged",
                  ...stamped(end + 2 * MINUTE),
                  focus: { task: words },
                  taskKind: null,
                  transition: true,
                } satisfies EventOf<"FocusChanged">
              case "new step":
                return stepStarted(`s-${pick}`, end + 2 * MINUTE, { query: words })
              case "cue":
                return cue(`long-term-new-${pick}`, words, T0 - 7 * MINUTE, (pick % 100) / 100)
              case "recall":
                return recalled([[id, (pick % 100) / 100]], end + 2 * MINUTE)
            }
          })()
          const after = folded(before, next, events.length + 1)
          expectSame(contextOfView(after, optionsOf(r)), coldContext(after, optionsOf(r)))
          // The view before the change still builds as it did.
          expectSame(contextOfView(before, optionsOf(r)), warm)
        },
      ),
      { numRuns: 300 },
    )
  })

  it("builds after each read of the view, as the working service does, what a fresh build of the view read makes", () => {
    fc.assert(
      fc.property(randomView, request, ({ events }, r) => {
        let view = viewOf(...events)
        for (let seq = events.length + 1; seq <= events.length + 4; seq++) {
          const built = contextOfView(view, optionsOf(r))
          expectSame(built, coldContext(view, optionsOf(r)))
          view = folded(view, read(built, T0 + seq * MINUTE), seq)
        }
      }),
      { numRuns: 200 },
    )
  })

  it("ranks a view once while the parts it reads stay the same, and again when one of them changes", () => {
    const entry = recorded("e1", "the budget figures are in table 3", T0)
    const view = viewOf(registered(), entry, recorded("e2", "lunch in the garden", T0 + MINUTE))
    const focused = folded(view, stepStarted("s1", T0 + 2 * MINUTE, { query: "budget table" }), 4)
    expect(rankedCandidates(focused)).toBe(rankedCandidates(focused))
    // A new view object sharing every part the ranking reads.
    expect(rankedCandidates({ ...focused, lastSeq: focused.lastSeq + 1 })).toBe(rankedCandidates(focused))
    expect(rankedCandidates(focused).map((c) => c.entry.id)).toEqual(["e1", "e2"])
    expect(rankedCandidates(view).map((c) => c.entry.id)).toEqual(["e2", "e1"])
    const cited = folded(focused, referenced("s1", ["e2"], T0 + 3 * MINUTE), 5)
    expect(rankedCandidates(cited)).not.toBe(rankedCandidates(focused))
  })

  it("ranks by the recall's similarities a focus of question words only, which has no lexical terms", () => {
    const older = recorded("e1", "the puppy chewed the lease papers in the garden", T0)
    const chatter = Array.from({ length: 8 }, (_, i) =>
      recorded(`c${i}`, `note ${i}: the office review moved to the budget table`, T0 + (i + 1) * MINUTE),
    )
    const focused = folded(
      viewOf(registered(), older, ...chatter),
      stepStarted("s1", T0 + 10 * MINUTE, { query: "Why? When does it?" }),
      11,
    )
    const view = folded(
      focused,
      recalled([["e1", 0.9], ...chatter.map((_, i) => [`c${i}`, 0.1] as const)], T0 + 11 * MINUTE),
      12,
    )
    const served = contextOfView(view, { limit: 40 }).items.map((item) => item.entryId)
    expect(served[0]).toBe("e1")
  })

  it("serves an entry of high emotional weight before recent entries its focus does not name", () => {
    const constraint = (emotionalWeight: number) =>
      recorded("e1", "my partner uses a wheelchair, stairs are a problem", T0, { emotionalWeight })
    const chatter = Array.from({ length: 8 }, (_, i) =>
      recorded(`c${i}`, `note ${i}: the office review moved to the garden room`, T0 + (i + 1) * MINUTE),
    )
    const trip = recorded("e9", "one day trip: Sintra or Cascais", T0 + 10 * MINUTE)
    const served = (emotionalWeight: number) => {
      const view = folded(
        viewOf(registered(), constraint(emotionalWeight), ...chatter, trip),
        stepStarted("s1", T0 + 11 * MINUTE, { query: "what about the day trip" }),
        12,
      )
      const built = contextOfView(view, { limit: 80 })
      return built.items.map((item) => item.entryId)
    }
    expect(served(0)).not.toContain("e1")
    expect(served(0.9)).toEqual(expect.arrayContaining(["e1", "e9"]))
  })

  it("gives an advisor's emotional weight to the earlier working entries of its correlation id, and to no other", () => {
    const view = viewOf(
      registered(),
      recorded("a", "my partner uses a wheelchair", T0, { correlationId: "access" }),
      recorded("b", "we like food markets", T0 + MINUTE),
      recorded("c", "the budget is 2,500 euros", T0 + 2 * MINUTE, { correlationId: "money", emotionalWeight: 0.2 }),
      recorded("d", "that constraint matters; do not lose it", T0 + 3 * MINUTE, {
        origin: "ADVISOR",
        correlationId: "access",
        emotionalWeight: 0.9,
      }),
      recorded("e", "a later note on access", T0 + 4 * MINUTE, { correlationId: "access" }),
      recorded("f", "a user's own weight is not an advisor's", T0 + 5 * MINUTE, {
        correlationId: "money",
        emotionalWeight: 0.9,
      }),
    )
    const weight = (id: string) => HashMap.getUnsafe(view.entries, id).emotionalWeight
    expect([weight("a"), weight("b"), weight("c"), weight("d"), weight("e"), weight("f")]).toEqual([
      0.9, 0, 0.2, 0.9, 0, 0.9,
    ])
  })
})
