/**
 * Fading waits for its turn behind requests (services/platform/scheduling/requests-first.ts): while a request
 * keeps the process's event loop busy, the fade worker decides nothing (the lane here counts the loop busy
 * whenever a request is in flight, and then holds turns back an hour); once the request ends it works off what
 * waited, and nothing is lost.
 */
import { Deferred, Effect, Fiber, Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { FadeWorker, FadeWorkerSettings, type FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import { offlineSummarizer, Summarizer } from "../../services/fade/summarizer.ts"
import { EmbeddingProvider, offlineProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { hashedEmbedder } from "../../services/platform/embedding/offline-embedder.ts"
import { makeRequestsFirst, RequestsFirst } from "../../services/platform/scheduling/requests-first.ts"
import { fadeService, gatewayService, workingService } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { readLog } from "../support/log.ts"
import { type RunningServices, settingsFor, startServices } from "../support/system.ts"

// The loop counts as busy whenever a request is in flight, and a turn is then held back an hour.
const lane = makeRequestsFirst({ busyShare: 0.25, congestedMs: 0, minHoldMs: 3_600_000 })
let server: NatsServerProcess
let client: WorkingMemoryClient
let services: RunningServices

beforeAll(async () => {
  server = await startNatsServer()
  const s = settingsFor(server.url)
  const models = Layer.merge(
    Layer.succeed(Summarizer, offlineSummarizer),
    Layer.sync(EmbeddingProvider, () => offlineProvider(hashedEmbedder())),
  )
  services = await startServices(
    Layer.mergeAll(
      workingService(s("wm-working")),
      gatewayService(s("wm-gateway")),
      fadeService(s("wm-fade"), FadeWorkerSettings.make({ intervalMs: 3_600_000 }), models),
    ).pipe(Layer.provide(Layer.succeed(RequestsFirst, lane))),
  )
  client = await WorkingMemoryClient.connect({ servers: server.url })
})
afterAll(async () => {
  await client?.close()
  await services?.stop()
  await server?.stop()
})

const fadeEventsOf = async (agentId: string) =>
  (await readLog(server.url))
    .map((s) => s.event)
    .filter((e) => (e._tag === "RungChanged" || e._tag === "EntryDemoted") && e.agentId === agentId)

it("decides nothing while a request is in flight, then works off what waited", async () => {
  const fade = await services.runtime.runPromise(FadeWorker as unknown as Effect.Effect<FadeWorkerShape>)
  const held = await services.runtime.runPromise(Deferred.make<void>())
  const request = await services.runtime.runPromise(Effect.forkDetach(lane.serve(Deferred.await(held))))
  const agent = client.agent("pressed-behind-a-request")
  await agent.register({ role: "custom", budget: 600 })
  for (let i = 0; i < 40; i++)
    await agent.record({
      origin: "SYSTEM",
      content: `Note ${i}: the supplier confirmed batch ${i} ships Tuesday. Quality checks passed on every pallet.`,
    })
  // The worker has seen every record and waits for a turn.
  await eventually(
    "the fade worker to wait for a turn",
    () => (fade.view(agent.agentId)?.lastSeq ?? 0) >= agent.lastSeq && lane.stats().waiting > 0,
    30_000,
    25,
  )
  expect(await fadeEventsOf(agent.agentId)).toEqual([])

  await services.runtime.runPromise(Deferred.succeed(held, undefined))
  await services.runtime.runPromise(Fiber.join(request))
  await eventually(
    "fading to bring usage back under τ",
    async () => (await agent.view()).usage <= 0.8 * 600,
    60_000,
    100,
  )
  expect((await fadeEventsOf(agent.agentId)).length).toBeGreaterThan(0)
  const recorded = (await readLog(server.url)).filter(
    (s) => s.event._tag === "EntryRecorded" && s.event.agentId === agent.agentId,
  )
  expect(recorded).toHaveLength(40)
})

it("counts an API request in flight until it is answered", async () => {
  const once = await WorkingMemoryClient.connect({ servers: server.url, attempts: 1 })
  const agent = once.agent("reading-ahead-of-the-log")
  await agent.register({ role: "main" })
  // A read that waits for a sequence the log has not reached: it is answered NotCaughtUp after its wait.
  agent.lastSeq += 1_000_000
  const read = agent.view().then(
    () => "answered",
    (error: unknown) => (error instanceof Error ? error.name : String(error)),
  )
  await eventually("the read to be in flight", () => lane.stats().inFlight > 0, 30_000, 5)
  expect(await read).toBe("NotCaughtUp")
  await eventually("the read to be answered and no longer in flight", () => lane.stats().inFlight === 0, 30_000, 5)
  await once.close()
})
