/**
 * The dashboard in a real browser (Debian's chromium driven by playwright-core, headless) against the
 * real system: it shows an agent recorded through the SDK with its budget use, working view and built
 * context, updates live as the log grows, replays an earlier instant with the time slider (the view and
 * context `wm replay` rebuilds), shows the fade score parts in an entry's history, and asks for the
 * NATS credentials when it was started with them.
 */
import { ManagedRuntime } from "effect"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openConnection } from "../../cli/audit/log.ts"
import { replayAgent } from "../../cli/audit/replay.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import { launchChromium } from "../../dashboard/browser.ts"
import { ensureDashboardBundle } from "../../dashboard/bundle.ts"
import { contextOfView } from "../../domain/context-builder.ts"
import { runDemo } from "../../examples/demo.ts"
import { readOwnEvents } from "../../sdk/own-events.ts"
import { Dashboard, DashboardSettings, dashboardService } from "../../services/dashboard/dashboard.ts"
import type { AgentPage } from "../../services/dashboard/read-model.ts"
import { eventually } from "../support/eventually.ts"
import { settingsFor, startTestSystem, type TestSystem } from "../support/system.ts"

/** A first start on a machine builds the page and derives the embedder's cache, on a loaded machine slowly. */
const SLOW_START = 180_000

let system: TestSystem
let browser: Browser
let url: string
const runtimes: Array<ManagedRuntime.ManagedRuntime<unknown, unknown>> = []

const startDashboard = async (overrides: { user?: string; pass?: string } = {}) => {
  const runtime = ManagedRuntime.make(
    dashboardService(settingsFor(system.server.url, overrides)("wm-dashboard"), DashboardSettings.make({ port: 0 })),
  )
  runtimes.push(runtime as ManagedRuntime.ManagedRuntime<unknown, unknown>)
  return runtime.runPromise(Dashboard)
}

beforeAll(async () => {
  await ensureDashboardBundle()
  system = await startTestSystem()
  url = (await startDashboard()).url
  browser = await launchChromium()
}, SLOW_START)
afterAll(async () => {
  await browser?.close()
  for (const r of runtimes) await r.dispose()
  await system?.stop()
})

const open = async (agentId: string): Promise<Page> => {
  const page = await browser.newPage()
  await page.goto(`${url}?agent=${agentId}`)
  await page.getByTestId("agent-title").filter({ hasText: agentId }).waitFor()
  return page
}

/** Waits until the agent's column of raw entries holds (or no longer holds) a text. */
const rawColumnShows = (page: Page, text: string) =>
  page.getByTestId("rung-raw").getByTestId("entry").filter({ hasText: text }).waitFor({ state: "visible" })

const slideTo = async (page: Page, index: number) =>
  page.getByTestId("time-slider").evaluate((input, value) => {
    Object.assign(input, { value: String(value) })
    input.dispatchEvent(new Event("input", { bubbles: true }))
  }, index)

const pageAt = async (agentId: string, at?: number): Promise<AgentPage> =>
  (await (await fetch(`${url}api/agents/${agentId}${at === undefined ? "" : `?at=${at}`}`)).json()) as AgentPage

/** The agent's live page once the dashboard has followed the log to `seq`. */
const caughtUp = (agentId: string, seq: number): Promise<AgentPage> =>
  eventually(`the dashboard to follow ${agentId} up to ${seq}`, async () => {
    // Until the dashboard has seen the registration, the answer is a 404 without a range.
    const page = await pageAt(agentId)
    return (page.range?.lastSeq ?? 0) >= seq ? page : undefined
  })

describe("the dashboard in a browser", () => {
  it("shows an agent recorded through the SDK: budget use against τ, entries by rung, the built context", async () => {
    const agent = system.client.agent("planner")
    await agent.register({ role: "custom", budget: 400 })
    await agent.record({ origin: "USER", content: "Book the venue for the offsite in March." })
    await agent.record({ origin: "INTERNAL", content: "Check which rooms take forty people." })

    const page = await browser.newPage()
    await page.goto(url)
    const row = page.locator('[data-testid="agent-row"][data-agent="planner"]')
    await row.waitFor()
    const usage = (await agent.view()).usage
    // The page may load before the dashboard has followed the second entry: it catches up live.
    await row
      .getByTestId("agent-usage")
      .filter({ hasText: `${usage}/400 tok` })
      .waitFor()
    expect(await row.textContent()).toContain("τ 80%")
    await row.click()
    await rawColumnShows(page, "Book the venue for the offsite in March.")
    await rawColumnShows(page, "Check which rooms take forty people.")
    expect(await page.getByTestId("context-preview").textContent()).toContain(
      "thought: Check which rooms take forty people.",
    )
    expect(await page.getByTestId("context-tokens").textContent()).toMatch(/^\d+\/400 tokens$/)
    await page.close()
  })

  it("updates live when a new entry is recorded", async () => {
    const agent = system.client.agent("live-agent")
    await agent.register({ role: "main" })
    await agent.record({ origin: "USER", content: "First things first: the agenda." })
    const page = await open("live-agent")
    await rawColumnShows(page, "First things first: the agenda.")

    await agent.record({ origin: "ADVISOR", content: "The user wants this done before lunch." })
    await rawColumnShows(page, "The user wants this done before lunch.")
    await page.getByTestId("timeline-item").filter({ hasText: "The user wants this done before lunch." }).waitFor()
    await page
      .getByTestId("context-preview")
      .filter({ hasText: "advisor: The user wants this done before lunch." })
      .waitFor()
    await page.close()
  })

  it("keeps an event that arrives live while the agent's timeline is still loading", async () => {
    const agent = system.client.agent("slow-timeline")
    await agent.register({ role: "main" })
    await agent.record({ origin: "USER", content: "Start with the venue." })
    const page = await browser.newPage()
    // The timeline is read before the next entry is recorded, and reaches the page only after it arrived live.
    let fetched!: () => void
    const timelineRead = new Promise<void>((resolve) => {
      fetched = resolve
    })
    let release!: () => void
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    await page.route("**/api/agents/slow-timeline/timeline*", async (route) => {
      const response = await route.fetch()
      fetched()
      await released
      await route.fulfill({ response })
    })
    await page.goto(`${url}?agent=slow-timeline`)
    await timelineRead
    await agent.record({ origin: "ADVISOR", content: "Catering arrives at noon." })
    await rawColumnShows(page, "Catering arrives at noon.")
    release()
    await page.getByTestId("timeline-item").filter({ hasText: "Start with the venue." }).waitFor()
    await page.getByTestId("timeline-item").filter({ hasText: "Catering arrives at noon." }).waitFor()
    await page.close()
  })

  it("replays an earlier view and its context with the time slider, as wm replay rebuilds them", async () => {
    const agent = system.client.agent("replayer")
    await agent.register({ role: "custom", budget: 300 })
    await agent.record({ origin: "USER", content: "We start with the budget review." })
    await new Promise((r) => setTimeout(r, 20))
    await agent.record({ origin: "USER", content: "Then the hiring plan for the second half." })
    const page = await open("replayer")
    await rawColumnShows(page, "Then the hiring plan for the second half.")

    // Position 1: just after the first entry (position 0 is the registration).
    await slideTo(page, 1)
    await page.getByTestId("as-of").filter({ hasNotText: "live" }).waitFor()
    await page.getByTestId("context-preview").filter({ hasNotText: "hiring plan" }).waitFor()
    await rawColumnShows(page, "We start with the budget review.")
    expect(await page.getByTestId("rung-raw").getByTestId("entry").count()).toBe(1)

    await page.getByRole("button", { name: "back to live" }).click()
    await rawColumnShows(page, "Then the hiring plan for the second half.")
    await page.close()

    // The page's replay is the one `wm replay --at` makes, context and all.
    const live = await pageAt("replayer")
    const at = live.instants[1]!.at
    const replayed = await pageAt("replayer", at)
    const nc = await openConnection({ servers: system.server.url })
    try {
      const audit = await replayAgent(nc, "replayer", { at })
      expect(replayed.context).toEqual(contextOfView(audit.view!))
      expect(replayed.applied).toBe(audit.applied)
    } finally {
      await nc.close()
    }
  })

  it("shows each fade decision's score parts in an entry's history", async () => {
    const agent = system.client.agent("fader")
    await runDemo(agent, { log: () => undefined })
    // Fading goes on after the demo's last answer: wait for its first move to key points.
    const isFirstMove = (e: { readonly event: MemoryEvent }) => e.event._tag === "RungChanged" && e.event.to === 1
    const events = await eventually("a move to key points in the demo's log", async () => {
      const read = await readOwnEvents(system.client, "fader")
      return read.some(isFirstMove) ? read : undefined
    })
    const index = events.findIndex(isFirstMove)
    expect(index).toBeGreaterThan(0)
    const decision = events[index]!.event
    if (decision._tag !== "RungChanged") throw new Error("not a rung change")

    // The dashboard follows the log on its own: let it reach the demo's last event before the page loads.
    const live = await caughtUp("fader", events[events.length - 1]!.seq)
    const page = await open("fader")
    await slideTo(
      page,
      live.instants.findIndex((i) => i.seq === events[index]!.seq),
    )
    const card = page.getByTestId("rung-keypoints").locator(`[data-entry-id="${decision.entryId}"]`)
    await card.click()
    const row = page.getByTestId("history-item").filter({ hasText: "RungChanged" }).first()
    await row.waitFor()
    expect(await row.getByTestId("score-pressure").textContent()).toBe(decision.score.parts.pressure.toFixed(3))
    expect(await row.getByTestId("score-age").textContent()).toBe(decision.score.parts.age.toFixed(3))
    expect(await row.getByTestId("score-total").textContent()).toBe(decision.score.total.toFixed(3))
    await page.close()
  })
})

describe("the dashboard with credentials", () => {
  it("requires the NATS user and password it was started with", async () => {
    const guarded = await startDashboard({ user: "operator", pass: "s3cret" })
    expect((await fetch(`${guarded.url}api/agents`)).status).toBe(401)
    const wrong = { authorization: `Basic ${Buffer.from("operator:guess").toString("base64")}` }
    expect((await fetch(`${guarded.url}api/agents`, { headers: wrong })).status).toBe(401)

    const context = await browser.newContext({ httpCredentials: { username: "operator", password: "s3cret" } })
    const page = await context.newPage()
    await page.goto(`${guarded.url}?agent=planner`)
    await page.locator('[data-testid="agent-row"][data-agent="planner"]').waitFor()
    await context.close()
  })
})
