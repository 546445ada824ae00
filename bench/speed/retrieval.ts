import type { NatsConnection } from "@nats-io/transport-node"
import { Effect, ManagedRuntime } from "effect"
import type { MemoryEvent } from "../../contracts/events.ts"
import { apiSubject, eventSubject } from "../../contracts/subjects.ts"
import { startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { encodeVector } from "../../services/platform/embedding/embedder.ts"
import { EmbeddingProvider, type EmbeddingProviderShape } from "../../services/platform/embedding/embedding-provider.ts"
import { FULL_VIEW_T0, fadeScore, fullViewEvents } from "../support/full-view.ts"
import { memoryQuestion, memoryText } from "../support/realistic-entries.ts"
import { publishWindowed } from "../support/synthetic-log.ts"
import { READINESS_PROBE, waitUntilServed } from "./replay.ts"
import { processRssMb, type RetrievalMemory, retrievalMemoryProbe } from "./retrieval-memory.ts"
import { createBenchTopology, spawnService, stopChild } from "./services.ts"
import { percentile } from "./stats.ts"

export interface RetrievalContext {
  readonly quick: boolean
  /** Long-term records (default 100k, 2k when quick). */
  readonly records?: number
  /** Where the memory services write a CPU profile (`node --cpu-prof`), if anywhere. */
  readonly profileDir?: string
  readonly log: (line: string) => void
}

export interface RetrievalFigures {
  readonly p50Ms: number
  readonly p99Ms: number
  readonly records: number
  readonly queries: number
  readonly model: string
  /** From starting the memory services until they answer (rebuilding the store from the log). */
  readonly warmUpMs: number
  readonly memory: RetrievalMemory
}

export type RetrievalMeasure = (context: RetrievalContext) => Promise<RetrievalFigures>

const AGENT = "bench-recall"
const MINUTE = 60_000
const encoder = new TextEncoder()

/** The three events of a memory that faded to a summary and left working. */
const memoryEvents = (
  i: number,
  count: number,
  embedding: { model: string; dims: number; vector: string },
): MemoryEvent[] => {
  const entryId = `memory-${i}`
  const content = memoryText(i)
  const timestamp = FULL_VIEW_T0 - (count - i) * 10 * MINUTE
  const summary = content.length > 90 ? `${content.slice(0, content.lastIndexOf(" ", 90))}…` : content
  const envelope = (n: number, at: number) => ({
    v: 1 as const,
    eventId: `${AGENT}:memory:${i}:${n}`,
    agentId: AGENT,
    at,
    causationId: null,
    correlationId: null,
  })
  // Token counts are rough (a quarter of the characters): nothing on the retrieval path reads them.
  const tokens = (text: string) => Math.ceil(text.length / 4) + 8
  return [
    {
      _tag: "EntryRecorded",
      ...envelope(0, timestamp),
      entryId,
      timestamp,
      origin: i % 3 === 0 ? "INTERNAL" : "USER",
      content,
      tags: i % 7 === 0 ? ["tool"] : [],
      moodSnapshot: null,
      emotionalWeight: 0,
      tokens: tokens(content),
    },
    {
      _tag: "RungChanged",
      ...envelope(1, timestamp + 60 * MINUTE),
      entryId,
      from: 0,
      to: 2,
      text: summary,
      tokens: tokens(summary),
      score: fadeScore(timestamp + 60 * MINUTE, 0.9),
      producer: { kind: "offline", model: "bench", fallbackReason: null, attempts: 1 },
    },
    {
      _tag: "EntryDemoted",
      ...envelope(2, timestamp + 120 * MINUTE),
      v: 2,
      entryId,
      from: 2,
      score: fadeScore(timestamp + 120 * MINUTE, 0.95),
      embedding: {
        ...embedding,
        producer: { kind: "offline", model: embedding.model, fallbackReason: null, attempts: 1 },
      },
      entry: {
        timestamp,
        origin: i % 3 === 0 ? "INTERNAL" : "USER",
        correlationId: null,
        tags: i % 7 === 0 ? ["tool"] : [],
        moodSnapshot: null,
        emotionalWeight: 0,
        rawTokens: tokens(content),
        keyPoints: null,
        summary: { text: summary, tokens: tokens(summary) },
        citationCount: 0,
      },
    },
  ]
}

/** Appends the agent's registration, `count` demoted memories, then the rest of a full working view. */
const fillMemories = async (
  nc: NatsConnection,
  count: number,
  probe: ReturnType<typeof retrievalMemoryProbe>,
): Promise<string> => {
  // Kept until the memories are in: the sentence model's workers end with the layout's scope.
  const runtime = ManagedRuntime.make(EmbeddingProvider.fromEnv())
  try {
    return await fillWith((await runtime.runPromise(Effect.service(EmbeddingProvider))).offline, nc, count, probe)
  } finally {
    await runtime.dispose()
  }
}

const fillWith = async (
  embedder: EmbeddingProviderShape["offline"],
  nc: NatsConnection,
  count: number,
  probe: ReturnType<typeof retrievalMemoryProbe>,
): Promise<string> => {
  // Records are embedded in process, as the fade worker does without a remote embedder.
  const view = fullViewEvents({ agentId: AGENT })
  const message = (event: MemoryEvent) => ({
    subject: eventSubject(event),
    data: encoder.encode(JSON.stringify(event)),
    msgID: event.eventId,
  })
  await publishWindowed(nc, [message(view[0]!)])
  const BATCH = 1_000
  for (let start = 0; start < count; start += BATCH) {
    const indices = Array.from({ length: Math.min(BATCH, count - start) }, (_, k) => start + k)
    const vectors = await embedder.embed(indices.map(memoryText))
    indices.forEach((i, k) => {
      probe.add(`memory-${i}`, memoryText(i), vectors[k]!)
    })
    await publishWindowed(
      nc,
      indices.flatMap((i, k) =>
        memoryEvents(i, count, { model: embedder.model, dims: embedder.dims, vector: encodeVector(vectors[k]!) }).map(
          message,
        ),
      ),
    )
  }
  await publishWindowed(nc, view.slice(1).map(message))
  return embedder.model
}

export const measureRetrieval: RetrievalMeasure = async ({ quick, records: requested, profileDir, log }) => {
  const records = requested ?? (quick ? 2_000 : 100_000)
  const queries = quick ? 50 : 300
  const warmup = quick ? 10 : 30
  const server = await startNatsServer()
  let client: WorkingMemoryClient | undefined
  let memory: ReturnType<typeof spawnService> | undefined
  try {
    client = await WorkingMemoryClient.connect({ servers: server.url, name: "bench-retrieval", timeoutMs: 30_000 })
    await createBenchTopology(client.nc, server.url)
    log(`retrieval: appending ${records} demoted memories and a full working view of one agent...`)
    const probe = retrievalMemoryProbe()
    const model = await fillMemories(client.nc, records, probe)
    log(`retrieval: starting the memory services (long-term, retrieval) on that log...`)
    const started = performance.now()
    memory = spawnService(
      "bench/speed/memory-runner.ts",
      server.url,
      profileDir !== undefined ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : [],
    )
    await Promise.race([
      waitUntilServed(client.nc, apiSubject(READINESS_PROBE, "memory.query"), 900_000),
      memory.exited(),
    ])
    const warmUpMs = performance.now() - started

    const agent = client.agent(AGENT)
    let found = 0
    for (let i = 0; i < warmup; i++) await agent.query(memoryQuestion(queries + i), { limit: 10 })
    const samples: number[] = []
    for (let i = 0; i < queries; i++) {
      const start = performance.now()
      const { results } = await agent.query(memoryQuestion(i), { limit: 10 })
      samples.push(performance.now() - start)
      found += results.length
    }
    if (found === 0) throw new Error("retrieval found nothing for any query")
    const memoryFigures = probe.figures(AGENT, await processRssMb(memory.child.pid))
    return {
      p50Ms: percentile(samples, 50),
      p99Ms: percentile(samples, 99),
      records,
      queries,
      model,
      warmUpMs,
      memory: memoryFigures,
    }
  } finally {
    await client?.close()
    if (memory) await stopChild(memory.child)
    await server.stop()
  }
}
