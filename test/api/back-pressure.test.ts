/**
 * Back-pressure, not silence: while background work on an agent's partition is far behind the log — here
 * the fade worker, whose summariser never answers, so its evaluations wait and the agent's triggers pile
 * up — the gateway answers the agent's new entries at once with a typed, retryable `Overloaded`
 * (`retryAfterMs`), stores nothing of them, and still serves every read and every other write. `wm status`
 * shows the lag. Once the summariser answers (with an error: fade falls back to its offline summariser),
 * the lag drains and the SDK's own retries of a refused entry succeed. Every acknowledged entry is in the
 * log exactly once; no refused one is. No timing is asserted: every wait is for a condition.
 */
import { spawn } from "node:child_process"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { fileURLToPath } from "node:url"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { readStatus } from "../../cli/audit/status.ts"
import { Overloaded } from "../../contracts/errors.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { FadeWorkerSettings } from "../../services/fade/fade-worker.ts"
import { Summarizer } from "../../services/fade/summarizer.ts"
import { GatewaySettings } from "../../services/gateway/settings.ts"
import { EmbeddingProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { hashedEmbedder } from "../../services/platform/embedding/offline-embedder.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { fadeService, gatewayService, workingService } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { readLog } from "../support/log.ts"
import { settingsFor } from "../support/system.ts"

const LIMIT = 25
const AGENT = "pressed"
const ROOT = fileURLToPath(new URL("../..", import.meta.url))
const NODE = fileURLToPath(new URL("../../node_modules/.bin/node", import.meta.url))

let server: NatsServerProcess
let services: ManagedRuntime.ManagedRuntime<unknown, unknown>
let summariser: Server
let stalled = true
const hanging: ServerResponse[] = []
/** Refusals answered at once (one attempt for Overloaded), and a client that waits them out. */
let impatient: WorkingMemoryClient
let patient: WorkingMemoryClient
let nc: NatsConnection

const acknowledged = new Set<string>()
const refused = new Set<string>()

const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error,
  )

beforeAll(async () => {
  summariser = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume()
    if (stalled) hanging.push(res)
    else res.writeHead(500).end("no summaries today")
  })
  await new Promise<void>((r) => summariser.listen(0, "127.0.0.1", () => r()))
  server = await startNatsServer()
  const s = settingsFor(server.url)
  const models = Layer.merge(
    Summarizer.remote({
      baseUrl: `http://127.0.0.1:${(summariser.address() as { port: number }).port}/v1`,
      model: "stalled",
      timeout: "120 seconds",
      retries: 0,
    }),
    EmbeddingProvider.offlineOnly(hashedEmbedder()),
  )
  const partitions = PartitionSettings.make({ leaseSettleMs: 0 })
  const layer = Layer.mergeAll(
    gatewayService(s("wm-gateway"), partitions, GatewaySettings.make({ maxProjectionLag: LIMIT })),
    workingService(s("wm-working"), partitions),
    fadeService(s("wm-fade"), FadeWorkerSettings.make({ intervalMs: 3_600_000 }), models, partitions),
  )
  services = ManagedRuntime.make(layer as Layer.Layer<unknown, unknown>)
  await services.runPromise(Effect.void)
  impatient = await WorkingMemoryClient.connect({ servers: server.url, overloadedAttempts: 1 })
  patient = await WorkingMemoryClient.connect({ servers: server.url, overloadedAttempts: 1_000 })
  nc = await connect({ servers: server.url })
}, 60_000)

afterAll(async () => {
  stalled = false
  for (const res of hanging.splice(0)) res.destroy()
  await nc?.close()
  await impatient?.close()
  await patient?.close()
  await services?.dispose()
  await server?.stop()
  await new Promise((r) => summariser.close(r))
})

describe("back-pressure", () => {
  it("answers new entries with Overloaded, at once, while fade is far behind, and serves everything else", async () => {
    const agent = impatient.agent(AGENT)
    await agent.register({ role: "custom", budget: 120 })
    // Alone far above τ·budget, this entry must be summarised at once: fade waits on the stalled summariser.
    const big = await agent.record({
      requestId: "big",
      origin: "USER",
      content: "We compared twelve hotels in Lisbon for step-free access, river views and breakfast. ".repeat(16),
    })
    acknowledged.add(big.entryId)
    await eventually("fade to ask for a summary", () => (hanging.length > 0 ? true : undefined), 60_000, 50)

    // Entries the gateway takes while fade's report still says it is within the limit.
    let next = 0
    const note = async () => {
      const requestId = `note-${next}`
      const content = `Note ${next++} on the hotels.`
      const outcome = await failureOf(
        agent.record({ requestId, origin: "INTERNAL", content }).then((r) => {
          acknowledged.add(r.entryId)
        }),
      )
      if (outcome !== null) refused.add(requestId)
      return outcome
    }
    // Fade is behind by the big entry and the notes: up to LIMIT of them it is within the limit.
    for (let i = 1; i < LIMIT; i++) expect(await note()).toBeNull()
    await eventually(
      "fade to report that it is behind",
      async () => {
        await note()
        const status = await readStatus(nc, LIMIT)
        return status.partitions.some((p) => p.service === "fade" && p.overLimit) ? true : undefined
      },
      60_000,
      50,
    )
    // The gateway reads the reports again within a quarter second: from then on new entries are refused.
    const refusal = await eventually(
      "a refusal",
      async () => {
        const outcome = await note()
        if (outcome === null) return undefined
        // A typed answer, not a timeout.
        expect(outcome).toBeInstanceOf(Overloaded)
        return outcome as Overloaded
      },
      60_000,
      50,
    )
    expect(refusal).toMatchObject({ projection: "fade", partition: partitionOf(AGENT), limit: LIMIT })
    expect(refusal.lag).toBeGreaterThan(LIMIT)
    expect(refusal.retryAfterMs).toBeGreaterThan(0)

    // A batch of new entries is refused whole, with nothing stored.
    const batch = await failureOf(
      agent.recordMany([
        { requestId: "batch-a", origin: "USER", content: "One." },
        { requestId: "batch-b", origin: "USER", content: "Two." },
      ]),
    )
    expect(batch).toBeInstanceOf(Overloaded)
    refused.add("batch-a").add("batch-b")

    // A retry of an entry already recorded is answered as it was, alone or in a batch.
    const again = await agent.record({ requestId: "note-0", origin: "INTERNAL", content: "Note 0 on the hotels." })
    expect(again).toMatchObject({ entryId: "note-0", duplicate: true })
    const batchAgain = await agent.recordMany([
      { requestId: "note-1", origin: "INTERNAL", content: "Note 1 on the hotels." },
    ])
    expect(batchAgain.results[0]).toMatchObject({ ok: true, entryId: "note-1", duplicate: true })

    // Reads, and the writes that are not new entries, are served.
    const view = await agent.view()
    expect(view.entries.map((e) => e.id)).toContain("big")
    const { stepId } = await agent.beginStep({ focus: { task: "choose a hotel" } })
    const context = await agent.buildContext({ stepId })
    expect(context.items.length).toBeGreaterThan(0)
    await agent.endStep(stepId)

    // The operator sees it: fade's lag on the agent's partition, over the limit.
    const status = await readStatus(nc, LIMIT)
    const fade = status.partitions.find((p) => p.service === "fade" && p.partition === partitionOf(AGENT))
    expect(fade).toMatchObject({ background: true, overLimit: true })
    expect(fade!.lag).toBeGreaterThan(LIMIT)
    const cli = await new Promise<{ code: number | null; stdout: string }>((resolve, reject) => {
      const child = spawn(NODE, ["cli/wm.ts", "status", "--json"], {
        cwd: ROOT,
        env: { ...process.env, NATS_URL: server.url, WM_MAX_PROJECTION_LAG: String(LIMIT) },
        stdio: ["ignore", "pipe", "inherit"],
      })
      let stdout = ""
      child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
      child.on("error", reject)
      child.on("close", (code) => resolve({ code, stdout }))
    })
    expect(cli.code).toBe(1)
    const printed = JSON.parse(cli.stdout) as { partitions: Array<{ service: string; overLimit: boolean }> }
    expect(printed.partitions.some((p) => p.service === "fade" && p.overLimit)).toBe(true)
  })

  it("lets the SDK's retries through once the lag drains, and loses nothing acknowledged", async () => {
    const agent = patient.agent(AGENT)
    // Each attempt of the call is seen on its subject: the SDK retries it after each Overloaded.
    let attempts = 0
    // The server delivers the request on its partition's route (contracts/routing.ts).
    const watch = nc.subscribe(`wm.route.*.*.${AGENT}.entry.record`, {
      callback: (_error, msg) => {
        if (msg.json<{ requestId?: string }>().requestId === "after-the-wait") attempts++
      },
    })
    const waited = agent.record({ requestId: "after-the-wait", origin: "USER", content: "Book the one by the river." })
    await eventually("the SDK to retry after an Overloaded", () => (attempts >= 2 ? true : undefined), 60_000, 50)

    // The summariser answers at last (with an error): fade falls back to its offline summariser and catches up.
    stalled = false
    for (const res of hanging.splice(0)) res.writeHead(500).end("gave up")
    const answer = await waited
    watch.unsubscribe()
    expect(answer).toMatchObject({ entryId: "after-the-wait", duplicate: false })
    acknowledged.add(answer.entryId)
    expect(attempts).toBeGreaterThanOrEqual(2)

    // New entries are taken again, without waiting.
    const next = await impatient.agent(AGENT).record({ requestId: "later", origin: "USER", content: "Done." })
    acknowledged.add(next.entryId)
    const status = await eventually(
      "fade's report to catch up",
      async () => {
        const now = await readStatus(nc, LIMIT)
        return now.partitions.some((p) => p.overLimit) ? undefined : now
      },
      60_000,
      50,
    )
    expect(status.partitions.find((p) => p.service === "fade")).toBeDefined()

    // Every acknowledged entry is stored once; nothing refused is stored.
    const recorded = new Map<string, number>()
    for (const { event } of await readLog(server.url))
      if (event._tag === "EntryRecorded" && event.agentId === AGENT)
        recorded.set(event.entryId, (recorded.get(event.entryId) ?? 0) + 1)
    for (const id of acknowledged) expect([id, recorded.get(id)]).toEqual([id, 1])
    for (const id of refused) expect([id, recorded.has(id)]).toEqual([id, false])
    expect([...recorded.keys()].sort()).toEqual([...acknowledged].sort())
  })
})
