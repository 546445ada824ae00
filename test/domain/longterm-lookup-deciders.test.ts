/**
 * Decisions about an entry the view does not hold natively take where it
 * stands from the log (the last event on its subject), passed in as a fact:
 * the view keeps no ids of long-term entries. A reference to, a forget of and
 * a cue for a long-term entry are accepted when the fact says long-term, and
 * refused with the same typed errors as ever when it says otherwise.
 */
import { describe, expect, it } from "vitest"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import { decideExplicitRehydration, type Recalled } from "../../domain/cue-decide.ts"
import { decideReference, type Stamp } from "../../domain/decide.ts"
import {
  type EntryFact,
  type EntryFacts,
  type EntryStanding,
  factAfter,
  NO_ENTRY_FACTS,
  standingAfter,
} from "../../domain/entry-standing.ts"
import { decideForget } from "../../domain/forget.ts"
import { given } from "../support/decider-spec.ts"
import { AGENT, demoted, faded, recalledEntry, recorded, registered, stepStarted } from "../support/events.ts"

const stamp = (eventId: string): Stamp => ({ eventId, agentId: AGENT, at: 10, causationId: null, correlationId: null })

const fact = (standing: EntryStanding, seq: number): EntryFact => ({ standing, standingSeq: seq, subjectSeq: seq })
const knowing = (entryId: string, f: EntryFact): EntryFacts => new Map([[entryId, f]])

const recalled: Recalled = recalledEntry("The lease ends in May.")

/** e1 recorded then demoted (seq 2, 3): the view no longer holds it, in any form. */
const leftWorking = [registered(), recorded("e1", "The lease ends in May.", 1), demoted("e1", 2)] as const

describe("where an entry stands, from the last event on its subject", () => {
  const entry = recorded("e1", "The lease ends in May.", 1)
  const forgotten: EventOf<"EntryForgotten"> = {
    _tag: "EntryForgotten",
    v: 1,
    eventId: "f0",
    agentId: AGENT,
    at: 4,
    causationId: "operator:forget",
    correlationId: null,
    entryId: "e1",
  }
  const cases: ReadonlyArray<readonly [MemoryEvent | null, EntryStanding]> = [
    [null, "absent"],
    [entry, "working"],
    [faded(entry, 1, "Lease: May."), "working"],
    [demoted("e1", 2), "long-term"],
    [{ ...demoted("e1", 3), _tag: "CueDropped", stepId: "s1" } as never, "long-term"],
    [forgotten, "forgotten"],
  ]
  it.each(cases)("after %#: %s", (last, standing) => {
    expect(standingAfter(last)).toBe(standing)
  })

  it("keeps the subject's last position apart from the event the standing follows from", () => {
    // A last record that does not decode moves the position a write must expect, not the standing.
    expect(factAfter(demoted("e1", 2), 3, 9)).toEqual({ standing: "long-term", standingSeq: 3, subjectSeq: 9 })
    expect(factAfter(null, 3, 9)).toEqual({ standing: "absent", standingSeq: 0, subjectSeq: 9 })
  })
})

describe("a reference to an entry in long-term", () => {
  const step = stepStarted("s1", 3)

  it("is accepted when the log says the entry is in long-term", () => {
    given(...leftWorking, step)
      .when((view) =>
        decideReference(view!, { stepId: "s1", entryIds: ["e1"] }, stamp("r1"), knowing("e1", fact("long-term", 3))),
      )
      .then({ _tag: "EntriesReferenced", stepId: "s1", entryIds: ["e1"] })
  })

  it("is refused as UnknownEntries when the log knows no such entry", () => {
    const error = given(...leftWorking, step)
      .when((view) => decideReference(view!, { stepId: "s1", entryIds: ["e1", "e9"] }, stamp("r1"), NO_ENTRY_FACTS))
      .thenFails("UnknownEntries")
    expect(error).toMatchObject({ entryIds: ["e1", "e9"] })
  })

  it("is refused as UnknownEntries when the log says the entry was forgotten", () => {
    given(...leftWorking, step)
      .when((view) =>
        decideReference(view!, { stepId: "s1", entryIds: ["e1"] }, stamp("r1"), knowing("e1", fact("forgotten", 5))),
      )
      .thenFails("UnknownEntries")
  })

  it("names only the entries the log does not hold, beside working entries", () => {
    const error = given(...leftWorking, recorded("e2", "Call the landlord.", 2), step)
      .when((view) =>
        decideReference(
          view!,
          { stepId: "s1", entryIds: ["e2", "e1", "e3"] },
          stamp("r1"),
          knowing("e1", fact("long-term", 3)),
        ),
      )
      .thenFails("UnknownEntries")
    expect(error).toMatchObject({ entryIds: ["e3"] })
  })
})

describe("a forget of an entry in long-term", () => {
  it("is accepted when the log says the entry is in long-term", () => {
    given(...leftWorking)
      .when((view) =>
        decideForget(
          view,
          { entryId: "e1" },
          { ...stamp("f1"), causationId: "operator:forget" },
          knowing("e1", fact("long-term", 3)),
        ),
      )
      .then({ _tag: "EntryForgotten", entryId: "e1", eventId: "f1" })
  })

  it("is refused as UnknownEntries when the log knows no such entry", () => {
    const error = given(...leftWorking)
      .when((view) => decideForget(view, { entryId: "e1" }, stamp("f1"), NO_ENTRY_FACTS))
      .thenFails("UnknownEntries")
    expect(error).toMatchObject({ entryIds: ["e1"] })
  })

  it("is refused as UnknownEntries when the entry was already forgotten", () => {
    given(...leftWorking)
      .when((view) => decideForget(view, { entryId: "e1" }, stamp("f2"), knowing("e1", fact("forgotten", 4))))
      .thenFails("UnknownEntries")
  })
})

describe("a cue for a long-term entry named in the step", () => {
  const step = stepStarted("s1", 3)
  const rehydrate = (known: EntryFacts) =>
    given(...leftWorking, step).when((view) =>
      decideExplicitRehydration(view!, "s1", "e1", recalled, null, { at: 5, causationId: "ref-1" }, known),
    )

  it("is rehydrated when the log says the entry is in long-term", () => {
    rehydrate(knowing("e1", fact("long-term", 3))).then({
      _tag: "CueRehydrated",
      entryId: "e1",
      stepId: "s1",
      trigger: "explicit-reference",
      causationId: "ref-1",
    })
  })

  it("is refused as InvalidState when the log knows no such entry", () => {
    const error = rehydrate(NO_ENTRY_FACTS).thenFails("InvalidState")
    expect(error).toMatchObject({ field: "entryId" })
  })

  it("is refused as InvalidState when the log says the entry was forgotten or promoted back", () => {
    rehydrate(knowing("e1", fact("forgotten", 6))).thenFails("InvalidState")
    rehydrate(knowing("e1", fact("working", 6))).thenFails("InvalidState")
  })
})
