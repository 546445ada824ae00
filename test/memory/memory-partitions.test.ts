/**
 * The memory service (long-term projection and retrieval) divides the
 * partitions among its replicas like every partitioned service: each
 * replica follows only its partitions' events, holds only their agents'
 * records and indexes, and answers only for them; a thread across
 * partitions gathers each part from the replica that owns it; when a
 * replica stops, the survivor takes its partitions and answers for their
 * agents from the log. Every service runs as its own user under the
 * permissions infra/auth.ts generates, and each agent with its own
 * credentials: an agent cannot ask a replica for a thread's part itself.
 */
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { partitionOf } from "../../contracts/partitions.ts"
import { threadPartSubject } from "../../contracts/subjects.ts"
import { type NatsAuth, natsAuth } from "../../infra/auth.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { type AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { FadeWorkerSettings } from "../../services/fade/fade-worker.ts"
import { LongTerm, type LongTermShape } from "../../services/memory/longterm/longterm.ts"
import { LongTermStore, type LongTermStoreShape } from "../../services/memory/longterm/store.ts"
import { Retrieval, type RetrievalShape } from "../../services/memory/retrieval/retrieval.ts"
import { AgentSharing } from "../../services/platform/access/sharing.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import {
  defaultModels,
  fadeService,
  gatewayService,
  memoryService,
  substrateService,
  workingService,
} from "../../services/system.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { FILLER_TURNS } from "../support/fillers.ts"
import { lastSeq } from "../support/log.ts"
import { type RunningServices, startServices } from "../support/system.ts"

const T0 = Date.UTC(2024, 5, 3, 8)
const THREAD = "crew-handover"

let server!: NatsServerProcess
let auth!: NatsAuth
let services!: RunningServices
let second: RunningServices | null = null
const clients = new Map<string, WorkingMemoryClient>()
/** The agent, connected with its own credentials. */
const agentClient = async (agentId: string): Promise<AgentClient> => {
  let client = clients.get(agentId)
  if (client === undefined) {
    client = await WorkingMemoryClient.connect({ servers: server.url, ...auth.agent(agentId), timeoutMs: 5_000 })
    clients.set(agentId, client)
  }
  return client.agent(agentId)
}
const streamLast = () => lastSeq(server.url, auth.admin!)
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
const storeOf = (running: RunningServices) =>
  running.runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
const recordsOf = async (running: RunningServices) => Effect.runPromise((await storeOf(running)).list({}))

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
  await eventually(`${agent.agentId}'s entry in long-term`, async () => {
    agent.lastSeq = await streamLast()
    const { results } = await agent.query(text, { limit: 3 })
    return results.some((r) => r.entryId === entryId && r.tier === "long-term")
  })
  return entryId
}

const facts: Record<string, { entryId: string; text: string }> = {}

beforeAll(async () => {
  auth = natsAuth({ agents: [...crew, "mp-outsider"] })
  server = await startNatsServer({ config: auth.config })
  const settings = (name: string, service = name) =>
    NatsSettings.make({ servers: [server.url], name: `wm-${name}`, ...auth.service(service) })
  const models = defaultModels()
  services = await startServices(
    Layer.mergeAll(
      Layer.fresh(workingService(settings("working"))),
      Layer.fresh(gatewayService(settings("gateway"))),
      Layer.fresh(fadeService(settings("fade"), FadeWorkerSettings.fromEnv(), models)),
      Layer.fresh(substrateService(settings("substrate"))),
      Layer.fresh(memoryService(settings("memory"), { models, sharing: sharing() })),
    ),
  )
  second = await startServices(memoryService(settings("memory-second", "memory"), { models, sharing: sharing() }))
}, 60_000)
afterAll(async () => {
  for (const client of clients.values()) await client.close()
  await second?.stop()
  await services?.stop()
  await server?.stop()
})

it("two memory replicas divide the partitions: each follows, holds and answers for its own", async () => {
  const first = await retrievalOf(services)
  const other = await retrievalOf(second!)
  await eventually(
    "the partitions divided between the two replicas",
    async () =>
      first.answeringPartitions().length > 0 &&
      other.answeringPartitions().length > 0 &&
      first.answeringPartitions().length + other.answeringPartitions().length === 16,
  )
  expect(first.answeringPartitions().filter((p) => other.answeringPartitions().includes(p))).toEqual([])
  for (const id of crew) {
    if (first.answeringPartitions().includes(partitionOf(id)) && ofFirst.length < 2) ofFirst.push(id)
    else if (other.answeringPartitions().includes(partitionOf(id)) && ofSecond.length < 2) ofSecond.push(id)
  }
  for (const id of [...ofFirst, ...ofSecond]) {
    const text = `${id} keeps the spare key of the boathouse under the blue flowerpot`
    facts[id] = { entryId: await withDemotedEntry(await agentClient(id), text), text }
  }
  // Each replica's long-term projection runs for its partitions only, and an embedded store holds only their
  // agents; a shared store (Qdrant) holds every replica's, each written by the replica owning the partition.
  const firstLongTerm = [...(await longTermOf(services)).partitions().keys()].sort((a, b) => a - b)
  expect(firstLongTerm).toEqual([...first.answeringPartitions()].sort((a, b) => a - b))
  const firstAgents = new Set((await recordsOf(services)).map((r) => r.agentId))
  const secondAgents = new Set((await recordsOf(second!)).map((r) => r.agentId))
  if ((await storeOf(services)).shared === true) {
    await eventually("every replica's records in the shared store", async () => {
      const all = new Set((await recordsOf(services)).map((r) => r.agentId))
      return [...ofFirst, ...ofSecond].every((id) => all.has(id))
    })
  } else {
    expect(ofFirst.every((id) => firstAgents.has(id) && !secondAgents.has(id))).toBe(true)
    expect(ofSecond.every((id) => secondAgents.has(id) && !firstAgents.has(id))).toBe(true)
  }
  // Each agent's view is held by the replica that owns it, and no other.
  for (const id of ofFirst) expect([first.owns(id), other.owns(id)]).toEqual([true, false])
  for (const id of ofSecond) expect([first.owns(id), other.owns(id)]).toEqual([false, true])
}, 120_000)

it("a thread spans the tenant's agents in every partition, each part from the replica that owns it", async () => {
  for (const id of [...ofFirst, ...ofSecond]) {
    const agent = await agentClient(id)
    agent.lastSeq = await streamLast()
    const { entries } = await agent.thread(THREAD)
    expect(entries.map((e) => `${e.agentId}/${e.entryId}/${e.tier}`).sort()).toEqual(
      [...ofFirst, ...ofSecond].map((a) => `${a}/${facts[a]!.entryId}/long-term`).sort(),
    )
  }
  // An agent outside the tenant sees only its own thread, wherever the crew's parts are.
  const outsider = await agentClient("mp-outsider")
  await outsider.register({ role: "custom", budget: 200 })
  expect((await outsider.thread(THREAD)).entries).toEqual([])
  // Nor can it ask the replicas for a part of the crew's thread itself: the broker refuses the request.
  const nc = clients.get("mp-outsider")!.nc
  const asked = nc.request(
    threadPartSubject(partitionOf(ofFirst[0]!)),
    JSON.stringify({ agents: [ofFirst[0]], correlationId: THREAD }),
    { timeout: 1_500 },
  )
  await expect(asked).rejects.toThrow(/permission|timeout|no responders/i)
}, 60_000)

it("a replica that stops hands its partitions over: the survivor answers for its agents, records included", async () => {
  await second!.stop()
  second = null
  const first = await retrievalOf(services)
  await eventually("the survivor to answer for every partition", async () => first.answeringPartitions().length === 16)
  for (const id of ofSecond) {
    const agent = await agentClient(id)
    agent.lastSeq = await streamLast()
    const { results } = await agent.query(facts[id]!.text, { limit: 3 })
    expect(results.some((r) => r.entryId === facts[id]!.entryId && r.tier === "long-term")).toBe(true)
  }
  const agents = new Set((await recordsOf(services)).map((r) => r.agentId))
  expect([...ofFirst, ...ofSecond].every((id) => agents.has(id))).toBe(true)
  expect((await (await agentClient(ofFirst[0]!)).thread(THREAD)).entries.map((e) => e.agentId).sort()).toEqual(
    [...ofFirst, ...ofSecond].sort(),
  )
}, 60_000)
