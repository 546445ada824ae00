/**
 * The dashboard follows the log whatever it starts before: on a server where no service has created
 * the event stream yet it waits for it, and a dashboard started later rebuilds every agent from the log.
 */
import { Effect, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { Dashboard, DashboardSettings, dashboardService } from "../../services/dashboard/dashboard.ts"
import type { AgentSummary } from "../../services/dashboard/read-model.ts"
import { systemLayer } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { settingsFor } from "../support/system.ts"

const cleanups: Array<() => Promise<unknown>> = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
}, 60_000)

const startDashboard = async (url: string) => {
  const runtime = ManagedRuntime.make(
    dashboardService(settingsFor(url)("wm-dashboard"), DashboardSettings.make({ port: 0 })),
  )
  cleanups.push(() => runtime.dispose())
  return runtime.runPromise(Dashboard)
}

/** The agents the dashboard lists, once it has applied the log up to `seq`. */
const agentsOf = (url: string, seq: number): Promise<AgentSummary[]> =>
  eventually(`the dashboard to apply the log up to ${seq}`, async () => {
    const listed = (await (await fetch(`${url}api/agents`)).json()) as { agents: AgentSummary[]; lastSeq: number }
    return listed.lastSeq >= seq ? listed.agents : undefined
  })

describe("the dashboard's view of the log", () => {
  it("waits for the event stream when it starts first, and a later dashboard rebuilds every agent", async () => {
    const server = await startNatsServer()
    cleanups.push(() => server.stop())
    const early = await startDashboard(server.url)
    expect(await agentsOf(early.url, 0)).toEqual([])

    const services = ManagedRuntime.make(systemLayer(settingsFor(server.url)))
    cleanups.push(() => services.dispose())
    await services.runPromise(Effect.void)
    const client = await WorkingMemoryClient.connect({ servers: server.url })
    cleanups.push(() => client.close())
    const agent = client.agent("early-bird")
    await agent.register({ role: "custom", budget: 500 })
    const { seq } = await agent.record({ origin: "USER", content: "The dashboard was there first." })
    const usage = (await agent.view()).usage

    const seenEarly = await agentsOf(early.url, seq)
    expect(seenEarly.map((a) => [a.agentId, a.usage, a.budget])).toEqual([["early-bird", usage, 500]])

    const late = await startDashboard(server.url)
    expect(await agentsOf(late.url, seq)).toEqual(seenEarly)
  })
})
