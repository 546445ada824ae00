import { describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { agentConfigSubject, agentStepSubject, entrySubject } from "../../contracts/subjects.ts"
import type { Stamp } from "../../domain/decide.ts"
import { coversSubject, decideForget, erasedSequences } from "../../domain/forget.ts"
import { given } from "../support/decider-spec.ts"
import { AGENT, demoted, recorded, registered } from "../support/events.ts"

const stamp = (eventId: string, at = 10): Stamp => ({
  eventId,
  agentId: AGENT,
  at,
  causationId: "operator:forget",
  correlationId: null,
})
const SECRET = "The safe combination is 31-04-77."

describe("forget decider", () => {
  it("forgets an entry held in working with a tombstone that names it and carries none of its content", () => {
    const spec = given(registered(), recorded("e1", SECRET, 1)).when((view) =>
      decideForget(view, { entryId: "e1" }, stamp("f1")),
    )
    spec.then({ _tag: "EntryForgotten", entryId: "e1", agentId: AGENT, eventId: "f1", causationId: "operator:forget" })
  })

  it("forgets an entry that has been demoted to long-term", () => {
    given(registered(), recorded("e1", SECRET, 1), demoted("e1", 2))
      .when((view) =>
        decideForget(
          view,
          { entryId: "e1" },
          stamp("f1"),
          new Map([["e1", { standing: "long-term", standingSeq: 2, subjectSeq: 2 }]]),
        ),
      )
      .then({ _tag: "EntryForgotten", entryId: "e1" })
  })

  it("forgets a registered agent", () => {
    given(registered(), recorded("e1", SECRET, 1))
      .when((view) => decideForget(view, {}, stamp("f1")))
      .then({ _tag: "AgentForgotten", agentId: AGENT, eventId: "f1" })
  })

  it("refuses to forget an agent that was never registered", () => {
    const error = given()
      .when((view) => decideForget(view, {}, stamp("f1")))
      .thenFails("AgentNotFound")
    expect(error).toMatchObject({ agentId: AGENT })
  })

  it("refuses to forget an agent already forgotten", () => {
    const forgotten: EventOf<"AgentForgotten"> = {
      _tag: "AgentForgotten",
      v: 1,
      eventId: "f0",
      agentId: AGENT,
      at: 5,
      causationId: null,
      correlationId: null,
    }
    given(registered(), forgotten)
      .when((view) => decideForget(view, {}, stamp("f1")))
      .thenFails("AgentNotFound")
  })

  it("refuses to forget an entry the agent does not hold", () => {
    const error = given(registered(), recorded("e1", SECRET, 1))
      .when((view) => decideForget(view, { entryId: "e2" }, stamp("f1")))
      .thenFails("UnknownEntries")
    expect(error).toMatchObject({ entryIds: ["e2"] })
  })

  it("refuses an entry of an agent that was never registered", () => {
    given()
      .when((view) => decideForget(view, { entryId: "e1" }, stamp("f1")))
      .thenFails("AgentNotFound")
  })

  it("refuses an entry id that cannot be a subject token, naming the field", () => {
    const error = given(registered())
      .when((view) => decideForget(view, { entryId: "a.b" }, stamp("f1")))
      .thenFails("ValidationError")
    expect(error).toMatchObject({ field: "entryId" })
  })
})

describe("what a tombstone erases", () => {
  const entryTombstone: EventOf<"EntryForgotten"> = {
    _tag: "EntryForgotten",
    v: 1,
    eventId: "f",
    agentId: "a",
    at: 1,
    causationId: null,
    correlationId: null,
    entryId: "e1",
  }
  const agentTombstone: EventOf<"AgentForgotten"> = {
    _tag: "AgentForgotten",
    v: 1,
    eventId: "f",
    agentId: "a",
    at: 1,
    causationId: null,
    correlationId: null,
  }

  it("an entry's tombstone erases every record on the entry's subject but itself, before or after it", () => {
    const records = [
      { seq: 1, subject: agentConfigSubject("a") },
      { seq: 2, subject: entrySubject("a", "e1") },
      { seq: 3, subject: entrySubject("a", "e2") },
      { seq: 4, subject: entrySubject("a", "e1") },
      { seq: 5, subject: entrySubject("a", "e1") },
      { seq: 6, subject: entrySubject("a", "e1") },
    ]
    expect(erasedSequences(entryTombstone, 5, records)).toEqual([2, 4, 6])
  })

  it("an agent's tombstone erases everything of the agent before it, and later records of its old entries, not those of the agent registered again", () => {
    const records = [
      { seq: 1, subject: agentConfigSubject("a") },
      { seq: 2, subject: entrySubject("a", "e1") },
      { seq: 3, subject: agentStepSubject("a") },
      { seq: 4, subject: agentConfigSubject("a") },
      { seq: 5, subject: entrySubject("a", "e1") },
      { seq: 6, subject: agentConfigSubject("a") },
      { seq: 7, subject: entrySubject("a", "e9") },
      { seq: 8, subject: agentStepSubject("a") },
    ]
    expect(erasedSequences(agentTombstone, 4, records)).toEqual([1, 2, 3, 5])
  })

  it("an agent's tombstone erases a later record on its step subject (a recall that raced the forget) until the agent is registered again", () => {
    const records = [
      { seq: 1, subject: agentConfigSubject("a") },
      { seq: 2, subject: agentStepSubject("a") },
      { seq: 3, subject: agentConfigSubject("a") },
      { seq: 4, subject: agentStepSubject("a") },
      { seq: 5, subject: agentConfigSubject("a") },
      { seq: 6, subject: agentStepSubject("a") },
    ]
    expect(erasedSequences(agentTombstone, 3, records)).toEqual([1, 2, 4])
  })

  it("covers the entry's subject, or every subject of the agent, and no other agent's", () => {
    expect(coversSubject(entryTombstone, entrySubject("a", "e1"))).toBe(true)
    expect(coversSubject(entryTombstone, entrySubject("a", "e10"))).toBe(false)
    expect(coversSubject(agentTombstone, agentStepSubject("a"))).toBe(true)
    expect(coversSubject(agentTombstone, agentStepSubject("ab"))).toBe(false)
  })
})
