/**
 * The dashboard's read model, fed events as the log delivers them: forget holds on the page (an entry's
 * tombstone drops everything held for the entry, an agent's everything of the agent), a replay to an
 * instant applies exactly the events stamped by then, and a history carries each decision's score.
 */
import { describe, expect, it } from "vitest"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import { DashboardModel } from "../../services/dashboard/read-model.ts"
import { AGENT, faded, recorded, registered } from "../support/events.ts"

const fed = (...events: MemoryEvent[]): DashboardModel => {
  const model = new DashboardModel()
  events.forEach((event, i) => {
    model.add({ seq: i + 1, subject: `wm.evt.${AGENT}.x`, event })
  })
  return model
}

const tombstone = <T extends "EntryForgotten" | "AgentForgotten">(tag: T, at: number, entryId?: string): EventOf<T> =>
  ({
    _tag: tag,
    v: 1,
    eventId: `forget-${tag}-${at}`,
    agentId: AGENT,
    at,
    causationId: null,
    correlationId: null,
    ...(entryId !== undefined ? { entryId } : {}),
  }) as EventOf<T>

const texts = (model: DashboardModel, at?: number) =>
  JSON.stringify([model.page(AGENT, at === undefined ? null : { at }), model.timeline(AGENT)])

describe("the dashboard's read model", () => {
  it("drops every event of a forgotten entry: no replay, timeline or history shows its text again", () => {
    const secret = recorded("e-secret", "My PIN is 4471.", 10)
    const kept = recorded("e-kept", "Lunch at noon.", 20)
    const model = fed(
      registered(),
      secret,
      faded(secret, 1, "PIN 4471."),
      kept,
      tombstone("EntryForgotten", 40, "e-secret"),
    )
    expect(texts(model)).not.toContain("4471")
    expect(texts(model, 15)).not.toContain("4471")
    expect(model.history(AGENT, "e-secret").map((h) => h.type)).toEqual(["EntryForgotten"])
    expect(texts(model)).toContain("Lunch at noon.")
  })

  it("shows no cue of a forgotten entry, in a recall stored before its forget or after it", () => {
    const recall = (at: number, eventId: string): EventOf<"CuesRehydrated"> => ({
      _tag: "CuesRehydrated",
      v: 1,
      eventId,
      agentId: AGENT,
      at,
      causationId: "s1",
      correlationId: null,
      stepId: "s1",
      trigger: "similarity",
      cues: [
        { entryId: "e-secret", text: "My PIN is 4471." },
        { entryId: "e-kept", text: "Lunch at noon." },
      ].map(({ entryId, text }) => ({
        entryId,
        relevance: 0.5,
        correlationId: null,
        recalled: {
          timestamp: 1,
          origin: "USER" as const,
          tags: [],
          moodSnapshot: null,
          emotionalWeight: 0,
          form: "raw" as const,
          text,
          tokens: 6,
        },
      })),
    })
    const step: EventOf<"StepStarted"> = {
      _tag: "StepStarted",
      v: 1,
      eventId: "step-s1",
      agentId: AGENT,
      at: 30,
      causationId: null,
      correlationId: null,
      stepId: "s1",
      focus: null,
    }
    const model = fed(
      registered(),
      recorded("e-secret", "My PIN is 4471.", 10),
      recorded("e-kept", "Lunch at noon.", 20),
      step,
      recall(40, "before"),
      tombstone("EntryForgotten", 50, "e-secret"),
      recall(60, "after"),
    )
    expect(texts(model)).not.toContain("4471")
    expect(JSON.stringify(model.history(AGENT, "e-secret"))).not.toContain("4471")
    expect(model.history(AGENT, "e-kept").filter((h) => h.type === "CuesRehydrated")).toHaveLength(2)
    expect(model.history(AGENT, "e-kept").map((h) => h.text)).toContain("Lunch at noon.")
  })

  it("drops every event of a forgotten agent, and lists it no more", () => {
    const model = fed(registered(), recorded("e-1", "Call the bank.", 10), tombstone("AgentForgotten", 20))
    expect(model.agents()).toEqual([])
    expect(model.page(AGENT, null)).toBeUndefined()
    expect(JSON.stringify(model.timeline(AGENT))).not.toContain("Call the bank.")
  })

  it("replays the view to an instant and gives each fade decision's score in the history", () => {
    const first = recorded("e-1", "The offsite is in March.", 10)
    const model = fed(
      registered(),
      first,
      recorded("e-2", "Forty people are coming.", 20),
      faded(first, 1, "offsite March"),
    )
    const before = model.page(AGENT, { at: 10 })!
    expect(before.applied).toBe(2)
    expect(before.entries.raw.map((e) => e.id)).toEqual(["e-1"])
    const now = model.page(AGENT, null)!
    expect(now.entries.keyPoints.map((e) => [e.id, e.text])).toEqual([["e-1", "offsite March"]])
    const decision = model.history(AGENT, "e-1").find((h) => h.type === "RungChanged")!
    expect(decision.score?.parts).toEqual({ age: 1, frequency: 0, emotion: 0, focus: 0, pressure: 0 })
  })
})
