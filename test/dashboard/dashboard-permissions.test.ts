/**
 * Deployed apart (services/dashboard/main.ts), the dashboard needs no more than the read-only audit
 * user of the generated NATS permissions (infra/auth.ts): it follows the log with those rights, and
 * asks every visitor for the same user and password.
 */
import { Effect, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { natsAuth } from "../../infra/auth.ts"
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
})

describe("the dashboard under the generated permissions", () => {
  it("follows the log as the audit user and asks visitors for that login", async () => {
    const auth = natsAuth({ agents: ["planner"] })
    const server = await startNatsServer({ config: auth.config })
    cleanups.push(() => server.stop())
    const admin = auth.admin!
    const services = ManagedRuntime.make(systemLayer(settingsFor(server.url, { user: admin.user, pass: admin.pass })))
    cleanups.push(() => services.dispose())
    await services.runPromise(Effect.void)
    const agentLogin = auth.agent("planner")
    const client = await WorkingMemoryClient.connect({ servers: server.url, ...agentLogin })
    cleanups.push(() => client.close())
    await client.agent("planner").register({ role: "main" })

    const audit = auth.service("audit")
    const runtime = ManagedRuntime.make(
      dashboardService(
        settingsFor(server.url, { user: audit.user, pass: audit.pass })("wm-dashboard"),
        DashboardSettings.make({ port: 0 }),
      ),
    )
    cleanups.push(() => runtime.dispose())
    const dashboard = await runtime.runPromise(Dashboard)
    expect((await fetch(`${dashboard.url}api/agents`)).status).toBe(401)
    const login = { authorization: `Basic ${Buffer.from(`${audit.user}:${audit.pass}`).toString("base64")}` }
    const agents = await eventually("the dashboard to list an agent", async () => {
      const listed = (await (await fetch(`${dashboard.url}api/agents`, { headers: login })).json()) as {
        agents: AgentSummary[]
      }
      return listed.agents.length > 0 ? listed.agents : undefined
    })
    expect(agents.map((a) => a.agentId)).toEqual(["planner"])
  })
})
