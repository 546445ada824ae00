import { describe, it } from "vitest"
import { decideBeginStep, decideEndStep, decideReference, type Stamp } from "../../domain/decide.ts"
import { given } from "../support/decider-spec.ts"
import { AGENT, recorded, registered, stepEnded, stepStarted } from "../support/events.ts"

const stamp = (eventId: string, at = 10): Stamp => ({
  eventId,
  agentId: AGENT,
  at,
  causationId: eventId,
  correlationId: null,
})

describe("step deciders", () => {
  it("begins a step when none is open", () => {
    given(registered())
      .when((view) => decideBeginStep(view!, { stepId: "s1" }, stamp("b1"), "s1"))
      .then({ _tag: "StepStarted", stepId: "s1", focus: null, eventId: "b1" })
  })

  it("refuses a second step while one is open", () => {
    given(registered(), stepStarted("s1", 1))
      .when((view) => decideBeginStep(view!, { stepId: "s2" }, stamp("b2"), "s2"))
      .thenFails("InvalidState")
  })

  it("refuses a reference to a step that has ended", () => {
    given(registered(), recorded("e1", "The lease ends in May.", 1), stepStarted("s1", 2), stepEnded("s1", 3))
      .when((view) => decideReference(view!, { stepId: "s1", entryIds: ["e1"] }, stamp("r1")))
      .thenFails("InvalidState")
  })

  it("ends the open step", () => {
    given(registered(), stepStarted("s1", 1))
      .when((view) => decideEndStep(view!, { stepId: "s1" }, stamp("x1")))
      .then({ _tag: "StepEnded", stepId: "s1" })
  })
})
