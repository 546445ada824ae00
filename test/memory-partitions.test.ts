/**
 * The memory service (long-term projection and retrieval) divides the
 * partitions among its replicas like every partitioned service: each
 * replica follows only its partitions' events, holds only their agents'
 * records and indexes, and answers only for them; a thread across
 * partitions gathers each part from the replica that owns it; when a
 * replica stops, the survivor takes its partitions and answers for their
 * agents from the log.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { partitionOf } from "../contracts/partitions.ts"
import type { AgentClient } from "../sdk/client.ts"
import { LongTerm, type LongTermShape } from "../services/memory/longterm/longterm.ts"
import { LongTermStore, type LongTermStoreShape } from "../services/memory/longterm/store.ts"
import { Retrieval, type RetrievalShape } from "../services/memory/retrieval/retrieval.ts"
import { AgentSharing } from "../services/platform/access/sharing.ts"
import { memoryService } from "../services/system.ts"
import { steppingClock } from "./support/clock.ts"
import { FILLER_TURNS } from "./support/fillers.ts"
import { lastSeq } from "./support/log.ts"
import { type RunningServices, settingsFor, startServices, startTestSystem, type TestSystem } from "./support/system.ts"

const T0 = Date.UTC(2024, 5, 3, 8)
const THREAD = "crew-handover"

let system: TestSystem
let second: RunningServices | null = null
/** Agents whose partitions the first replica owns, and the second's. */
const ofFirst: string[] = []
const ofSecond: string[] = []
/** A tenant with an agent in every partition: whichever way the replicas divide them, it spans both. */
const crew: string[] = []
for (let i = 0; new Set(crew.map((id) => partitionOf(id))).size < 16; i++)
  if (!crew.some((id) => partitionOf(id) === partitionOf(`crew-${i}`))) crew.push(`crew-${i}`)
const sharing = () => AgentSharing.make([{ name: "crew", agents: crew }])

const retrievalOf = (running: RunningServices) =>
  running.runtime.runPromise(Retrieval as unknown as Effect.Effect<RetrievalShape>)
const longTermOf = (running: RunningServices) =>
  running.runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>)
const recordsOf = async (running: RunningServices) => {
  const store = await running.runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
  return Effect.runPromise(store.list({}))
}

const waitUntil = async (condition: () => Promise<boolean>, what: string, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** Records one memorable entry (on the crew's thread), then enough filler that it demotes. */
const withDemotedEntry = async (agent: AgentClient, text: string) => {
  await agent.register({ role: "custom", budget: 200 })
  const clock = steppingClock(T0, 60_000)
  const { entryId } = await agent.record({
    origin: "USER",
    content: text,
    correlationId: THREAD,
    timestamp: clock.next(),
  })
  for (let i = 0; i < 30; i++)
    await agent.record({ origin: "USER", content: FILLER_TURNS[i % FILLER_TURNS.length]!, timestamp: clock.next() })
  await waitUntil(async () => {
    agent.lastSeq = await lastSeq(system.server.url)
    const { results } = await agent.query(text, { limit: 3 })
    return results.some((r) => r.entryId === entryId && r.tier === "long-term")
  }, `${agent.agentId}'s entry in long-term`)
  return entryId
}

const facts: Record<string, { entryId: string; text: string }> = {}

beforeAll(async () => {
  system = await startTestSystem({}, { sharing: sharing() })
  second = await startServices(
    memoryService(settingsFor(system.server.url)("wm-memory-second"), { sharing: sharing() }),
  )
}, 60_000)
afterAll(async () => {
  await second?.stop()
  await system?.stop()
})

it("two memory replicas divide the partitions: each follows, holds and answers for its own", async () => {
  const first = await retrievalOf(system.services)
  const other = await retrievalOf(second!)
  await waitUntil(
    async () =>
      first.views.ready().length > 0 &&
      other.views.ready().length > 0 &&
      first.views.ready().length + other.views.ready().length === 16,
    "the partitions divided between the two replicas",
  )
  expect(first.views.ready().filter((p) => other.views.ready().includes(p))).toEqual([])
  for (const id of crew) {
    if (first.views.ready().includes(partitionOf(id)) && ofFirst.length < 2) ofFirst.push(id)
    else if (other.views.ready().includes(partitionOf(id)) && ofSecond.length < 2) ofSecond.push(id)
  }
  for (const id of [...ofFirst, ...ofSecond]) {
    const text = `${id} keeps the spare key of the boathouse under the blue flowerpot`
    facts[id] = { entryId: await withDemotedEntry(system.client.agent(id), text), text }
  }
  // Each replica's long-term projection runs for its partitions only, and its store holds only their agents.
  const firstLongTerm = [...(await longTermOf(system.services)).partitions().keys()].sort((a, b) => a - b)
  expect(firstLongTerm).toEqual([...first.views.ready()].sort((a, b) => a - b))
  const firstAgents = new Set((await recordsOf(system.services)).map((r) => r.agentId))
  const secondAgents = new Set((await recordsOf(second!)).map((r) => r.agentId))
  expect(ofFirst.every((id) => firstAgents.has(id) && !secondAgents.has(id))).toBe(true)
  expect(ofSecond.every((id) => secondAgents.has(id) && !firstAgents.has(id))).toBe(true)
  // Each agent's view is held by the replica that owns it, and no other.
  for (const id of ofFirst) expect([first.views.owns(id), other.views.owns(id)]).toEqual([true, false])
  for (const id of ofSecond) expect([first.views.owns(id), other.views.owns(id)]).toEqual([false, true])
}, 120_000)

it("a thread spans the tenant's agents in every partition, each part from the replica that owns it", async () => {
  for (const id of [...ofFirst, ...ofSecond]) {
    const agent = system.client.agent(id)
    agent.lastSeq = await lastSeq(system.server.url)
    const { entries } = await agent.thread(THREAD)
    expect(entries.map((e) => `${e.agentId}/${e.entryId}/${e.tier}`).sort()).toEqual(
      [...ofFirst, ...ofSecond].map((a) => `${a}/${facts[a]!.entryId}/long-term`).sort(),
    )
  }
  // An agent outside the tenant sees only its own thread, wherever the crew's parts are.
  const outsider = system.client.agent("mp-outsider")
  await outsider.register({ role: "custom", budget: 200 })
  expect((await outsider.thread(THREAD)).entries).toEqual([])
}, 60_000)

it("a replica that stops hands its partitions over: the survivor answers for its agents, records included", async () => {
  await second!.stop()
  second = null
  const first = await retrievalOf(system.services)
  await waitUntil(async () => first.views.ready().length === 16, "the survivor to answer for every partition")
  for (const id of ofSecond) {
    const agent = system.client.agent(id)
    agent.lastSeq = await lastSeq(system.server.url)
    const { results } = await agent.query(facts[id]!.text, { limit: 3 })
    expect(results.some((r) => r.entryId === facts[id]!.entryId && r.tier === "long-term")).toBe(true)
  }
  const agents = new Set((await recordsOf(system.services)).map((r) => r.agentId))
  expect([...ofFirst, ...ofSecond].every((id) => agents.has(id))).toBe(true)
  expect((await system.client.agent(ofFirst[0]!).thread(THREAD)).entries.map((e) => e.agentId).sort()).toEqual(
    [...ofFirst, ...ofSecond].sort(),
  )
}, 60_000)
