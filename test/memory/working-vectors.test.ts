/**
 * Merged retrieval embeds working entries in the background lane as they are
 * recorded, so a step's query embeds only itself. Those the background could
 * not take (a burst) a query embeds in one call, 16 at most, the newest first,
 * and offers the rest to the background again; a query the embedder cannot
 * take ranks by words.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { describe, expect, it, vi } from "vitest"
import { startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import type { Embedder } from "../../services/platform/embedding/embedder.ts"
import { EmbeddingProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { hashedEmbedder } from "../../services/platform/embedding/offline-embedder.ts"
import { gatewayService, memoryService, substrateService, workingService } from "../../services/system.ts"
import { settingsFor } from "../support/system.ts"

/** An embedder that remembers how many texts each call carried, and in which lane. */
/** `refuse`: every call refused, or those of the background lane only. */
const counting = (inner: Embedder, refuse: boolean | "background" = false) => {
  const calls: number[] = []
  const lanes: string[] = []
  const embedder: Embedder = {
    model: inner.model,
    dims: inner.dims,
    embed: (texts, options) => {
      calls.push(texts.length)
      lanes.push(`${options?.priority ?? "query"}:${texts.length}`)
      const refused = refuse === true || (refuse === "background" && options?.priority === "background")
      return refused ? Promise.reject(new Error("overloaded")) : inner.embed(texts)
    },
  }
  return { embedder, calls, lanes }
}

/** The services with merged retrieval on `embedder`, and a client. */
const startWith = async (embedder: Embedder) => {
  const server = await startNatsServer()
  const s = settingsFor(server.url)
  const layer = Layer.mergeAll(
    workingService(s("wm-working")),
    gatewayService(s("wm-gateway")),
    substrateService(s("wm-substrate")),
    memoryService(s("wm-memory"), { models: EmbeddingProvider.offlineOnly(embedder) }),
  )
  const runtime = ManagedRuntime.make(layer) as unknown as ManagedRuntime.ManagedRuntime<unknown, unknown>
  await runtime.runPromise(Effect.void)
  const client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 10_000 })
  return {
    client,
    stop: async () => {
      await client.close()
      await runtime.dispose()
      await server.stop()
    },
  }
}

const recordRemarks = async (agent: ReturnType<WorkingMemoryClient["agent"]>, count: number) => {
  await agent.register({ role: "main" })
  const t0 = Date.UTC(2024, 2, 1, 9)
  for (let i = 0; i < count; i++)
    await agent.record({ origin: "USER", content: `Remark ${i} about the lease renewal.`, timestamp: t0 + i * 60_000 })
}

describe("working entries in merged retrieval", () => {
  it("are embedded in the background as they are recorded, so a query embeds only itself", async () => {
    const { embedder, lanes } = counting(hashedEmbedder(64))
    const system = await startWith(embedder)
    try {
      const agent = system.client.agent("recorded")
      await recordRemarks(agent, 12)
      await vi.waitFor(
        () =>
          expect(lanes.filter((l) => l.startsWith("background:")).reduce((n, l) => n + Number(l.slice(11)), 0)).toBe(
            12,
          ),
        { timeout: 30_000, interval: 50 },
      )
      lanes.length = 0
      const first = await agent.query("lease renewal", { limit: 5 })
      expect(first.results.length).toBeGreaterThan(0)
      expect(lanes).toEqual(["query:1"])
    } finally {
      await system.stop()
    }
  }, 60_000)

  it("when the background could not embed them, a query embeds the 16 newest in one call and offers the rest again", async () => {
    const { embedder, lanes } = counting(hashedEmbedder(64), "background")
    const system = await startWith(embedder)
    try {
      const agent = system.client.agent("burst")
      await recordRemarks(agent, 40)
      await vi.waitFor(
        () =>
          expect(lanes.filter((l) => l.startsWith("background:")).reduce((n, l) => n + Number(l.slice(11)), 0)).toBe(
            40,
          ),
        { timeout: 30_000, interval: 50 },
      )
      lanes.length = 0
      const first = await agent.query("lease renewal", { limit: 5 })
      expect(first.results.length).toBeGreaterThan(0)
      expect([...lanes].sort()).toEqual(["background:24", "query:1", "query:16"])
      // The 16 it embedded are remembered: the next query embeds the next 16 and offers the last 8 again.
      lanes.length = 0
      await agent.query("when is the renewal due", { limit: 5 })
      expect([...lanes].sort()).toEqual(["background:8", "query:1", "query:16"])
    } finally {
      await system.stop()
    }
  }, 60_000)

  it("a query the embedder refuses is still answered, ranked by its words", async () => {
    const { embedder } = counting(hashedEmbedder(64), true)
    const system = await startWith(embedder)
    try {
      const agent = system.client.agent("refused")
      await recordRemarks(agent, 5)
      const answer = await agent.query("lease renewal", { limit: 3 })
      expect(answer.results.map((r) => r.entryId).length).toBe(3)
    } finally {
      await system.stop()
    }
  }, 60_000)
})
