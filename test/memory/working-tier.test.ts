import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { type AgentView, evolve, viewSnapshot } from "../../domain/agent-view.ts"
import { blockTokens } from "../../domain/render.ts"
import { countTokens } from "../../domain/tokens.ts"
import { appendEvents, readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 4, 8, 13, 0)

// The working tier alone: no fade worker moves entries while these tests look at them.
let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem({}, { fade: false })
})
afterAll(async () => system?.stop())

const rebuildFromLog = async (agentId: string): Promise<AgentView | undefined> => {
  let view: AgentView | undefined
  for (const { seq, event } of await readLog(system.server.url)) {
    if (event.agentId === agentId) view = evolve(view, event, { seq })
  }
  return view
}

describe("recording and building the context", () => {
  it("returns entries in timestamp order, thoughts marked apart from speech", async () => {
    const agent = system.client.agent("order-agent")
    await agent.register({ role: "main" })
    // Imported history arrives out of order; the context is in time order.
    await agent.record({ origin: "USER", content: "Can you book the flight?", timestamp: T0 + 2 * MINUTE })
    await agent.record({ origin: "USER", content: "I am going to Lisbon in June.", timestamp: T0 + MINUTE })
    await agent.record({ origin: "INTERNAL", content: "Check the budget before booking.", timestamp: T0 + 3 * MINUTE })
    await agent.record({ origin: "ADVISOR", content: "The user sounds rushed.", timestamp: T0 + 4 * MINUTE })
    const built = await agent.buildContext()
    expect(built.text).toBe(
      "[Wed 2024-05-08]\n" +
        "I am going to Lisbon in June.\n" +
        "Can you book the flight?\n" +
        "thought: Check the budget before booking.\n" +
        "advisor: The user sounds rushed.\n",
    )
    expect(built.tokens).toBe(countTokens(built.text, "o200k_base"))
    expect(built.items.map((i) => i.origin)).toEqual(["USER", "USER", "INTERNAL", "ADVISOR"])
  })

  it("serves the newest entries raw and older ones at the rungs they faded to", async () => {
    const agent = system.client.agent("fidelity-agent")
    await agent.register({ role: "custom", budget: 1_000 })
    const long = (topic: string) =>
      `We discussed ${topic} at length. ${`The details of ${topic} matter for the plan we agreed on. `.repeat(5)}`
    const ids: string[] = []
    const rawTokens: number[] = []
    for (const [i, topic] of ["the venue", "the catering", "the guest list", "the music"].entries()) {
      const r = await agent.record({ origin: "USER", content: long(topic), timestamp: T0 + i * MINUTE })
      ids.push(r.entryId)
      rawTokens.push(r.tokens)
    }
    // A fade worker moves the two oldest entries down: their events go on the log like any other.
    const view = (await system.liveView("fidelity-agent"))!
    const rung = (id: string, to: 1 | 2, text: string, from: 0 | 1): EventOf<"RungChanged"> => {
      const entry = view.entries.pipe((m) => Array.from(m).find(([k]) => k === id)![1])
      return {
        _tag: "RungChanged",
        v: 1,
        eventId: `test-fade-${id}-${to}`,
        agentId: "fidelity-agent",
        at: Date.now(),
        causationId: null,
        correlationId: null,
        entryId: id,
        from,
        to,
        text,
        tokens: blockTokens(entry, to === 1 ? "keyPoints" : "summary", text, "o200k_base"),
        score: {
          total: 1,
          parts: { age: 1, frequency: 0, emotion: 0, focus: 0, pressure: 0 },
          trigger: "threshold",
          threshold: 0.5,
          usage: 1,
          tau: 0.8,
          now: 0,
        },
        producer: { kind: "extractive", model: "test", fallbackReason: null, attempts: 1 },
      }
    }
    const fades = [
      rung(ids[0]!, 1, "The venue was discussed.", 0),
      rung(ids[0]!, 2, "Venue: agreed.", 1),
      rung(ids[1]!, 1, "The catering details matter.", 0),
    ]
    agent.lastSeq = await appendEvents(system.server.url, fades)
    // Room for the two newest raw and the two oldest at their rungs, not for the catering raw.
    const limit = fades[1]!.tokens + fades[2]!.tokens + rawTokens[2]! + rawTokens[3]! + 8 + 5
    expect(rawTokens[1]! - fades[2]!.tokens).toBeGreaterThan(5)
    const built = await agent.buildContext({ limit })
    const forms = built.items.map((i) => [i.entryId, i.form])
    expect(forms[0]).toEqual([ids[0], "summary"])
    expect(forms[1]).toEqual([ids[1], "keyPoints"])
    expect(forms[2]).toEqual([ids[2], "raw"])
    expect(forms[3]).toEqual([ids[3], "raw"])
    expect(built.tokens).toBeLessThanOrEqual(limit)
    // With the whole budget, the catering entry is served raw again: key points are stored beside it.
    const roomy = await agent.buildContext()
    expect(roomy.items.map((i) => i.form)).toEqual(["summary", "raw", "raw", "raw"])
    expect(countTokens(built.text, "o200k_base")).toBe(built.tokens)
  })

  it("never exceeds a per-call limit below the budget", async () => {
    const agent = system.client.agent("limit-agent")
    await agent.register({ role: "mood-advisor" })
    for (let i = 0; i < 30; i++) {
      await agent.record({
        origin: "ADVISOR",
        content: `cue ${i}: the user seems ${i % 2 ? "calm" : "tense"} right now`,
      })
    }
    for (const limit of [16, 50, 120, 333]) {
      const built = await agent.buildContext({ limit })
      expect(built.budget).toBe(limit)
      expect(countTokens(built.text, "o200k_base")).toBeLessThanOrEqual(limit)
    }
  })

  it("counts each build as a read of the entries it served", async () => {
    const agent = system.client.agent("reads-agent")
    await agent.register({ role: "main" })
    const { entryId } = await agent.record({ origin: "USER", content: "remember this" })
    await agent.buildContext()
    await agent.buildContext()
    const view = await agent.view()
    expect(view.entries.find((e) => e.id === entryId)?.referenceCount).toBe(2)
  })
})

describe("budgets", () => {
  it("defaults each role to its design budget", async () => {
    const expected = {
      supervisor: 12_000,
      main: 8_000,
      generator: 8_000,
      "mood-advisor": 2_000,
      "time-actor": 256,
    } as const
    for (const [role, budget] of Object.entries(expected)) {
      const reply = await system.client.agent(`role-${role}`).register({ role: role as keyof typeof expected })
      expect(reply.budget).toBe(budget)
      expect((await system.client.agent(`role-${role}`).view()).budget).toBe(budget)
    }
  })

  it("retunes, expands in hyperfocus, then contracts back", async () => {
    const agent = system.client.agent("supervisor-1")
    await agent.register({ role: "supervisor" })
    expect((await agent.retuneBudget(10_000)).budget).toBe(10_000)
    const entered = await agent.enterHyperfocus()
    expect(entered).toMatchObject({ baseBudget: 10_000, budget: 20_000, hyperfocus: true })
    expect((await agent.view()).budget).toBe(20_000)
    const exited = await agent.exitHyperfocus()
    expect(exited).toMatchObject({ baseBudget: 10_000, budget: 10_000, hyperfocus: false })
    const view = await agent.view()
    expect(view).toMatchObject({ budget: 10_000, hyperfocus: false })
    await agent.enterHyperfocus(15_000)
    expect((await agent.view()).budget).toBe(15_000)
    await agent.exitHyperfocus()
  })

  it("builds within the expanded budget only while in hyperfocus", async () => {
    const agent = system.client.agent("deep-diver")
    await agent.register({ role: "custom", budget: 100 })
    for (let i = 0; i < 20; i++)
      await agent.record({ origin: "INTERNAL", content: `layer ${i} of thinking about thinking` })
    const normal = await agent.buildContext()
    await agent.enterHyperfocus(400)
    const deep = await agent.buildContext()
    await agent.exitHyperfocus()
    const after = await agent.buildContext()
    expect(normal.tokens).toBeLessThanOrEqual(100)
    expect(deep.tokens).toBeGreaterThan(100)
    expect(deep.tokens).toBeLessThanOrEqual(400)
    expect(after.tokens).toBeLessThanOrEqual(100)
  })
})

describe("the log is the truth", () => {
  const activity = async (agentId: string) => {
    const agent = system.client.agent(agentId)
    await agent.register({ role: "main" })
    const ids: string[] = []
    for (let i = 0; i < 25; i++) {
      const r = await agent.record({
        origin: i % 3 === 0 ? "INTERNAL" : "USER",
        content: `turn ${i}: ${"words ".repeat(i % 7)}end`,
        tags: i % 4 === 0 ? ["important"] : [],
        emotionalWeight: (i % 5) / 5,
        mood: { valence: 0.2, arousal: 0.4 },
        correlationId: `thread-${i % 3}`,
      })
      ids.push(r.entryId)
    }
    const step = await agent.beginStep({ focus: { task: "plan the trip" } })
    await agent.buildContext({ stepId: step.stepId, limit: 200 })
    await agent.reference(step.stepId, [ids[3]!, ids[7]!])
    await agent.endStep(step.stepId)
    await agent.setFocus({ focus: { task: "book hotels" }, taskKind: "planning" })
    await agent.enterHyperfocus()
    await agent.buildContext()
    await agent.exitHyperfocus()
    await agent.view()
  }

  it("a view rebuilt from the whole log equals the live view", async () => {
    await activity("rebuild-agent")
    const live = (await system.liveView("rebuild-agent"))!
    const rebuilt = (await rebuildFromLog("rebuild-agent"))!
    expect(viewSnapshot(rebuilt)).toEqual(viewSnapshot(live))
    expect(live.entryCount).toBe(25)
    expect(viewSnapshot(live).entries.find((e) => e.citationCount === 1)).toBeDefined()
  })

  it("a restarted working service restores the same views and builds the same context", async () => {
    await activity("restart-agent")
    const before = viewSnapshot((await system.liveView("restart-agent"))!)
    const agent = system.client.agent("restart-agent")
    const { text } = await agent.buildContext({ order: "timestamp" })
    const afterBuild = viewSnapshot((await system.liveView("restart-agent"))!)
    await system.restartServices()
    const after = viewSnapshot((await system.liveView("restart-agent"))!)
    expect(after).toEqual(afterBuild)
    expect(after.entries.length).toBe(before.entries.length)
    const again = await agent.buildContext({ order: "timestamp" })
    expect(again.text).toBe(text)
  })
})

describe("retries", () => {
  it("a record retried with the same request id is stored once and applied once", async () => {
    const agent = system.client.agent("retry-agent")
    await agent.register({ role: "main" })
    const first = await agent.record({ requestId: "req-42", origin: "USER", content: "only once" })
    const second = await agent.record({ requestId: "req-42", origin: "USER", content: "only once" })
    expect(first.duplicate).toBe(false)
    expect(second.duplicate).toBe(true)
    expect(second.entryId).toBe(first.entryId)
    expect(second.seq).toBe(first.seq)
    const stored = (await readLog(system.server.url)).filter(
      (e) => e.event._tag === "EntryRecorded" && e.event.agentId === "retry-agent",
    )
    expect(stored).toHaveLength(1)
    const view = await agent.view()
    expect(view.entries.filter((e) => e.content === "only once")).toHaveLength(1)
  })

  it("a reference retried with the same request id counts once", async () => {
    const agent = system.client.agent("retry-ref-agent")
    await agent.register({ role: "main" })
    const { entryId } = await agent.record({ origin: "USER", content: "cite me" })
    const { stepId } = await agent.beginStep()
    const call = () =>
      system.client.call("retry-ref-agent", "referenceEntries", { requestId: "ref-1", stepId, entryIds: [entryId] })
    const a = await call()
    const b = await call()
    expect(b.seq).toBe(a.seq)
    agent.lastSeq = Math.max(agent.lastSeq, b.seq)
    const view = await agent.view()
    expect(view.entries.find((e) => e.id === entryId)?.citationCount).toBe(1)
  })
})

describe("retries outside the dedupe window", () => {
  let shortWindow: TestSystem
  beforeAll(async () => {
    shortWindow = await startTestSystem({ dedupeWindowMs: 200 }, { fade: false })
  })
  afterAll(async () => shortWindow?.stop())

  it("an entry is still created once when the retry comes after the window", async () => {
    const agent = shortWindow.client.agent("late-retry")
    await agent.register({ role: "main" })
    const first = await agent.record({ requestId: "late-1", origin: "USER", content: "slow network" })
    await new Promise((r) => setTimeout(r, 600))
    const second = await agent.record({ requestId: "late-1", origin: "USER", content: "slow network" })
    expect(second.duplicate).toBe(true)
    expect(second.entryId).toBe(first.entryId)
    const stored = (await readLog(shortWindow.server.url)).filter((e) => e.event._tag === "EntryRecorded")
    expect(stored).toHaveLength(1)
  })
})
