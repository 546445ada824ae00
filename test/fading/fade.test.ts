/**
 * The fade service against a real nats-server: rung decisions recorded as
 * events with their scores, pressure relief, replay without recomputation,
 * workers dividing the agents, and remote models that fail.
 */
import { createServer, type Server } from "node:http"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { type AgentView, evolve, viewSnapshot } from "../../domain/agent-view.ts"
import { DEFAULT_FADE_CONFIG } from "../../domain/fade-score.ts"
import { OFFLINE_SUMMARY_MODEL } from "../../domain/offline-summary.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { FadeWorker, FadeWorkerSettings, type FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import { offlineSummarizer, Summarizer } from "../../services/fade/summarizer.ts"
import { EmbeddingProvider, offlineProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { hashedEmbedder } from "../../services/platform/embedding/offline-embedder.ts"
import { fadeService, gatewayService, workingService } from "../../services/system.ts"
import { Working, type WorkingShape } from "../../services/working/working.ts"
import { eventually } from "../support/eventually.ts"
import { readLog, type StoredEvent } from "../support/log.ts"
import { settingsFor } from "../support/system.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 2, 1, 9)

const counters = { summaries: 0, embeddings: 0 }
const countingModels = Layer.merge(
  Layer.succeed(Summarizer, {
    summarize: (text, options) =>
      Effect.suspend(() => {
        counters.summaries += 1
        return offlineSummarizer.summarize(text, options)
      }),
  }),
  Layer.sync(EmbeddingProvider, () => {
    const inner = offlineProvider(hashedEmbedder())
    return {
      ...inner,
      embed: (text: string) =>
        Effect.suspend(() => {
          counters.embeddings += 1
          return inner.embed(text)
        }),
    }
  }),
)

interface Running {
  readonly runtime: ManagedRuntime.ManagedRuntime<unknown, unknown>
  readonly fade: () => Promise<FadeWorkerShape>
}

const start = async (
  url: string,
  options: { models?: Layer.Layer<Summarizer | EmbeddingProvider, unknown>; withCore?: boolean } = {},
): Promise<Running> => {
  const s = settingsFor(url)
  const fade = fadeService(
    s("wm-fade"),
    FadeWorkerSettings.make({ intervalMs: 3_600_000 }),
    options.models ?? countingModels,
  )
  const layer =
    options.withCore === false
      ? fade
      : Layer.mergeAll(workingService(s("wm-working")), gatewayService(s("wm-gateway")), fade)
  const runtime = ManagedRuntime.make(layer) as unknown as ManagedRuntime.ManagedRuntime<unknown, unknown>
  await runtime.runPromise(Effect.void)
  return { runtime, fade: () => runtime.runPromise(FadeWorker as unknown as Effect.Effect<FadeWorkerShape>) }
}

/** Evaluates until nothing moves any more, once the worker has seen the client's writes up to `afterSeq`. */
const settle = async (running: Running, agentId: string, afterSeq = 0) => {
  const fade = await running.fade()
  await eventually(
    `the fade worker to see sequence ${afterSeq}`,
    () => (fade.view(agentId)?.lastSeq ?? 0) >= afterSeq,
    5_000,
    25,
  )
  for (let i = 0; i < 50; i++) {
    const run = await running.runtime.runPromise(fade.evaluate(agentId))
    if (run.applied === 0 && run.conflicts === 0) return
  }
  throw new Error(`${agentId} did not settle`)
}

const fadeEvents = (log: StoredEvent[], agentId: string, entryId?: string) =>
  log
    .map((s) => s.event)
    .filter(
      (e): e is EventOf<"RungChanged"> | EventOf<"EntryDemoted"> =>
        (e._tag === "RungChanged" || e._tag === "EntryDemoted") &&
        e.agentId === agentId &&
        (entryId === undefined || e.entryId === entryId),
    )

const rebuild = (log: StoredEvent[], agentId: string, uptoSeq = Infinity): AgentView | undefined => {
  let view: AgentView | undefined
  for (const { seq, event } of log) if (event.agentId === agentId && seq <= uptoSeq) view = evolve(view, event, { seq })
  return view
}

let server: NatsServerProcess
let client: WorkingMemoryClient
let running: Running
beforeAll(async () => {
  server = await startNatsServer()
  running = await start(server.url)
  client = await WorkingMemoryClient.connect({ servers: server.url })
})
afterAll(async () => {
  await client?.close()
  await running?.runtime.dispose()
  await server?.stop()
})

describe("fading", () => {
  it("moves an entry 0 → 1 → 2 → long-term as its score crosses each threshold, each event with the score's parts", async () => {
    const agent = client.agent("ageing")
    await agent.register({ role: "main" })
    const { entryId } = await agent.record({
      origin: "USER",
      content: "We agreed the launch is on the 3rd of March. Marketing owns the announcement.",
      timestamp: T0,
    })
    for (let i = 1; i <= 120; i++)
      await agent.record({ origin: "USER", content: `Later remark number ${i}.`, timestamp: T0 + i * 5 * MINUTE })
    await settle(running, "ageing", agent.lastSeq)
    const log = await readLog(server.url)
    const events = fadeEvents(log, "ageing", entryId)
    expect(events.map((e) => (e._tag === "RungChanged" ? e.to : 3))).toEqual([1, 2, 3])
    const [toKeyPoints, toSummary, out] = events as [(typeof events)[0], (typeof events)[0], (typeof events)[0]]
    expect(toKeyPoints._tag === "RungChanged" && toKeyPoints.text).toBe(
      "We agreed the launch is on the 3rd of March. …",
    )
    expect(toSummary._tag === "RungChanged" && toSummary.producer.model).toBe(OFFLINE_SUMMARY_MODEL)
    expect(out._tag === "EntryDemoted" && out.embedding.dims).toBe(1024)
    const thresholds = DEFAULT_FADE_CONFIG.thresholds
    events.forEach((e, i) => {
      const { parts, total, threshold } = e.score
      expect(threshold).toBe([thresholds.keyPoints, thresholds.summary, thresholds.demote][i])
      expect(total).toBeGreaterThanOrEqual(threshold)
      expect(parts.age + parts.frequency + parts.emotion + parts.focus + parts.pressure).toBeCloseTo(total, 10)
      expect(parts.age).toBeGreaterThan(0)
    })
    // The live view equals the one rebuilt from the log, up to what it has applied.
    const working = await running.runtime.runPromise(Working as unknown as Effect.Effect<WorkingShape>)
    const live = working.view("ageing")!
    expect(viewSnapshot(rebuild(log, "ageing", live.lastSeq)!)).toEqual(viewSnapshot(live))
  })

  it("brings usage back under τ under budget pressure without losing any raw text", async () => {
    const agent = client.agent("pressed")
    await agent.register({ role: "custom", budget: 600 })
    const contents: string[] = []
    for (let i = 0; i < 60; i++) {
      const content = `Note ${i}: the supplier confirmed batch ${i} ships Tuesday. Quality checks passed on every pallet.`
      contents.push(content)
      await agent.record({ origin: "SYSTEM", content, timestamp: T0 + i * 1_000 })
    }
    await settle(running, "pressed", agent.lastSeq)
    const view = await agent.view()
    expect(view.usage).toBeLessThanOrEqual(0.8 * 600)
    const log = await readLog(server.url)
    const raw = log
      .map((s) => s.event)
      .filter((e): e is EventOf<"EntryRecorded"> => e._tag === "EntryRecorded" && e.agentId === "pressed")
    expect(raw.map((e) => e.content)).toEqual(contents)
    for (const e of view.entries) if (e.rung < 2) expect(contents).toContain(e.content)
    expect(fadeEvents(log, "pressed").some((e) => e.score.trigger === "pressure")).toBe(true)
  })

  it("contracts working again after hyperfocus ends", async () => {
    const agent = client.agent("diver")
    await agent.register({ role: "custom", budget: 200 })
    await agent.enterHyperfocus(1_000)
    for (let i = 0; i < 25; i++)
      await agent.record({
        origin: "INTERNAL",
        content: `Layer ${i} of the recursive analysis holds.`,
        timestamp: T0 + i * 1_000,
      })
    await settle(running, "diver", agent.lastSeq)
    const deep = await agent.view()
    expect(deep.usage).toBeGreaterThan(200)
    await agent.exitHyperfocus()
    await settle(running, "diver", agent.lastSeq)
    const after = await agent.view()
    expect(after.usage).toBeLessThanOrEqual(0.8 * 200)
  })

  it("replaying the log restores the same rungs without calling a summariser or an embedder", async () => {
    const agent = client.agent("replayed")
    await agent.register({ role: "custom", budget: 300 })
    for (let i = 0; i < 40; i++)
      await agent.record({
        origin: "USER",
        content: `Sentence one of ${i}. Sentence two of ${i}.`,
        timestamp: T0 + i * MINUTE,
      })
    await settle(running, "replayed", agent.lastSeq)
    const before = viewSnapshot((await running.fade()).view("replayed")!)
    expect(counters.summaries).toBeGreaterThan(0)
    expect(counters.embeddings).toBeGreaterThan(0)

    // Stopped and started again: the new worker takes every partition and replays them.
    await running.runtime.dispose()
    counters.summaries = 0
    counters.embeddings = 0
    running = await start(server.url)
    await settle(running, "replayed")
    const fade = await running.fade()
    expect(viewSnapshot(fade.view("replayed")!)).toEqual(before)
    expect(counters).toEqual({ summaries: 0, embeddings: 0 })
  })
})

describe("two fade workers", () => {
  let other: NatsServerProcess
  let first: Running
  let second: Running
  let racingClient: WorkingMemoryClient
  beforeAll(async () => {
    other = await startNatsServer()
    first = await start(other.url)
    second = await start(other.url, { withCore: false })
    racingClient = await WorkingMemoryClient.connect({ servers: other.url })
  })
  afterAll(async () => {
    await racingClient?.close()
    await second?.runtime.dispose()
    await first?.runtime.dispose()
    await other?.stop()
  })

  /** The worker whose lease holds the agent's partition, once one does. */
  const ownerOf = (agentId: string): Promise<Running> =>
    eventually(
      `a fade worker to hold ${agentId}`,
      async () => {
        for (const worker of [first, second]) if ((await worker.fade()).owns(agentId)) return worker
        return undefined
      },
      10_000,
      25,
    )

  /**
   * Settles the agent on the worker holding it. The second worker takes its share while the first holds
   * every partition, so the owner found can hand the agent over before its view reaches `afterSeq`; then the
   * new owner settles it. A worker that still holds the agent and does not get there fails the test.
   */
  const settleOnOwner = async (agentId: string, afterSeq: number): Promise<Running> => {
    for (let handovers = 0; ; handovers++) {
      const owner = await ownerOf(agentId)
      try {
        await settle(owner, agentId, afterSeq)
        return owner
      } catch (error) {
        if ((await owner.fade()).owns(agentId) || handovers >= 3) throw error
      }
    }
  }

  it("divide the agents by partition, and never move the same entry twice", async () => {
    // Agents in different partitions, written while the workers are still dividing them.
    const agents = Array.from({ length: 6 }, (_, i) => racingClient.agent(`contested-${i}`))
    for (const agent of agents) {
      await agent.register({ role: "custom", budget: 400 })
      for (let i = 0; i < 40; i++)
        await agent.record({
          origin: "USER",
          content: `Item ${i} is ready. It waits for review.`,
          timestamp: T0 + i * MINUTE,
        })
    }
    const owners = new Set<Running>()
    for (const agent of agents) owners.add(await settleOnOwner(agent.agentId, agent.lastSeq))
    // Each worker holds a share of the partitions (the second may have started after the first had
    // settled and taken them all: it gets its share at the first's next lease round), and no agent is
    // held by both.
    const [a, b] = [await first.fade(), await second.fade()]
    await eventually("both workers hold partitions", () =>
      a.heldPartitions().length > 0 && b.heldPartitions().length > 0 ? true : undefined,
    )
    for (const agent of agents) expect(a.owns(agent.agentId) && b.owns(agent.agentId)).toBe(false)
    const log = await readLog(other.url)
    const byEntry = new Map<string, number[]>()
    for (const agent of agents)
      for (const e of fadeEvents(log, agent.agentId)) {
        const to = e._tag === "RungChanged" ? e.to : 3
        const key = `${agent.agentId}/${e.entryId}`
        byEntry.set(key, [...(byEntry.get(key) ?? []), to])
      }
    expect(byEntry.size).toBeGreaterThan(30)
    for (const [, rungs] of byEntry) {
      // Strictly increasing: no rung change applied twice, no demotion twice.
      for (let i = 1; i < rungs.length; i++) expect(rungs[i]).toBeGreaterThan(rungs[i - 1]!)
    }
  })
})

describe("remote models that fail", () => {
  let http: Server
  let requests = { chat: 0, embeddings: 0 }
  // The chat model answers (a failure) only once released: what the agent does meanwhile is then ordered before it.
  let releaseChat: () => void = () => undefined
  const chatReleased = new Promise<void>((resolve) => {
    releaseChat = resolve
  })
  let other: NatsServerProcess
  let flaky: Running
  let flakyClient: WorkingMemoryClient
  beforeAll(async () => {
    http = createServer((req, res) => {
      if (req.url?.endsWith("/chat/completions")) {
        requests.chat++
        void chatReleased.then(() => res.writeHead(500).end("model overloaded"))
      } else {
        requests.embeddings++
        // Never answers in time.
        setTimeout(() => res.writeHead(200).end("{}"), 2_000)
      }
    })
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", () => r()))
    const port = (http.address() as { port: number }).port
    const models = Layer.merge(
      Summarizer.remote({
        baseUrl: `http://127.0.0.1:${port}/v1`,
        model: "tiny-chat",
        timeout: "60 seconds",
        retries: 2,
      }),
      EmbeddingProvider.withRemote(hashedEmbedder(), {
        baseUrl: `http://127.0.0.1:${port}/v1`,
        model: "tiny-embed",
        timeout: "300 millis",
        retries: 1,
      }),
    )
    other = await startNatsServer()
    flaky = await start(other.url, { models })
    flakyClient = await WorkingMemoryClient.connect({ servers: other.url })
  })
  afterAll(async () => {
    releaseChat()
    await flakyClient?.close()
    await flaky?.runtime.dispose()
    await other?.stop()
    await new Promise((r) => http.close(r))
  })
  afterEach(() => {
    requests = { chat: 0, embeddings: 0 }
  })

  it("fall back to the offline models after their retries, say so in the event, and never stall the agent", async () => {
    const agent = flakyClient.agent("patient")
    await agent.register({ role: "custom", budget: 200 })
    for (let i = 0; i < 30; i++)
      await agent.record({
        origin: "USER",
        content: `Fact ${i}: the meeting moved to room ${i}. Bring the slides.`,
        timestamp: T0 + i * MINUTE,
      })
    // While fading waits on the failing endpoints, the agent keeps building its context.
    const builds: number[] = []
    for (let i = 0; i < 5; i++) builds.push((await agent.buildContext()).seq)
    await eventually("fading to ask the chat model for a summary", () => requests.chat > 0)
    releaseChat()
    await settle(flaky, "patient", agent.lastSeq)
    const log = await readLog(other.url)
    const events = fadeEvents(log, "patient")
    const summaries = events.filter((e): e is EventOf<"RungChanged"> => e._tag === "RungChanged" && e.to === 2)
    const demotions = events.filter((e): e is EventOf<"EntryDemoted"> => e._tag === "EntryDemoted")
    expect(summaries.length).toBeGreaterThan(0)
    expect(demotions.length).toBeGreaterThan(0)
    for (const e of summaries) {
      expect(e.producer).toMatchObject({ kind: "offline", model: OFFLINE_SUMMARY_MODEL, attempts: 3 })
      expect(e.producer.fallbackReason).toMatch(/remote summariser failed after 3 attempts/)
    }
    for (const e of demotions) {
      expect(e.embedding.producer).toMatchObject({ kind: "offline", attempts: 2 })
      expect(e.embedding.producer.fallbackReason).toMatch(/remote embedder failed/)
    }
    expect(requests.chat).toBe(3 * summaries.length)
    const firstFallback = Math.min(...log.filter((s) => summaries.includes(s.event as never)).map((s) => s.seq))
    expect(Math.min(...builds)).toBeLessThan(firstFallback)
  })
})
