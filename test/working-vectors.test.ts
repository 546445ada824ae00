/**
 * Merged retrieval embeds the working entries it has no vector for in one
 * call: a sentence model pays its per-call cost once per build, not once per
 * entry, so an agent's first focused build does not time out. After a burst a
 * query pays for 16 at most and leaves the rest to the background lane; a
 * query the embedder cannot take ranks by words.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { describe, expect, it } from "vitest"
import { type NatsServerProcess, startNatsServer } from "../infra/nats-server.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import type { Embedder } from "../services/platform/embedding/embedder.ts"
import { EmbeddingProvider } from "../services/platform/embedding/embedding-provider.ts"
import { hashedEmbedder } from "../services/platform/embedding/offline-embedder.ts"
import { gatewayService, memoryService, substrateService, workingService } from "../services/system.ts"
import { settingsFor } from "./support/system.ts"

/** An embedder that remembers how many texts each call carried, and in which lane. */
const counting = (inner: Embedder, refuse = false) => {
  const calls: number[] = []
  const lanes: string[] = []
  const embedder: Embedder = {
    model: inner.model,
    dims: inner.dims,
    embed: (texts, options) => {
      calls.push(texts.length)
      lanes.push(`${options?.priority ?? "query"}:${texts.length}`)
      return refuse ? Promise.reject(new Error("overloaded")) : inner.embed(texts)
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
  it("are embedded in one call for all those without a vector, and not again for the next query", async () => {
    let server: NatsServerProcess | undefined
    let client: WorkingMemoryClient | undefined
    let runtime: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined
    try {
      server = await startNatsServer()
      const s = settingsFor(server.url)
      const { embedder, calls } = counting(hashedEmbedder(64))
      const layer = Layer.mergeAll(
        workingService(s("wm-working")),
        gatewayService(s("wm-gateway")),
        substrateService(s("wm-substrate")),
        memoryService(s("wm-memory"), { models: EmbeddingProvider.offlineOnly(embedder) }),
      )
      runtime = ManagedRuntime.make(layer) as unknown as ManagedRuntime.ManagedRuntime<unknown, unknown>
      await runtime.runPromise(Effect.void)
      client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 10_000 })
      const agent = client.agent("batched")
      await agent.register({ role: "main" })
      const t0 = Date.UTC(2024, 2, 1, 9)
      for (let i = 0; i < 12; i++)
        await agent.record({
          origin: "USER",
          content: `Remark ${i} about the lease renewal.`,
          timestamp: t0 + i * 60_000,
        })

      const first = await agent.query("lease renewal", { limit: 5 })
      expect(first.results.length).toBeGreaterThan(0)
      // One call for the query, one for the twelve entries.
      expect([...calls].sort((a, b) => a - b)).toEqual([1, 12])

      calls.length = 0
      await agent.query("when is the renewal due", { limit: 5 })
      expect(calls).toEqual([1])
    } finally {
      await client?.close()
      await runtime?.dispose()
      await server?.stop()
    }
  }, 60_000)

  it("after a burst, a query embeds the 16 newest entries without a vector and leaves the rest to the background", async () => {
    const { embedder, lanes } = counting(hashedEmbedder(64))
    const system = await startWith(embedder)
    try {
      const agent = system.client.agent("burst")
      await recordRemarks(agent, 40)
      const first = await agent.query("lease renewal", { limit: 5 })
      expect(first.results.length).toBeGreaterThan(0)
      expect([...lanes].sort()).toEqual(["background:24", "query:1", "query:16"])
      // The background lane filled in the rest: the next query embeds only itself.
      lanes.length = 0
      await agent.query("when is the renewal due", { limit: 5 })
      expect(lanes).toEqual(["query:1"])
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
