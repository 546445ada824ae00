/**
 * `npm run dashboard:screenshot`: docs/dashboard.png, the dashboard after the README's demo, on a
 * throw-away system (its own nats-server on a free port, a temporary store).
 */
import { join } from "node:path"
import { Effect, Layer, ManagedRuntime } from "effect"
import { runDemo } from "../examples/demo.ts"
import { startNatsServer } from "../infra/nats-server.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import { Dashboard, DashboardSettings, dashboardService } from "../services/dashboard/dashboard.ts"
import { NatsSettings } from "../services/platform/nats/settings.ts"
import { systemLayer } from "../services/system.ts"
import { launchChromium } from "./browser.ts"
import { ensureDashboardBundle } from "./bundle.ts"

const out = process.argv[2] ?? join(import.meta.dirname, "..", "docs", "dashboard.png")

await ensureDashboardBundle()
const server = await startNatsServer()
const settings = (name: string) => NatsSettings.make({ servers: [server.url], name })
const runtime = ManagedRuntime.make(
  Layer.merge(systemLayer(settings), dashboardService(settings("wm-dashboard"), DashboardSettings.make({ port: 0 }))),
)
try {
  const dashboard = await runtime.runPromise(
    Effect.gen(function* () {
      return yield* Dashboard
    }),
  )
  const client = await WorkingMemoryClient.connect({ servers: server.url })
  const agent = client.agent("trip-planner")
  await runDemo(agent, { log: () => undefined })
  await client.close()
  const browser = await launchChromium()
  const page = await browser.newPage({ viewport: { width: 1440, height: 1100 } })
  await page.goto(`${dashboard.url}?agent=trip-planner`)
  await page.getByTestId("entry").first().waitFor()
  // Back to the instant of the last move to key points, and that entry's history with its score parts.
  const api = `${dashboard.url}api/agents/trip-planner`
  const { items } = (await (await fetch(`${api}/timeline`)).json()) as {
    items: Array<{ seq: number; type: string; entryId: string | null; detail: string }>
  }
  const { instants } = (await (await fetch(api)).json()) as { instants: Array<{ seq: number }> }
  const move = items.findLast((i) => i.type === "RungChanged" && i.detail.includes("→ 1"))
  if (move) {
    await page.getByTestId("time-slider").evaluate(
      (input, index) => {
        Object.assign(input, { value: String(index) })
        input.dispatchEvent(new Event("input", { bubbles: true }))
      },
      instants.findIndex((i) => i.seq === move.seq),
    )
    await page.getByTestId("rung-keypoints").locator(`[data-entry-id="${move.entryId}"]`).click()
    await page.getByTestId("history-item").filter({ hasText: "RungChanged" }).first().waitFor()
  }
  await page.screenshot({ path: out, fullPage: true })
  await browser.close()
  console.log(`Wrote ${out}`)
} finally {
  await runtime.dispose()
  await server.stop()
}
