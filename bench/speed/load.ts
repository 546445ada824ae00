import { NotCaughtUp } from "../../contracts/errors.ts"
import { apiSubject } from "../../contracts/subjects.ts"
import { startNatsServer } from "../../infra/nats-server.ts"
import { type AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { memoryQuestion, realisticEntry } from "../support/realistic-entries.ts"
import { READINESS_PROBE, waitUntilServed } from "./replay.ts"
import { createBenchTopology, spawnService, stopChild } from "./services.ts"
import { percentile } from "./stats.ts"

export interface LoadSizes {
  readonly agents: number
  /** Entries each agent records, one after another. */
  readonly entriesPerAgent: number
}

export interface LoadFigures {
  readonly agents: number
  readonly records: number
  readonly queries: number
  readonly recordP50Ms: number
  readonly recordP99Ms: number
  readonly queryP50Ms: number
  readonly queryP99Ms: number
}

/** Waits until the agent's working view holds its last write. */
const untilVisible = async (agent: AgentClient) => {
  for (;;) {
    try {
      return await agent.view()
    } catch (error) {
      if (!(error instanceof NotCaughtUp)) throw error
    }
  }
}

export const measureLoad = async (sizes: LoadSizes, log: (line: string) => void): Promise<LoadFigures> => {
  const server = await startNatsServer()
  let client: WorkingMemoryClient | undefined
  let services: ReturnType<typeof spawnService> | undefined
  try {
    client = await WorkingMemoryClient.connect({ servers: server.url, name: "bench-load", timeoutMs: 30_000 })
    await createBenchTopology(client.nc, server.url)
    services = spawnService("bench/speed/system-runner.ts", server.url)
    await Promise.race([
      Promise.all(
        ["view.get", "memory.query"].map((op) => waitUntilServed(client!.nc, apiSubject(READINESS_PROBE, op))),
      ),
      services.exited(),
    ])
    const writers = Array.from({ length: sizes.agents }, (_, k) => client!.agent(`load-${k}`))
    await Promise.all(writers.map((a) => a.register({ role: "supervisor" })))
    log(`load: ${sizes.agents} agents recording ${sizes.entriesPerAgent} entries each, memory.query alongside...`)

    const recordMs: number[] = []
    const queryMs: number[] = []
    let recording = true
    const record = async (agent: AgentClient, k: number) => {
      for (let i = 0; i < sizes.entriesPerAgent; i++) {
        const entry = realisticEntry(k * sizes.entriesPerAgent + i)
        const start = performance.now()
        await agent.record({
          origin: entry.origin,
          content: entry.content,
          tags: [...entry.tags],
          emotionalWeight: entry.emotionalWeight,
        })
        await untilVisible(agent)
        recordMs.push(performance.now() - start)
      }
    }
    // Queries from clients of their own, which do not wait for the writers' last writes.
    const readers = Array.from({ length: sizes.agents }, (_, k) => client!.agent(`load-${k}`))
    const query = async () => {
      for (let i = 0; recording; i++) {
        const start = performance.now()
        await readers[i % readers.length]!.query(memoryQuestion(i), { limit: 10 })
        queryMs.push(performance.now() - start)
      }
    }
    const querying = query()
    await Promise.all(writers.map(record)).finally(() => {
      recording = false
    })
    await querying
    if (queryMs.length === 0) throw new Error("no memory.query answered while the agents recorded")
    return {
      agents: sizes.agents,
      records: recordMs.length,
      queries: queryMs.length,
      recordP50Ms: percentile(recordMs, 50),
      recordP99Ms: percentile(recordMs, 99),
      queryP50Ms: percentile(queryMs, 50),
      queryP99Ms: percentile(queryMs, 99),
    }
  } finally {
    await client?.close()
    if (services) await stopChild(services.child)
    await server.stop()
  }
}
