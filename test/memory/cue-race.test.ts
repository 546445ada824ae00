/**
 * A step's cue drops are appended by retrieval after the step ended, while
 * the agent may already be in its next step with a fresh cue for the same
 * entry; and a promotion is appended at the entry subject's position as
 * retrieval last saw it, which the log may have moved past. Against a real nats-server
 * with every service running.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { entrySubject } from "../../contracts/subjects.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { recordThenDemote } from "../support/fillers.ts"
import { appendEvents, cuesOf, publishRaw, readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 5, 3, 8)
const AGENT = "cue-racer"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

const logged = async <T extends EventOf<"EntryDemoted">["_tag"] | "CuesDropped">(tag: T) =>
  (await readLog(system.server.url)).map((s) => s.event).filter((e) => e._tag === tag && e.agentId === AGENT) as Array<
    Extract<EventOf<"EntryDemoted"> | EventOf<"CuesDropped">, { _tag: T }>
  >

describe("cue drops and the next step", () => {
  it("a drop of the previous step that lands after the next step's recall leaves the next step's cue", {
    timeout: 60_000,
  }, async () => {
    const agent = system.client.agent(AGENT)
    await agent.register({ role: "custom", budget: 200 })
    const clock = steppingClock(T0, MINUTE)
    const garden = await recordThenDemote(
      agent,
      system.server.url,
      "Our vegetable garden finally produced its first ripe courgettes.",
      clock,
    )
    agent.lastSeq = Math.max(agent.lastSeq, ...(await readLog(system.server.url)).map((s) => s.seq))

    const focus = { query: "how is the vegetable garden doing?" }
    const first = await agent.beginStep({ focus })
    expect((await agent.buildContext({ stepId: first.stepId })).items.find((i) => i.entryId === garden)?.cue).toBe(true)
    await agent.endStep(first.stepId)
    await eventually(
      "the first step's drop",
      async () => (await logged("CuesDropped")).some((e) => e.stepId === first.stepId && e.entryIds.includes(garden)),
      20_000,
    )

    const second = await agent.beginStep({ focus })
    expect((await agent.buildContext({ stepId: second.stepId })).items.find((i) => i.entryId === garden)?.cue).toBe(
      true,
    )
    // The first step's drop, delivered late (as when retrieval reacts to the step's end after the next step recalled).
    const late = (await logged("CuesDropped")).find((e) => e.stepId === first.stepId && e.entryIds.includes(garden))!
    agent.lastSeq = await appendEvents(system.server.url, [{ ...late, eventId: `${late.eventId}:late` }])

    const built = await agent.buildContext({ stepId: second.stepId })
    expect(built.items.find((i) => i.entryId === garden)).toMatchObject({ cue: true })
    expect(built.text).toContain("first ripe courgettes")
    await agent.endStep(second.stepId)
  })
})

describe("an append about a long-term entry", () => {
  it("a promotion expects the entry's subject where retrieval last saw it, and on a subject moved on since, reads the log and still records it once", {
    timeout: 60_000,
  }, async () => {
    const id = "cue-subject-mover"
    const agent = system.client.agent(id)
    await agent.register({ role: "custom", budget: 200 })
    const clock = steppingClock(T0, MINUTE)
    const tent = await recordThenDemote(
      agent,
      system.server.url,
      "The camping tent has a torn zip on its left door.",
      clock,
    )
    // A record on the entry's subject that no projection decodes: it moves the subject, and retrieval
    // dead-letters it instead of applying it, so what it remembers of the subject is behind the log.
    const moved = await publishRaw(system.server.url, entrySubject(id, tent), "\u0000not an event")
    agent.lastSeq = Math.max(agent.lastSeq, moved)

    const step = await agent.beginStep({ focus: { query: "what is wrong with the camping tent?" } })
    const built = await agent.buildContext({ stepId: step.stepId })
    expect(built.items.find((i) => i.entryId === tent)).toMatchObject({ cue: true })
    expect(built.text).toContain("torn zip")
    expect(
      cuesOf(await readLog(system.server.url)).filter((c) => c.stepId === step.stepId && c.entryId === tent),
    ).toHaveLength(1)

    await agent.reference(step.stepId, [tent])
    await eventually("the tent's promotion", async () => (await promotions(id, tent)).length > 0, 20_000)
    expect(await promotions(id, tent)).toHaveLength(1)
    expect((await agent.view()).entries.find((e) => e.id === tent && !e.transient)?.content).toContain("torn zip")
    await agent.endStep(step.stepId)
  })
})

const promotions = async (agentId: string, entryId: string) =>
  (await readLog(system.server.url))
    .map((s) => s.event)
    .filter((e) => e._tag === "CuePromoted" && e.agentId === agentId && e.entryId === entryId)
