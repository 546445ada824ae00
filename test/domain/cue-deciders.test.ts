import { HashMap } from "effect"
import { describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import {
  CUES_EVENT_BYTES,
  decideCueDrops,
  decideExplicitRehydration,
  decidePromotion,
  decideRecall,
  dropsStillDue,
  type Recalled,
} from "../../domain/cue-decide.ts"
import { NO_ENTRY_FACTS } from "../../domain/entry-standing.ts"
import { given } from "../support/decider-spec.ts"
import {
  AGENT,
  demoted,
  focusChanged,
  recalledEntry,
  recorded,
  referenced,
  registered,
  stepEnded,
  stepStarted,
  viewOf,
} from "../support/events.ts"

const recalledText = (text: string, timestamp = 1): Recalled => recalledEntry(text, { timestamp })

const rehydrated = (stepId: string, entryId: string, at: number): EventOf<"CueRehydrated"> => ({
  _tag: "CueRehydrated",
  v: 1,
  eventId: `cue-${stepId}-${entryId}`,
  agentId: AGENT,
  at,
  causationId: stepId,
  correlationId: null,
  stepId,
  entryId,
  trigger: "similarity",
  relevance: 0.5,
  recalled: recalledText(`the text of ${entryId}`),
})

const dropped = (stepId: string, entryId: string, at: number): EventOf<"CueDropped"> => ({
  _tag: "CueDropped",
  v: 1,
  eventId: `drop-${stepId}-${entryId}`,
  agentId: AGENT,
  at,
  causationId: null,
  correlationId: null,
  stepId,
  entryId,
})

const droppedAll = (stepId: string, entryIds: string[], at: number): EventOf<"CuesDropped"> => ({
  _tag: "CuesDropped",
  v: 1,
  eventId: `drop-${stepId}`,
  agentId: AGENT,
  at,
  causationId: null,
  correlationId: null,
  stepId,
  entryIds,
})

const longTermEntry = [
  recorded("e1", "The lease on the Utrecht office ends on 31 May 2026.", 1),
  demoted("e1", 2),
] as const

describe("cue drops apply to the step they name", () => {
  it("a drop of the previous step, appended after the next step recalled the same entry, keeps the new cue", () => {
    const view = viewOf(
      registered(),
      ...longTermEntry,
      stepStarted("s1", 3),
      rehydrated("s1", "e1", 4),
      stepEnded("s1", 5),
      stepStarted("s2", 6),
      rehydrated("s2", "e1", 7),
      // Retrieval reacts to s1's end asynchronously: its drop lands after s2's cue.
      dropped("s1", "e1", 8),
    )
    expect(HashMap.has(view.cues, "e1")).toBe(true)
    expect(HashMap.has(view.cueRelevance, "e1")).toBe(true)
  })

  it("a drop of the open step removes its cue", () => {
    const view = viewOf(
      registered(),
      ...longTermEntry,
      stepStarted("s1", 3),
      rehydrated("s1", "e1", 4),
      dropped("s1", "e1", 5),
    )
    expect(HashMap.has(view.cues, "e1")).toBe(false)
  })

  it("a step's drops in one event remove the cues it names from that step only", () => {
    const late = viewOf(
      registered(),
      ...longTermEntry,
      recorded("e2", "KPN quotes 12 business days.", 3),
      demoted("e2", 4),
      stepStarted("s1", 5),
      rehydrated("s1", "e1", 6),
      stepEnded("s1", 7),
      stepStarted("s2", 8),
      rehydrated("s2", "e1", 9),
      droppedAll("s1", ["e1", "e2"], 10),
    )
    expect(HashMap.has(late.cues, "e1")).toBe(true)
    const open = viewOf(
      registered(),
      ...longTermEntry,
      recorded("e2", "KPN quotes 12 business days.", 3),
      demoted("e2", 4),
      stepStarted("s1", 5),
      rehydrated("s1", "e1", 6),
      rehydrated("s1", "e2", 7),
      droppedAll("s1", ["e1"], 8),
    )
    expect([...HashMap.keys(open.cues)]).toEqual(["e2"])
    expect([...HashMap.keys(open.cueRelevance)]).toEqual(["e2"])
  })
})

describe("cue deciders", () => {
  it("drops, at step end, every cue of that step the agent did not reference", () => {
    given(
      registered(),
      ...longTermEntry,
      recorded("e2", "KPN quotes 12 business days.", 3),
      demoted("e2", 4),
      stepStarted("s1", 5),
      rehydrated("s1", "e1", 6),
      rehydrated("s1", "e2", 7),
      referenced("s1", ["e2"], 8),
    )
      .when((view) => decideCueDrops(view!, "s1", { at: 9, causationId: "end-s1" }))
      .then({ _tag: "CuesDropped", stepId: "s1", entryIds: ["e1"], eventId: `${AGENT}:drop:s1`, causationId: "end-s1" })
  })

  it("drops every unreferenced cue of a step in one event, and none when every cue was referenced", () => {
    const cues = [
      registered(),
      ...longTermEntry,
      recorded("e2", "KPN quotes 12 business days.", 3),
      demoted("e2", 4),
      stepStarted("s1", 5),
      rehydrated("s1", "e2", 6),
      rehydrated("s1", "e1", 7),
    ] as const
    given(...cues)
      .when((view) => decideCueDrops(view!, "s1", { at: 9 }))
      .then({ _tag: "CuesDropped", stepId: "s1", entryIds: ["e1", "e2"] })
    given(...cues, referenced("s1", ["e1", "e2"], 8))
      .when((view) => decideCueDrops(view!, "s1", { at: 9 }))
      .then()
  })

  it("leaves out of a step's drops a cue promoted since (a native entry now), and drops nothing when all were", () => {
    const drops = droppedAll("s1", ["e1", "e2"], 9)
    const before = viewOf(registered(), ...longTermEntry, recorded("e2", "KPN quotes 12 business days.", 3))
    // e2 is native below rung 2 (held in full): not a cue to drop; e1 is in long-term.
    expect(dropsStillDue(drops, before)?.entryIds).toEqual(["e1"])
    expect(dropsStillDue(droppedAll("s1", ["e2"], 9), before)).toBeNull()
  })

  it("drops nothing for a step that is not the one open in the view", () => {
    given(registered(), ...longTermEntry, stepStarted("s2", 3), rehydrated("s2", "e1", 4))
      .when((view) => decideCueDrops(view!, "s1", { at: 5 }))
      .then()
  })

  it("records a recall as the step's similarities, then its cues best first, skipping cues the step already holds", () => {
    given(
      registered(),
      ...longTermEntry,
      recorded("e2", "Budget moves to Q3.", 3),
      demoted("e2", 4),
      recorded("e3", "Open item.", 5),
      stepStarted("s1", 6),
      rehydrated("s1", "e2", 7),
    )
      .when((view) =>
        decideRecall(
          view!,
          "s1",
          {
            trigger: "similarity",
            similarities: [{ entryId: "e3", similarity: 0.4 }],
            cues: [
              {
                entryId: "e1",
                relevance: 0.9,
                correlationId: "lease",
                recalled: recalledText("The lease ends on 31 May 2026."),
              },
              { entryId: "e2", relevance: 0.8, correlationId: null, recalled: recalledText("Budget moves to Q3.") },
            ],
          },
          { at: 10 },
        ),
      )
      .then(
        {
          _tag: "StepRecalled",
          stepId: "s1",
          trigger: "similarity",
          similarities: [{ entryId: "e3", similarity: 0.4 }],
          eventId: `${AGENT}:recall:s1:similarity:7`,
        },
        {
          _tag: "CuesRehydrated",
          stepId: "s1",
          trigger: "similarity",
          causationId: "s1",
          eventId: `${AGENT}:cues:s1:similarity:7`,
          cues: [expect.objectContaining({ entryId: "e1", relevance: 0.9, correlationId: "lease" })],
        },
      )
  })

  it("rehydrates only the cues a context built at the budget in force would serve", () => {
    const long = (entryId: string, relevance: number) => ({
      entryId,
      relevance,
      correlationId: null,
      recalled: { ...recalledText(`the long text of ${entryId} `.repeat(200)), tokens: 3_000 },
    })
    given(registered({ budget: 8_000 }), stepStarted("s1", 1))
      .when((view) =>
        decideRecall(
          view!,
          "s1",
          { trigger: "similarity", similarities: [], cues: [long("e1", 0.9), long("e2", 0.8), long("e3", 0.7)] },
          { at: 2 },
        ),
      )
      // Two of 3,000 tokens fit in 8,000; the third would only be dropped at the step's end.
      .then(
        { _tag: "StepRecalled", stepId: "s1" },
        {
          _tag: "CuesRehydrated",
          cues: [expect.objectContaining({ entryId: "e1" }), expect.objectContaining({ entryId: "e2" })],
        },
      )
  })

  it("spreads a recall's cues over events of at most CUES_EVENT_BYTES each, best first, each with an id of its own", () => {
    // Twelve cues of 60 KB, each shown whole at a budget of a million tokens: 720 KB in all.
    const cues = Array.from({ length: 12 }, (_, i) => ({
      entryId: `e${i}`,
      relevance: 1 - i / 100,
      correlationId: null,
      recalled: { ...recalledText(`Log ${i}: the hangar valve was checked. `.repeat(1_500)), tokens: 15_000 },
    }))
    const view = viewOf(registered({ budget: 1_000_000 }), stepStarted("s1", 1))
    const decision = decideRecall(view, "s1", { trigger: "similarity", similarities: [], cues }, { at: 2 })
    expect(decision.ok).toBe(true)
    const [recalled, ...parts] = decision.ok ? decision.event : []
    expect(recalled?._tag).toBe("StepRecalled")
    expect(parts.length).toBeGreaterThan(1)
    expect(parts.flatMap((part) => part.cues.map((cue) => cue.entryId))).toEqual(cues.map((cue) => cue.entryId))
    for (const part of parts)
      expect(Buffer.byteLength(JSON.stringify(part.cues), "utf8")).toBeLessThanOrEqual(CUES_EVENT_BYTES + 64)
    expect(new Set(parts.map((part) => part.eventId)).size).toBe(parts.length)
    // A retried decision gives the same events.
    expect(decideRecall(view, "s1", { trigger: "similarity", similarities: [], cues }, { at: 2 })).toEqual(decision)
  })

  it("puts a single cue larger than CUES_EVENT_BYTES in an event of its own", () => {
    const big = "Log: the hangar valve was checked and logged in full. ".repeat(6_000)
    const cue = (entryId: string, text: string, relevance: number) => ({
      entryId,
      relevance,
      correlationId: null,
      recalled: { ...recalledText(text), tokens: 70_000 },
    })
    const view = viewOf(registered({ budget: 1_000_000 }), stepStarted("s1", 1))
    const decision = decideRecall(
      view,
      "s1",
      { trigger: "similarity", similarities: [], cues: [cue("small", "A short note.", 0.9), cue("big", big, 0.8)] },
      { at: 2 },
    )
    const parts = decision.ok ? decision.event.slice(1) : []
    expect(parts.map((part) => part._tag === "CuesRehydrated" && part.cues.map((c) => c.entryId))).toEqual([
      ["small"],
      ["big"],
    ])
  })

  it("gives each task transition's recall in a step ids of its own (similarities and cues), and a retried decision the same", () => {
    const plan = {
      trigger: "task-transition" as const,
      similarities: [],
      cues: [{ entryId: "e1", relevance: 0.9, correlationId: null, recalled: recalledText("The lease ends.") }],
    }
    const idOf = (view: ReturnType<typeof viewOf>) => {
      const decision = decideRecall(view, "s1", plan, { at: 9 })
      return decision.ok ? decision.event.map((event) => event.eventId).join(" ") : undefined
    }
    const first = viewOf(registered(), ...longTermEntry, stepStarted("s1", 3), focusChanged("sign the lease", 4))
    const second = viewOf(
      registered(),
      ...longTermEntry,
      stepStarted("s1", 3),
      focusChanged("sign the lease", 4),
      focusChanged("renew the lease", 5),
    )
    expect(idOf(first)?.split(" ")).toHaveLength(2)
    expect(idOf(first)).toBe(idOf(first))
    // The similarities too: a transition's StepRecalled deduplicated away would leave the builder ranking by the last.
    const [recalledFirst, cuesFirst] = idOf(first)!.split(" ")
    const [recalledSecond, cuesSecond] = idOf(second)!.split(" ")
    expect(recalledSecond).not.toBe(recalledFirst)
    expect(cuesSecond).not.toBe(cuesFirst)
  })

  it("records a recall that finds no cue to serve as its similarities alone", () => {
    given(registered(), stepStarted("s1", 1))
      .when((view) =>
        decideRecall(
          view!,
          "s1",
          { trigger: "similarity", similarities: [{ entryId: "e9", similarity: 0.2 }], cues: [] },
          { at: 2 },
        ),
      )
      .then({ _tag: "StepRecalled", stepId: "s1" })
  })

  it("refuses a recall for a step that is not open", () => {
    given(registered(), stepStarted("s1", 1), stepEnded("s1", 2))
      .when((view) => decideRecall(view!, "s1", { trigger: "similarity", similarities: [], cues: [] }, { at: 3 }))
      .thenFails("InvalidState")
  })

  it("rehydrates a long-term entry named in the open step", () => {
    given(registered(), ...longTermEntry, stepStarted("s1", 3))
      .when((view) =>
        decideExplicitRehydration(
          view!,
          "s1",
          "e1",
          recalledText("The lease ends."),
          "lease",
          { at: 4, causationId: "ref-1" },
          new Map([["e1", { standing: "long-term", standingSeq: 2, subjectSeq: 2 }]]),
        ),
      )
      .then({
        _tag: "CueRehydrated",
        trigger: "explicit-reference",
        relevance: 1,
        entryId: "e1",
        causationId: "ref-1",
        correlationId: "lease",
      })
  })

  it("refuses to rehydrate an entry that is not in long-term memory", () => {
    given(registered(), recorded("e1", "Still in working.", 1), stepStarted("s1", 2))
      .when((view) =>
        decideExplicitRehydration(
          view!,
          "s1",
          "e1",
          recalledText("Still in working."),
          null,
          { at: 3 },
          NO_ENTRY_FACTS,
        ),
      )
      .thenFails("InvalidState")
  })

  it("promotes once per occasion", () => {
    given(registered(), ...longTermEntry, stepStarted("s1", 3), rehydrated("s1", "e1", 4))
      .when((view) =>
        decidePromotion(
          view!,
          { stepId: "s1", entryId: "e1", trigger: "similarity", recalled: recalledText("The lease ends."), key: "s1" },
          { at: 5 },
        ),
      )
      .then({ _tag: "CuePromoted", stepId: "s1", entryId: "e1", eventId: `${AGENT}:promote:s1:e1`, causationId: "s1" })
  })
})
