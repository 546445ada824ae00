/**
 * No input from one agent degrades another, and bad input fails fast and
 * typed. Against a real nats-server, with every service of the embedded
 * default in this process (where a stall anywhere stalls everything).
 */
import { ConfigProvider, Effect, HashMap, Layer, ManagedRuntime, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_CONTENT_BYTES } from "../../contracts/api.ts"
import { StorageFull } from "../../contracts/errors.ts"
import type { EventOf } from "../../contracts/events.ts"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { blockTokens } from "../../domain/render.ts"
import { type NatsServerProcess, natsServerVersion, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { FadeWorker, FadeWorkerSettings, type FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import { streamByteLimitProblem } from "../../services/platform/log/event-log.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { fadeService, gatewayService, substrateService, systemLayer, workingService } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { lastSeq, readLog } from "../support/log.ts"
import { settingsFor, startServices, startTestSystem, type TestSystem } from "../support/system.ts"

const T0 = Date.UTC(2024, 4, 8, 13)
/** nats-server 2.9 cannot hold a byte limit without dropping old events; the product refuses the limit there. */
const byteLimitsHold = streamByteLimitProblem(1, natsServerVersion()) === null
const ALPHABET = "abcdefghijklmnopqrstuvwxyz"

describe("worst-case content", () => {
  let system: TestSystem
  beforeAll(async () => {
    system = await startTestSystem()
  })
  afterAll(async () => {
    await system?.stop()
  })

  it("64 KiB unbroken runs from one agent, several at once, are recorded with exact counts, and another agent is answered meanwhile", async () => {
    const heavy = system.client.agent("heavy-writer")
    // The bystander's own connection, and one attempt per call (the SDK's 5 s): answered means answered
    // the first time, not after the heavy writes are through.
    const bystanderClient = await WorkingMemoryClient.connect({ servers: system.server.url, attempts: 1 })
    const other = bystanderClient.agent("bystander")
    await heavy.register({ role: "custom", budget: 50_000 })
    await other.register({ role: "main" })
    await other.record({ origin: "USER", content: "The bystander's first note." })

    // Each a single pre-token, the tokenizer's worst case; each different, so no cache helps.
    const runs = Array.from({ length: 8 }, (_, i) =>
      i % 2 === 0
        ? ALPHABET[i]!.repeat(MAX_CONTENT_BYTES)
        : (ALPHABET[i]! + ALPHABET[i + 1]!).repeat(MAX_CONTENT_BYTES / 2),
    )
    const heavyWrites = Promise.all(runs.map((content) => heavy.record({ origin: "USER", content })))
    // The bystander writes and reads while the heavy writes are in progress.
    const bystander = (async () => {
      const answers: string[] = []
      for (let i = 0; i < 5; i++) {
        const { entryId } = await other.record({ origin: "USER", content: `Bystander note ${i}: lunch at noon.` })
        answers.push(entryId)
      }
      const context = await other.buildContext()
      return { answers, context }
    })()
    const [recorded, { answers, context }] = await Promise.all([heavyWrites, bystander]).finally(() =>
      bystanderClient.close(),
    )

    expect(answers).toHaveLength(5)
    expect(context.text).toContain("Bystander note 4: lunch at noon.")
    const log = await readLog(system.server.url)
    const stored = log
      .map((s) => s.event)
      .filter((e): e is EventOf<"EntryRecorded"> => e._tag === "EntryRecorded" && e.agentId === "heavy-writer")
    expect(stored).toHaveLength(runs.length)
    for (const [i, reply] of recorded.entries()) {
      const event = stored.find((e) => e.entryId === reply.entryId)!
      expect(event.content).toBe(runs[i])
      expect(reply.tokens).toBe(event.tokens)
      expect(event.tokens).toBe(blockTokens(event, "raw", runs[i]!, "o200k_base"))
    }
    // The fade service brings the heavy writer back under τ (its key points and summaries count the same texts).
    const budget = 50_000
    await eventually(
      "fading to bring the heavy writer under τ",
      async () => {
        const view = await system.liveView("heavy-writer")
        if (view !== undefined && view.usage <= 0.8 * budget) return true
        throw new Error(`usage ${view?.usage}`)
      },
      60_000,
    )
  }, 180_000)
})

describe("an entry larger than the budget", () => {
  let server: NatsServerProcess
  let runtime: ManagedRuntime.ManagedRuntime<unknown, unknown>
  let client: WorkingMemoryClient
  beforeAll(async () => {
    server = await startNatsServer()
    const s = settingsFor(server.url)
    runtime = ManagedRuntime.make(
      Layer.mergeAll(
        gatewayService(s("wm-gateway")),
        workingService(s("wm-working")),
        substrateService(s("wm-substrate")),
        fadeService(s("wm-fade"), FadeWorkerSettings.make({ intervalMs: 3_600_000 })),
      ),
    ) as unknown as ManagedRuntime.ManagedRuntime<unknown, unknown>
    await runtime.runPromise(Effect.void)
    client = await WorkingMemoryClient.connect({ servers: server.url })
  })
  afterAll(async () => {
    await client?.close()
    await runtime?.dispose()
    await server?.stop()
  })

  /** Lets the fade service evaluate the agent until nothing moves, once it has seen every write. */
  const settle = async (agentId: string) => {
    const fade = await runtime.runPromise(FadeWorker as unknown as Effect.Effect<FadeWorkerShape>)
    const target = await lastSeq(server.url)
    await eventually(
      `the fade worker to see sequence ${target}`,
      () => (fade.view(agentId)?.lastSeq ?? 0) >= target,
      10_000,
      25,
    )
    for (let i = 0; i < 50; i++) {
      const run = await runtime.runPromise(fade.evaluate(agentId))
      if (run.applied === 0 && run.conflicts === 0) return fade.view(agentId)!
    }
    throw new Error(`${agentId} did not settle`)
  }

  it("a 3 000-token tool output in a 500-token budget leaves working on its own; the other entries keep their places and its raw text stays readable", async () => {
    const agent = client.agent("tool-user")
    await agent.register({ role: "custom", budget: 500 })
    const words = [
      "budget",
      "meeting",
      "supplier",
      "invoice",
      "delivery",
      "Porto",
      "Tuesday",
      "pallet",
      "contract",
      "review",
    ]
    for (let i = 0; i < 10; i++) {
      const content = `Note ${i}: ${Array.from({ length: 190 }, (_, k) => words[(k * 7 + i) % words.length]).join(" ")}.`
      await agent.record({ origin: "INTERNAL", content, timestamp: T0 + i * 60_000 })
    }
    const before = await settle("tool-user")
    expect(before.usage).toBeGreaterThan(0)
    const rungsBefore = new Map([...HashMap.values(before.entries)].map((e) => [e.id, e.rung]))

    const output = Array.from({ length: 400 }, (_, i) => `row ${i}: status ok, latency fine.`).join("\n")
    const { entryId, tokens } = await agent.record({ origin: "SYSTEM", content: output, timestamp: T0 + 11 * 60_000 })
    expect(tokens).toBeGreaterThan(3_000)
    const after = await settle("tool-user")

    expect(Option.isNone(HashMap.get(after.entries, entryId))).toBe(true)
    expect(new Map([...HashMap.values(after.entries)].map((e) => [e.id, e.rung]))).toEqual(rungsBefore)
    expect(after.usage).toBe(before.usage)
    const log = await readLog(server.url)
    const moves = log
      .map((s) => s.event)
      .filter(
        (e): e is EventOf<"RungChanged"> | EventOf<"EntryDemoted"> =>
          (e._tag === "RungChanged" || e._tag === "EntryDemoted") && e.entryId === entryId,
      )
    expect(moves.map((e) => [e._tag, e._tag === "EntryDemoted" ? e.from : e.to])).toEqual([["EntryDemoted", 0]])
    expect((await agent.raw(entryId)).content).toBe(output)
  }, 120_000)
})

describe("stream limits from the environment", () => {
  const read = (env: Record<string, string>) =>
    Effect.runPromise(
      Effect.gen(function* () {
        return yield* NatsSettings
      }).pipe(
        Effect.provide(
          NatsSettings.fromEnv("wm-test").pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))),
        ),
      ),
    )

  it("reads WM_STREAM_MAX_BYTES and WM_STREAM_MAX_MSGS, none by default, and refuses a limit of 0", async () => {
    expect(await read({})).toMatchObject({ streamMaxBytes: -1, streamMaxMsgs: -1 })
    expect(await read({ WM_STREAM_MAX_BYTES: "1073741824", WM_STREAM_MAX_MSGS: "5000000" })).toMatchObject({
      streamMaxBytes: 1_073_741_824,
      streamMaxMsgs: 5_000_000,
    })
    await expect(read({ WM_STREAM_MAX_BYTES: "0" })).rejects.toThrow(/positive number, or -1/)
  })
})

describe.runIf(byteLimitsHold)("a full event stream", () => {
  const LIMIT = 60_000
  let system: TestSystem
  beforeAll(async () => {
    system = await startTestSystem({ streamMaxBytes: LIMIT }, { fade: false, memory: false })
  })
  afterAll(async () => {
    await system?.stop()
  })

  const streamState = async () => {
    const { jetstreamManager } = await import("@nats-io/jetstream")
    const jsm = await jetstreamManager(system.client.nc)
    const info = await jsm.streams.info(EVENTS_STREAM)
    return { first: info.state.first_seq, last: info.state.last_seq, bytes: info.state.bytes, config: info.config }
  }

  it("refuses the write that does not fit with StorageFull, stores none of it, and keeps every registration and budget", async () => {
    const first = system.client.agent("early-bird")
    await first.register({ role: "custom", budget: 900 })
    await first.retuneBudget(1_000)
    const filler = system.client.agent("filler")
    await filler.register({ role: "main" })

    let refusal: unknown = null
    let stored = 0
    const note = (i: number) =>
      `Log line ${i}: ${"the nightly export finished and the archive was copied. ".repeat(18)}`
    for (let i = 0; i < 200 && refusal === null; i++) {
      await filler.record({ origin: "SYSTEM", content: note(i), requestId: `fill-${i}` }).then(
        () => stored++,
        (error: unknown) => (refusal = error),
      )
    }
    expect(stored).toBeGreaterThan(0)
    expect(refusal).toBeInstanceOf(StorageFull)
    expect((refusal as StorageFull).limit).toContain("maximum bytes exceeded")
    const refusedFill = stored
    // Smaller writes fill what is left, until the stream has no room for even a short entry.
    let tail = 0
    for (let short: unknown = null; short === null && tail < 200; tail++)
      await filler
        .record({ origin: "SYSTEM", content: `ok ${tail}`, requestId: `short-${tail}` })
        .then(() => stored++)
        .catch((error: unknown) => {
          short = error
        })

    // A short entry is stored sealed, larger than a registration or a budget change: those take what is left.
    const fillUntilRefused = async (write: (i: number) => Promise<unknown>) => {
      for (let i = 0; i < 200; i++) {
        const refused = await write(i).then(
          () => null,
          (error: unknown) => error,
        )
        if (refused !== null) return expect(refused).toBeInstanceOf(StorageFull)
      }
      throw new Error("the stream never filled")
    }
    await fillUntilRefused((i) => system.client.agent(`squeezed-${i}`).register({ role: "main" }))
    let budget = 1_000
    await fillUntilRefused((i) => first.retuneBudget(1_001 - (i % 2)).then(() => (budget = 1_001 - (i % 2))))

    // Nothing of the refused write is in the log, and nothing old was dropped to make room.
    const full = await streamState()
    expect(full.first).toBe(1)
    expect(full.bytes).toBeLessThanOrEqual(LIMIT)
    const log = await readLog(system.server.url)
    expect(log.filter((s) => s.event._tag === "EntryRecorded")).toHaveLength(stored)
    expect(log.some((s) => s.event.eventId.endsWith(`:fill-${refusedFill}`))).toBe(false)
    // Registrations and budgets are refused too, not half-made.
    await expect(system.client.agent("latecomer").register({ role: "main" })).rejects.toBeInstanceOf(StorageFull)
    await expect(first.retuneBudget(2_000)).rejects.toBeInstanceOf(StorageFull)
    expect((await streamState()).last).toBe(full.last)

    // Restarted on the full log, every agent is still registered with its budget, and reads answer.
    await system.restartServices()
    expect((await first.view()).budget).toBe(budget)
    expect((await filler.view()).entries).toHaveLength(stored)
    await expect(system.client.agent("latecomer").view()).rejects.toMatchObject({ _tag: "AgentNotFound" })

    // An operator raises the limit: the same request, retried with its id, is stored once.
    await system.services.stop()
    system.services = await startServices(
      systemLayer(settingsFor(system.server.url, { streamMaxBytes: 10 * LIMIT }), { fade: false, memory: false }),
    )
    expect((await streamState()).config.max_bytes).toBe(10 * LIMIT)
    const retried = await filler.record({
      origin: "SYSTEM",
      content: note(refusedFill),
      requestId: `fill-${refusedFill}`,
    })
    expect(retried.duplicate).toBe(false)
  }, 120_000)
})

describe.runIf(byteLimitsHold)("a limit lowered below what the stream holds", () => {
  it("drops nothing: the first events stay, every agent stays registered, and new writes are refused with StorageFull", async () => {
    const system = await startTestSystem({}, { fade: false, memory: false })
    try {
      const agents = ["first-agent", "second-agent"].map((id) => system.client.agent(id))
      for (const agent of agents) await agent.register({ role: "main" })
      for (let i = 0; i < 30; i++)
        await agents[i % 2]!.record({
          origin: "USER",
          content: `Entry ${i}: ${"the courier left the parcel at the door. ".repeat(10)}`,
        })
      const { jetstreamManager } = await import("@nats-io/jetstream")
      const jsm = await jetstreamManager(system.client.nc)
      const before = (await jsm.streams.info(EVENTS_STREAM)).state

      // An operator sets a limit below the stream's size and restarts the services.
      await system.services.stop()
      system.services = await startServices(
        systemLayer(settingsFor(system.server.url, { streamMaxBytes: Math.floor(before.bytes / 4) }), {
          fade: false,
          memory: false,
        }),
      )

      const after = (await jsm.streams.info(EVENTS_STREAM)).state
      expect(after.first_seq).toBe(1)
      expect(after.messages).toBe(before.messages)
      for (const agent of agents) expect((await agent.view()).entries).toHaveLength(15)
      await expect(agents[0]!.record({ origin: "USER", content: "One more." })).rejects.toBeInstanceOf(StorageFull)
    } finally {
      await system.stop()
    }
  }, 120_000)
})

describe.runIf(!byteLimitsHold)("a stream byte limit on nats-server 2.9", () => {
  it("is refused at start, naming WM_STREAM_MAX_BYTES and the server's version, before anything is written", async () => {
    const server = await startNatsServer()
    try {
      const started = await startServices(
        systemLayer(settingsFor(server.url, { streamMaxBytes: 60_000 }), { fade: false, memory: false }),
      ).then(
        async (services) => {
          await services.stop()
          return "started"
        },
        (error: unknown) => String(error),
      )
      expect(started).toContain("WM_STREAM_MAX_BYTES needs nats-server 2.10 or later")
      expect(started).toContain(natsServerVersion()!)
    } finally {
      await server.stop()
    }
  }, 60_000)
})

describe("a full JetStream store", () => {
  it("refuses writes with StorageFull, not a 30-second retry ending in NoResponse, when the server's store is full", async () => {
    const server = await startNatsServer({ config: "jetstream { max_file_store: 120000 }" })
    const services = await startServices(systemLayer(settingsFor(server.url), { fade: false, memory: false }))
    const client = await WorkingMemoryClient.connect({ servers: server.url })
    try {
      const agent = client.agent("store-filler")
      await agent.register({ role: "main" })
      let refusal: unknown = null
      let stored = 0
      for (let i = 0; i < 400 && refusal === null; i++) {
        await agent
          .record({ origin: "SYSTEM", content: `Row ${i}: ${"checksum verified, upload complete. ".repeat(25)}` })
          .then(
            () => stored++,
            (error: unknown) => (refusal = error),
          )
      }
      expect(stored).toBeGreaterThan(0)
      expect(refusal).toBeInstanceOf(StorageFull)
      expect((refusal as StorageFull).limit).toContain("insufficient resources")
      expect((await agent.view()).entries).toHaveLength(stored)
    } finally {
      await client.close()
      await services.stop()
      await server.stop()
    }
  }, 120_000)
})

describe("a server whose max_payload is below an event", () => {
  it("answers a write whose event would be above it at once, naming the limit, and keeps what it accepted", async () => {
    // 64 KiB: a request of 60 KB passes, its event (the content sealed, about 4/3 of it) does not.
    const server = await startNatsServer({ config: "max_payload: 65536" })
    const services = await startServices(systemLayer(settingsFor(server.url), { fade: false, memory: false }))
    const client = await WorkingMemoryClient.connect({ servers: server.url })
    try {
      const agent = client.agent("small-payload")
      await agent.register({ role: "main" })
      const { entryId } = await agent.record({ origin: "USER", content: "A short note that fits." })
      const refusal = await agent.record({ origin: "USER", content: "x".repeat(60_000) }).then(
        () => null,
        (error: unknown) => error,
      )
      // Each attempt is answered Unavailable at once (the SDK retries it), not left to time out.
      expect((refusal as { readonly cause?: unknown }).cause).toMatchObject({
        _tag: "Unavailable",
        reason: expect.stringContaining("max_payload"),
      })
      expect((await agent.view()).entries.map((e) => e.id)).toEqual([entryId])
    } finally {
      await client.close()
      await services.stop()
      await server.stop()
    }
  }, 120_000)
})
