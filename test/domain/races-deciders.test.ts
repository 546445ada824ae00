import { HashMap } from "effect"
import { describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import {
  type AgentView,
  evolve,
  expectedSeqOf,
  SEEN_GENERATION,
  SEEN_IDS,
  seenIdCount,
} from "../../domain/agent-view.ts"
import { decideBeginStep, decideRead, recordConflict, type Stamp } from "../../domain/decide.ts"
import { accept } from "../../domain/decision.ts"
import { replayedContext, requestBody, storedContext } from "../../domain/requests.ts"
import { given } from "../support/decider-spec.ts"
import { AGENT, demoted, faded, recorded, registered, stepEnded, stepStarted } from "../support/events.ts"

const stamp = (eventId: string, at = 10): Stamp => ({
  eventId,
  agentId: AGENT,
  at,
  causationId: eventId,
  correlationId: null,
})
const T0 = Date.UTC(2024, 4, 8, 13, 0)

/** decideRead's event, in the shape the spec helper compares. */
const readEvent = (view: AgentView | undefined, request: Parameters<typeof decideRead>[1]) => {
  const decision = decideRead(view!, request, stamp("read-1"))
  return decision.ok ? accept(decision.event.event) : decision
}

describe("the read decider", () => {
  it("records what the build served, in the open step", () => {
    given(registered(), recorded("e1", "The lease ends in May.", T0), stepStarted("s1", T0 + 1))
      .when((view) => readEvent(view, { stepId: "s1" }))
      .then({
        _tag: "EntriesRead",
        eventId: "read-1",
        stepId: "s1",
        budget: 8_000,
        served: [{ entryId: "e1", form: "raw", cue: false }],
      })
  })

  it("records a read outside any step with no step id, at a per-call limit", () => {
    given(registered(), recorded("e1", "The lease ends in May.", T0))
      .when((view) => readEvent(view, { limit: 500 }))
      .then({ _tag: "EntriesRead", stepId: null, budget: 500 })
  })

  it("refuses a build for a step that has ended", () => {
    given(
      registered(),
      recorded("e1", "The lease ends in May.", T0),
      stepStarted("s1", T0 + 1),
      stepEnded("s1", T0 + 2),
    )
      .when((view) => readEvent(view, { stepId: "s1" }))
      .thenFails("InvalidState")
  })

  it("serves the same context its event records", () => {
    const { view } = given(
      registered(),
      recorded("e1", "The lease ends in May.", T0),
      recorded("e2", "Viewing on Tuesday.", T0 + 60_000),
    )
    const decision = decideRead(view!, {}, stamp("read-2"))
    if (!decision.ok) throw new Error("refused")
    expect(decision.event.event.tokens).toBe(decision.event.built.tokens)
    expect(decision.event.event.served.map((s) => s.entryId)).toEqual(decision.event.built.items.map((i) => i.entryId))
  })
})

describe("a retried step begin", () => {
  it("of the step that is open records nothing, and the view knows where the step began", () => {
    const spec = given(registered(), stepStarted("s1", 1))
    spec.when((view) => decideBeginStep(view!, { stepId: "s1" }, stamp("b1"), "s1")).then()
    expect(spec.view!.step!.startedSeq).toBe(2)
  })
})

describe("the sequence each write is guarded by", () => {
  const entry = recorded("e1", "The lease ends in May.", T0)
  const events = [
    registered(),
    entry,
    stepStarted("s1", T0 + 1),
    faded(entry, 1, "Lease ends May."),
    stepEnded("s1", T0 + 2),
    recorded("e2", "Viewing on Tuesday.", T0 + 3),
    demoted("e2", T0 + 4),
  ]
  const { view } = given(...events)
  const step = (e: EventOf<"StepStarted">) => expectedSeqOf(view!, e)

  it("is the step subject's last event for steps, focus, reads and references", () => {
    // seq 5 is the StepEnded: the last event on the step subject.
    expect(step(stepStarted("s2", T0 + 5))).toBe(5)
  })

  it("is the configuration subject's last event for budgets", () => {
    expect(
      expectedSeqOf(view!, {
        ...registered(),
        _tag: "BudgetChanged",
        reason: "retune",
        baseBudget: 9_000,
        budget: 9_000,
      } as never),
    ).toBe(1)
  })

  it("is a native entry's own last event; any other entry's subject is read from the log", () => {
    expect(expectedSeqOf(view!, faded(entry, 2, "Lease: May."))).toBe(4)
    // e2 left working at seq 7: the view keeps no position for it, the writer reads the entry's subject.
    expect(expectedSeqOf(view!, { ...demoted("e2", 0), _tag: "CueDropped", stepId: "s1" } as never)).toBeNull()
    expect(expectedSeqOf(view!, recorded("e3", "New.", T0 + 9))).toBeNull()
  })
})

describe("a record retried with the same request id", () => {
  const stored = recorded("e1", "The lease ends in May.", T0, { tags: ["home"] })

  it("with the same body is the same request, whether or not it repeats the timestamp", () => {
    expect(recordConflict({ origin: "USER", content: "The lease ends in May.", tags: ["home"] }, stored)).toBeNull()
    expect(
      recordConflict({ origin: "USER", content: "The lease ends in May.", tags: ["home"], timestamp: T0 }, stored),
    ).toBeNull()
  })

  it("with another body names the first field that differs", () => {
    expect(recordConflict({ origin: "USER", content: "The lease ends in June.", tags: ["home"] }, stored)).toBe(
      "content",
    )
    expect(recordConflict({ origin: "ADVISOR", content: "The lease ends in May.", tags: ["home"] }, stored)).toBe(
      "origin",
    )
    expect(
      recordConflict({ origin: "USER", content: "The lease ends in May.", tags: ["home"], timestamp: T0 + 1 }, stored),
    ).toBe("timestamp")
    expect(recordConflict({ origin: "USER", content: "The lease ends in May." }, stored)).toBe("tags")
  })
})

describe("the request ledger's records", () => {
  it("compare request bodies without their request id or read position, whatever the key order", () => {
    expect(requestBody({ requestId: "a", stepId: "s1", focus: { task: "t", query: "q" } })).toBe(
      requestBody({ focus: { query: "q", task: "t" }, stepId: "s1", requestId: "b", afterSeq: 4 }),
    )
    expect(requestBody({ stepId: "s1" })).not.toBe(requestBody({ stepId: "s2" }))
  })

  it("keep no text of a build, and serve it again from what working holds", () => {
    const { view } = given(
      registered(),
      recorded("e1", "The lease ends in May.", T0),
      recorded("e2", "Viewing on Tuesday.", T0 + 86_400_000),
    )
    const decision = decideRead(view!, {}, stamp("read-3"))
    if (!decision.ok) throw new Error("refused")
    const reply = { ...decision.event.built, seq: 9 }
    const kept = storedContext(reply)
    expect(JSON.stringify(kept)).not.toContain("lease")
    expect(replayedContext(view!, kept)).toEqual(reply)
  })
})

describe("the views' memory of applied event ids", () => {
  it("skips a copy of an applied event stored again under another sequence", () => {
    const read = {
      ...registered(),
      _tag: "EntriesRead",
      eventId: "read-x",
      stepId: null,
      budget: 100,
      tokens: 10,
      served: [{ entryId: "e1", form: "raw", cue: false }],
    } as EventOf<"EntriesRead">
    const { view } = given(registered(), recorded("e1", "The lease ends in May.", T0), read)
    const again = evolve(view, read, { seq: 10 })
    expect(HashMap.get(again!.entries, "e1").pipe((o) => (o._tag === "Some" ? o.value.referenceCount : -1))).toBe(1)
    expect(again!.lastSeq).toBe(10)
  })

  it("holds a bounded number of ids, a few kilobytes per agent", () => {
    let view = given(registered()).view
    for (let i = 0; i < 5_000; i++) view = evolve(view, stepStarted(`s${i}`, i), { seq: i + 2 })
    const held = seenIdCount(view!.seen)
    expect(held).toBeGreaterThanOrEqual(SEEN_IDS)
    expect(held).toBeLessThanOrEqual(SEEN_IDS + SEEN_GENERATION)
  })
})
