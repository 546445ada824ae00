/**
 * Long-term tier, substrate, merged retrieval and transient cues, against a
 * real nats-server with every service running on the embedded store.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { countTokens } from "../../domain/tokens.ts"
import type { AgentClient } from "../../sdk/client.ts"
import { LongTerm, type LongTermShape } from "../../services/memory/longterm/longterm.ts"
import { LongTermStore, type LongTermStoreShape } from "../../services/memory/longterm/store.ts"
import { AgentSharing } from "../../services/platform/access/sharing.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { fadeSettled } from "../support/fade-settled.ts"
import { FILLER_TURNS } from "../support/fillers.ts"
import { cuesOf, lastSeq, readLog } from "../support/log.ts"
import { startLongTermAlone } from "../support/longterm.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 5, 3, 8)

let system: TestSystem
beforeAll(async () => {
  // thread-a and thread-b share a tenant, so a thread spans both (test/security/isolation.test.ts: agents that do not).
  system = await startTestSystem(
    {},
    { sharing: AgentSharing.make([{ name: "migration-team", agents: ["thread-a", "thread-b", "lt-member"] }]) },
  )
})
afterAll(async () => system?.stop())

const listRecords = async (query: Parameters<LongTermStoreShape["list"]>[0]) => {
  const store = await system.services.runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
  return Effect.runPromise(store.list(query))
}

const fillers = FILLER_TURNS

/** Records the memorable entries, then enough filler that they demote out of working. */
const agentWithHistory = async (
  agentId: string,
  memorable: ReadonlyArray<{ content: string; tags?: string[]; correlationId?: string; origin?: "USER" | "INTERNAL" }>,
) => {
  const agent = system.client.agent(agentId)
  await agent.register({ role: "custom", budget: 200 })
  const ids: string[] = []
  const clock = steppingClock(T0, MINUTE)
  for (const m of memorable) {
    ids.push(
      (
        await agent.record({
          origin: m.origin ?? "USER",
          content: m.content,
          timestamp: clock.next(),
          ...(m.tags ? { tags: m.tags } : {}),
          ...(m.correlationId ? { correlationId: m.correlationId } : {}),
        })
      ).entryId,
    )
  }
  for (let i = 0; i < 30; i++)
    await agent.record({ origin: "USER", content: fillers[i % fillers.length]!, timestamp: clock.next() })
  await eventually(
    `${agentId}'s entries to demote`,
    async () => (await demoted(agentId)).filter((id) => ids.includes(id)).length === ids.length,
    20_000,
  )
  // Reads wait for the log position of the demotions.
  agent.lastSeq = Math.max(agent.lastSeq, ...(await readLog(system.server.url)).map((s) => s.seq))
  return { agent, ids }
}

/** Polls (usable in hooks, unlike expect.poll). */
const demoted = async (agentId: string) =>
  (await readLog(system.server.url))
    .filter((s) => s.event._tag === "EntryDemoted" && s.event.agentId === agentId)
    .map((s) => (s.event as EventOf<"EntryDemoted">).entryId)

const eventsOf = async <T extends "CuePromoted" | "CuesDropped">(agentId: string, tag: T) =>
  (await readLog(system.server.url))
    .map((s) => s.event)
    .filter((e) => e._tag === tag && e.agentId === agentId) as Array<
    Extract<EventOf<"CuePromoted"> | EventOf<"CuesDropped">, { _tag: T }>
  >

/** The cues recorded for an agent, from either event that carries them. */
const cuesLogged = async (agentId: string) =>
  cuesOf(await readLog(system.server.url)).filter((cue) => cue.agentId === agentId)

const inWorking = async (agent: AgentClient, entryId: string) =>
  (await agent.view()).entries.find((e) => e.id === entryId && !e.transient)

describe("long-term memory and cues", () => {
  let agent: AgentClient
  let puppy: string
  let garden: string
  beforeAll(async () => {
    const history = await agentWithHistory("recaller", [
      { content: "I adopted a golden retriever puppy named Biscuit last week.", tags: ["pets"] },
      { content: "Our vegetable garden finally produced its first ripe courgettes.", tags: ["garden"] },
    ])
    agent = history.agent
    ;[puppy, garden] = history.ids as [string, string]
    expect(await demoted("recaller")).toEqual(expect.arrayContaining([puppy, garden]))
  })

  it("the substrate returns the raw text of a demoted entry", async () => {
    expect(await inWorking(agent, puppy)).toBeUndefined()
    const raw = await agent.raw(puppy)
    expect(raw.content).toBe("I adopted a golden retriever puppy named Biscuit last week.")
    expect(raw.tags).toEqual(["pets"])
  })

  it("a paraphrased query finds the demoted entry in long-term, and explains its score", async () => {
    const { results } = await agent.query("Which dog did I adopt recently?", { explain: true, limit: 5 })
    const hit = results.find((r) => r.entryId === puppy)
    expect(hit?.tier).toBe("long-term")
    expect(results[0]?.entryId).toBe(puppy)
    const e = hit!.explain!
    expect(e.similarity).toBeGreaterThan(0)
    expect(hit!.relevance).toBeCloseTo(
      e.weights.alpha * e.similarity + e.weights.beta * e.recency + e.weights.gamma * e.frequency,
      10,
    )
  })

  it("comes back as a cue for a focused step; referenced, it is native with fresh fade tracking", async () => {
    const { stepId } = await agent.beginStep({ focus: { query: "Which dog did I adopt recently?" } })
    const built = await agent.buildContext({ stepId })
    const item = built.items.find((i) => i.entryId === puppy)
    expect(item).toMatchObject({ cue: true, form: "raw" })
    expect(built.text).toContain("golden retriever puppy named Biscuit")
    expect(built.tokens).toBeLessThanOrEqual(built.budget)
    expect(countTokens(built.text, "o200k_base")).toBe(built.tokens)
    const cue = (await cuesLogged("recaller")).find((e) => e.entryId === puppy && e.stepId === stepId)
    expect(cue?.trigger).toBe("similarity")

    const before = await agent.view()
    await agent.reference(stepId, [puppy])
    await expect.poll(async () => (await inWorking(agent, puppy))?.transient === false, { timeout: 15_000 }).toBe(true)
    const native = (await inWorking(agent, puppy))!
    expect(native.content).toBe("I adopted a golden retriever puppy named Biscuit last week.")
    // Fresh fade tracking: it counts as the newest entry, with no citations carried over.
    expect(native.ordinal).toBeGreaterThanOrEqual(before.entries.reduce((m, e) => Math.max(m, e.ordinal), 0))
    expect(native.referenceCount).toBe(0)
    await agent.endStep(stepId)
    expect((await eventsOf("recaller", "CuePromoted")).some((e) => e.entryId === puppy && e.stepId === stepId)).toBe(
      true,
    )
  })

  it("unreferenced, a cue is dropped at step end and the long-term record is unchanged", async () => {
    const recordBefore = (await listRecords({ agentId: "recaller" })).find((r) => r.entryId === garden)
    const { stepId } = await agent.beginStep({ focus: { query: "how is the vegetable garden doing?" } })
    const built = await agent.buildContext({ stepId })
    expect(built.items.find((i) => i.entryId === garden)?.cue).toBe(true)
    await agent.endStep(stepId)
    await expect
      .poll(
        async () =>
          (await eventsOf("recaller", "CuesDropped")).some((e) => e.entryIds.includes(garden) && e.stepId === stepId),
        { timeout: 15_000 },
      )
      .toBe(true)
    const view = await agent.view()
    expect(view.entries.find((e) => e.id === garden)).toBeUndefined()
    const recordAfter = (await listRecords({ agentId: "recaller" })).find((r) => r.entryId === garden)
    expect(recordAfter).toEqual(recordBefore)
  })
})

describe("reload triggers, each on its own", () => {
  it("explicit reference by id brings a long-term entry back as native", async () => {
    const { agent, ids } = await agentWithHistory("by-id", [
      { content: "The spare key is under the blue flowerpot by the door." },
    ])
    const { stepId } = await agent.beginStep()
    await agent.reference(stepId, [ids[0]!])
    await expect
      .poll(async () => (await inWorking(agent, ids[0]!))?.content, { timeout: 15_000 })
      .toBe("The spare key is under the blue flowerpot by the door.")
    const cue = (await cuesLogged("by-id")).find((e) => e.entryId === ids[0])
    expect(cue?.trigger).toBe("explicit-reference")
    await agent.endStep(stepId)
  })

  it("explicit reference by quoting the content", async () => {
    const { agent, ids } = await agentWithHistory("by-quote", [
      { content: "Grandma's lasagne recipe needs three layers of bechamel sauce." },
    ])
    const { stepId } = await agent.beginStep()
    const reply = await agent.reference(stepId, [], ["three layers of bechamel"])
    expect(reply.entryIds).toEqual([ids[0]])
    await expect.poll(async () => (await inWorking(agent, ids[0]!)) !== undefined, { timeout: 15_000 }).toBe(true)
    await agent.endStep(stepId)
  })

  it("similarity above the threshold surfaces a cue without any reference", async () => {
    const { agent, ids } = await agentWithHistory("by-similarity", [
      { content: "The dentist appointment moved to Thursday at nine." },
    ])
    const { stepId } = await agent.beginStep({ focus: { query: "when is my dentist appointment?" } })
    const built = await agent.buildContext({ stepId })
    expect(built.items.some((i) => i.entryId === ids[0] && i.cue)).toBe(true)
    await agent.endStep(stepId)
    expect(await inWorking(agent, ids[0]!)).toBeUndefined()
  })

  it("a task transition during a step recalls for the new task", async () => {
    const { agent, ids } = await agentWithHistory("by-transition", [
      { content: "The invoice for the Berlin conference has not been paid yet." },
    ])
    const { stepId } = await agent.beginStep()
    await agent.setFocus({ focus: { task: "pay the Berlin conference invoice" } })
    await expect
      .poll(
        async () =>
          (await cuesLogged("by-transition")).find((e) => e.entryId === ids[0] && e.stepId === stepId)?.trigger,
        { timeout: 15_000 },
      )
      .toBe("task-transition")
    const built = await agent.buildContext({ stepId })
    expect(built.items.some((i) => i.entryId === ids[0] && i.cue)).toBe(true)
    await agent.endStep(stepId)
  })

  it("each task transition of a step records its own similarities, so the builder ranks by the latest task", async () => {
    const { agent, ids } = await agentWithHistory("by-transitions", [
      { content: "The invoice for the Berlin conference has not been paid yet." },
      { content: "The hotel in Lisbon still needs a booking for the June trip." },
    ])
    const { stepId } = await agent.beginStep()
    const transitions = async () =>
      (await readLog(system.server.url)).flatMap(({ event }) =>
        event._tag === "StepRecalled" &&
        event.agentId === "by-transitions" &&
        event.stepId === stepId &&
        event.trigger === "task-transition"
          ? [event]
          : [],
      )
    await agent.setFocus({ focus: { task: "pay the Berlin conference invoice" } })
    await expect.poll(async () => (await transitions()).length, { timeout: 15_000 }).toBe(1)
    await agent.setFocus({ focus: { task: "book the Lisbon hotel for June" } })
    await expect.poll(async () => (await transitions()).length, { timeout: 15_000 }).toBe(2)
    const built = await agent.buildContext({ stepId })
    expect(built.items.some((i) => i.entryId === ids[1] && i.cue)).toBe(true)
    await agent.endStep(stepId)
  })
})

describe("filters, threads and warm-up", () => {
  it("filters by origin, tags, correlation id and time range return exactly the right records", async () => {
    const { agent, ids } = await agentWithHistory("filtered", [
      {
        content: "Budget meeting notes: travel costs must drop by ten percent.",
        tags: ["budget"],
        correlationId: "q3-plan",
      },
      {
        content: "I think the budget cut will hurt the travel plans.",
        origin: "INTERNAL",
        tags: ["budget", "travel"],
        correlationId: "q3-plan",
      },
      { content: "Budget for the team offsite was approved by finance.", tags: ["offsite"], correlationId: "offsite" },
    ])
    const [notes, thought, offsite] = ids as [string, string, string]
    const q = (filter: Parameters<AgentClient["query"]>[1]) =>
      agent.query("budget travel costs", { limit: 20, ...filter }).then((r) =>
        r.results
          .map((x) => x.entryId)
          .filter((id) => ids.includes(id))
          .sort(),
      )
    expect(await q({ filter: { origins: ["INTERNAL"] } })).toEqual([thought])
    expect(await q({ filter: { tags: ["travel", "offsite"] } })).toEqual([thought, offsite].sort())
    expect(await q({ filter: { correlationId: "q3-plan" } })).toEqual([notes, thought].sort())
    expect(await q({ filter: { from: T0 + 2 * MINUTE, to: T0 + 3 * MINUTE } })).toEqual([thought])
  })

  it("a correlation id fetches one thread across the agents of a tenant and tiers, in time order", async () => {
    const a = system.client.agent("thread-a")
    const b = system.client.agent("thread-b")
    await a.register({ role: "main" })
    await b.register({ role: "main" })
    await a.record({
      origin: "USER",
      content: "Kick-off for the migration project.",
      correlationId: "migration",
      timestamp: T0 + 1,
    })
    await b.record({
      origin: "ADVISOR",
      content: "The team sounds anxious about the migration.",
      correlationId: "migration",
      timestamp: T0 + 2,
    })
    await a.record({
      origin: "INTERNAL",
      content: "Plan the database cut-over for Saturday.",
      correlationId: "migration",
      timestamp: T0 + 3,
    })
    await a.record({ origin: "USER", content: "Unrelated lunch order.", correlationId: "lunch", timestamp: T0 + 4 })
    b.lastSeq = Math.max(a.lastSeq, b.lastSeq)
    const { entries } = await b.thread("migration")
    expect(entries.map((e) => [e.agentId, e.text])).toEqual([
      ["thread-a", "Kick-off for the migration project."],
      ["thread-b", "The team sounds anxious about the migration."],
      ["thread-a", "Plan the database cut-over for Saturday."],
    ])
  })

  it("a thread's long-term records are those of the caller and its tenant, never another agent's", async () => {
    // lt-member (tenant migration-team) and lt-outsider (no tenant) both have demoted entries of one correlation id.
    const {
      agent: outsider,
      ids: [secret],
    } = await agentWithHistory("lt-outsider", [
      { content: "Outsider's private note on the vendor audit.", correlationId: "vendor-audit" },
    ])
    const {
      agent: member,
      ids: [mine],
    } = await agentWithHistory("lt-member", [
      { content: "Vendor audit kick-off notes.", correlationId: "vendor-audit" },
    ])
    const mate = system.client.agent("thread-b")
    member.lastSeq = outsider.lastSeq = mate.lastSeq = Math.max(member.lastSeq, outsider.lastSeq)
    for (const asMember of [member, mate]) {
      const entries = (await asMember.thread("vendor-audit")).entries
      expect(entries.map((e) => [e.agentId, e.entryId, e.tier])).toEqual([["lt-member", mine, "long-term"]])
    }
    const asOutsider = (await outsider.thread("vendor-audit")).entries
    expect(asOutsider.map((e) => [e.agentId, e.entryId, e.tier])).toEqual([["lt-outsider", secret, "long-term"]])
  })

  it("warm-up brings the most recently demoted records back as native working entries", async () => {
    const { agent } = await agentWithHistory("restarting", [
      { content: "First memory." },
      { content: "Second memory." },
    ])
    // The most recent demotions are the last ones fading makes: let it finish, and read from the log's end.
    await fadeSettled(system, "restarting")
    agent.lastSeq = await lastSeq(system.server.url)
    const order = await demoted("restarting")
    const { entryIds } = await agent.warmUp(3)
    expect(entryIds).toHaveLength(3)
    expect(new Set(entryIds)).toEqual(new Set(order.slice(-3)))
    const view = await agent.view()
    for (const id of entryIds) expect(view.entries.find((e) => e.id === id && !e.transient)).toBeDefined()
  })
})

describe("the long-term projection", () => {
  it("rebuilt from the log equals the live store, and applying the log twice changes nothing", async () => {
    await agentWithHistory("rebuilt", [{ content: "Something worth keeping for later." }])
    const live = await listRecords({})
    expect(live.length).toBeGreaterThan(0)
    // The long-term projection alone, over every partition, on a store of its own.
    const rebuild = async () => {
      const runtime = await startLongTermAlone(system.server.url)
      try {
        const fresh = await runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
        return await runtime.runPromise(fresh.list({}))
      } finally {
        await runtime.dispose()
      }
    }
    // Fading goes on after the memorable entry demotes: compare a rebuild and the live store that both hold the
    // log to one position, the log's end before the rebuild and still its end after both were read.
    const liveLongTerm = await system.services.runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>)
    const atOnePosition = await eventually("a rebuild and the live store at one log position", async () => {
      const seq = await lastSeq(system.server.url)
      const rebuilt = await rebuild()
      await system.services.runtime.runPromise(liveLongTerm.waitFor(seq))
      const stored = await listRecords({})
      return (await lastSeq(system.server.url)) === seq ? { rebuilt, stored } : undefined
    })
    expect(atOnePosition.rebuilt).toEqual(atOnePosition.stored)
    expect(await rebuild()).toEqual(atOnePosition.rebuilt)
  })
})
