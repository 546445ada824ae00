/**
 * The metrics a system composed as `npm start` composes it serves at `/metrics`: request durations by
 * operation and outcome, projection lag per partition, leases and connections, in a format promtool
 * accepts; and docs/metrics.md lists exactly the metrics contracts/metrics.ts declares.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { metricNames, metrics } from "../../contracts/metrics.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { processStarted } from "../../services/platform/observability/observability.ts"
import { systemLayer } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { observedOnFreePort, promtoolProblems, readyz, sample, scrape } from "../support/ops.ts"
import { settingsFor } from "../support/system.ts"

let server: NatsServerProcess
let runtime: ManagedRuntime.ManagedRuntime<unknown, unknown>
let client: WorkingMemoryClient
let url: string

beforeAll(async () => {
  server = await startNatsServer()
  const observed = await observedOnFreePort("system")
  url = observed.url
  runtime = ManagedRuntime.make(
    processStarted.pipe(Layer.provideMerge(systemLayer(settingsFor(server.url))), Layer.provide(observed.layer)),
  ) as ManagedRuntime.ManagedRuntime<unknown, unknown>
  await runtime.runPromise(Effect.void)
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 5_000 })
})

afterAll(async () => {
  await client?.close()
  await runtime?.dispose()
  await server?.stop()
})

describe("a composed system's /metrics", () => {
  it("times each request by operation and outcome, and says each partition's lag", async () => {
    await eventually("the system to be ready", async () => ((await readyz(url)).status === 200 ? true : undefined))
    const agent = client.agent("metrics-agent")
    await agent.register({ role: "main" })
    await agent.beginStep()
    await agent.record({ origin: "USER", content: "the operator scrapes every service" })
    const refused = await agent.beginStep().then(
      () => null,
      (error: unknown) => error,
    )
    expect(refused).toMatchObject({ _tag: "InvalidState" })
    await agent.buildContext()

    const partition = String(partitionOf("metrics-agent"))
    const text = await eventually("the working service to have applied the writes", async () => {
      const text = await scrape(url)
      return sample(text, "wm_projection_lag_events", { service: "working", partition }) === 0 ? text : undefined
    })
    const count = (service: string, operation: string, outcome: string) =>
      sample(text, "wm_request_duration_seconds_count", { service, operation, outcome })
    expect(count("gateway", "registerAgent", "ok")).toBe(1)
    expect(count("gateway", "beginStep", "ok")).toBe(1)
    expect(count("gateway", "beginStep", "InvalidState")).toBe(1)
    expect(count("gateway", "recordEntry", "ok")).toBe(1)
    expect(count("working", "buildContext", "ok")).toBe(1)
    for (const service of ["gateway", "working", "fade", "memory"])
      expect(sample(text, "wm_projection_lag_events", { service, partition }), service).toBe(0)
    for (const service of ["gateway", "working", "fade", "memory", "substrate"]) {
      expect(sample(text, "wm_nats_connected", { service }), service).toBe(1)
      expect(sample(text, "wm_partitions_without_owner", { service }), service).toBe(0)
    }
    expect(sample(text, "wm_partitions_owned", { service: "working" })).toBe(16)
  })

  it("passes promtool check metrics, with every declared metric under its help", async () => {
    const text = await scrape(url)
    expect(promtoolProblems(text)).toBe("")
    for (const m of Object.values(metrics)) expect(text).toContain(`# HELP ${m.name} ${m.help}`)
  })

  it("serves /healthz while the process runs, and nothing else but the three paths", async () => {
    expect((await fetch(`${url}/healthz`)).status).toBe(200)
    expect((await fetch(`${url}/nothing`)).status).toBe(404)
  })
})

describe("docs/metrics.md", () => {
  it("lists exactly the metrics of contracts/metrics.ts, each with its labels", () => {
    const doc = readFileSync(join(import.meta.dirname, "..", "..", "docs", "metrics.md"), "utf8")
    const rows = doc
      .split("\n")
      .filter((line) => line.startsWith("| `wm_"))
      .map((line) => line.split("|").map((cell) => cell.trim()))
    const listed = rows.map((cells) => cells[1]!.replaceAll("`", ""))
    expect([...listed].sort()).toEqual([...metricNames].sort())
    for (const cells of rows) {
      const declared = Object.values(metrics).find((m) => m.name === cells[1]!.replaceAll("`", ""))!
      const labels = cells[3]!
        .replaceAll("`", "")
        .split(/,\s*/)
        .filter((l) => l !== "" && l !== "—")
      expect(labels, declared.name).toEqual([...declared.labels])
      expect(cells[2], declared.name).toBe(declared.kind)
    }
  })
})
