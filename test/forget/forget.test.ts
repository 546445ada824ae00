/**
 * A verifiable forget against a real server with every service running:
 * afterwards no query, replay or substrate read returns the content.
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { afterAll, beforeAll, expect, it } from "vitest"
import { readOwnEvents } from "../../sdk/own-events.ts"
import { eventually } from "../support/eventually.ts"
import { recordThenDemote } from "../support/fillers.ts"
import { cuesOf, readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const run = promisify(execFile)
let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

const wm = (...args: string[]) =>
  run("node_modules/.bin/node", ["cli/wm.ts", ...args, "--server", system.server.url], { cwd: process.cwd() })

const SECRET = "The safe combination is 31-04-77 behind the painting."
const T0 = Date.UTC(2024, 1, 1)

it("forgetting an entry removes its content from the log, every projection, the substrate and replay", {
  timeout: 150_000,
}, async () => {
  const agent = system.client.agent("forgetful")
  await agent.register({ role: "custom", budget: 150 })
  const { entryId } = await agent.record({ origin: "USER", content: SECRET, timestamp: T0 })
  const kept = await agent.record({ origin: "USER", content: "The garden gate squeaks.", timestamp: T0 + 1 })
  for (let i = 0; i < 25; i++)
    await agent.record({
      origin: "USER",
      content: `Ordinary remark ${i} about the weather.`,
      timestamp: T0 + 60_000 * (i + 2),
    })
  // Demoted: the content now lives in long-term and the substrate as well.
  await eventually(
    "demotion",
    async () =>
      (await readLog(system.server.url)).some((s) => s.event._tag === "EntryDemoted" && s.event.entryId === entryId),
    20_000,
  )
  agent.lastSeq = Math.max(...(await readLog(system.server.url)).map((s) => s.seq))
  expect((await agent.raw(entryId)).content).toBe(SECRET)
  expect((await agent.query("safe combination painting")).results.some((r) => r.entryId === entryId)).toBe(true)

  const { stdout } = await wm("forget", "--agent", "forgetful", "--entry", entryId, "--json")
  const forgotten = JSON.parse(stdout) as { purged: number; tombstoneSeq: number; recorded: boolean; complete: boolean }
  // The command stored the tombstone and saw the erasure complete; the records themselves may have been erased by
  // it or by the running system's eraser, whichever came first (`purged` counts this run's only).
  expect(forgotten.recorded).toBe(true)
  expect(forgotten.complete).toBe(true)
  agent.lastSeq = forgotten.tombstoneSeq

  // The log holds only the tombstone for that entry, and nothing anywhere carries the content.
  const log = await readLog(system.server.url)
  expect(log.filter((s) => "entryId" in s.event && s.event.entryId === entryId).map((s) => s.event._tag)).toEqual([
    "EntryForgotten",
  ])
  expect(log.some((s) => JSON.stringify(s.event).includes("31-04-77"))).toBe(false)
  // Projections: query, view, substrate.
  const { results } = await agent.query("safe combination painting", { limit: 50 })
  expect(results.some((r) => r.entryId === entryId || r.text.includes("31-04-77"))).toBe(false)
  expect((await agent.view()).entries.some((e) => e.id === entryId)).toBe(false)
  await eventually(
    "the substrate to forget",
    async () =>
      await agent.raw(entryId).then(
        () => false,
        () => true,
      ),
    20_000,
  )
  expect((await agent.raw(kept.entryId)).content).toBe("The garden gate squeaks.")
  // Replay at any instant never shows it.
  const replayed = await wm("replay", "--agent", "forgetful", "--at", String(Date.now()), "--entries", "all", "--json")
  expect(replayed.stdout).not.toContain("31-04-77")
  // A restarted system rebuilds without it.
  await system.restartServices()
  const after = await agent.query("safe combination painting", { limit: 50 })
  expect(after.results.some((r) => r.entryId === entryId)).toBe(false)
  // And the audit agrees: every projection it can rebuild matches the (purged) log.
  await eventually(
    "verify to pass",
    async () =>
      await wm("verify").then(
        () => true,
        () => false,
      ),
    20_000,
  )
  expect((await wm("verify")).stdout).toMatch(/ok {4}substrate: \d+ recorded entries compared/)
})

it("forgetting an entry recalled as a cue of the open step takes its cue out of the step, and leaves the recall's other cues", {
  timeout: 120_000,
}, async () => {
  const agent = system.client.agent("forgets-a-cue")
  await agent.register({ role: "custom", budget: 200 })
  let t = T0
  const clock = { next: () => (t += 60_000) }
  const code = await recordThenDemote(
    agent,
    system.server.url,
    "The gym locker code is 5-5-9-2, on the blue door.",
    clock,
  )
  const hours = await recordThenDemote(agent, system.server.url, "The gym locker room closes at ten on Sundays.", clock)
  agent.lastSeq = Math.max(...(await readLog(system.server.url)).map((s) => s.seq))

  const { stepId } = await agent.beginStep({ focus: { query: "what do I need to know about the gym locker?" } })
  const before = await agent.buildContext({ stepId })
  expect(before.items.filter((i) => i.cue).map((i) => i.entryId)).toEqual(expect.arrayContaining([code, hours]))
  const recall = (await readLog(system.server.url)).find(
    (s) => s.event._tag === "CuesRehydrated" && s.event.stepId === stepId,
  )!
  expect(cuesOf([recall]).map((c) => c.entryId)).toEqual(expect.arrayContaining([code, hours]))

  const { stdout } = await wm("forget", "--agent", "forgets-a-cue", "--entry", code, "--json")
  const forgotten = JSON.parse(stdout) as { tombstoneSeq: number; complete: boolean }
  expect(forgotten.complete).toBe(true)
  agent.lastSeq = forgotten.tombstoneSeq

  // The open step's context: the other cue stays, the forgotten one is gone.
  const after = await agent.buildContext({ stepId })
  expect(after.items.some((i) => i.entryId === code)).toBe(false)
  expect(after.text).not.toContain("5-5-9-2")
  expect(after.items.find((i) => i.entryId === hours)).toMatchObject({ cue: true })
  // The recall's record stays for its other cues; read back, it holds the forgotten entry's cue no more.
  const reread = (await readLog(system.server.url)).find((s) => s.seq === recall.seq)!
  expect(cuesOf([reread]).map((c) => c.entryId)).toEqual(
    cuesOf([recall])
      .map((c) => c.entryId)
      .filter((id) => id !== code),
  )
  expect((await readLog(system.server.url)).some((s) => JSON.stringify(s.event).includes("5-5-9-2"))).toBe(false)
  // The running services, which opened the recall with every cue's key before the forget, no longer open its cue:
  // the agent's own events, read through them, hold the recall without it.
  await eventually(
    "the services to let go of the forgotten entry's key",
    async () => {
      const own = await readOwnEvents(system.client, "forgets-a-cue")
      return !JSON.stringify(own).includes("5-5-9-2") && own.some((e) => e.event._tag === "CuesRehydrated")
    },
    20_000,
  )
  // Rebuilt from the log, the open step's view has the other cue and not the forgotten one.
  await system.restartServices()
  const rebuilt = await agent.buildContext({ stepId })
  expect(rebuilt.text).not.toContain("5-5-9-2")
  expect(rebuilt.items.find((i) => i.entryId === hours)).toMatchObject({ cue: true })
  const replayed = await wm(
    "replay",
    "--agent",
    "forgets-a-cue",
    "--at",
    String(Date.now()),
    "--entries",
    "all",
    "--json",
  )
  expect(replayed.stdout).not.toContain("5-5-9-2")
  await agent.endStep(stepId)
})

it("forgetting an agent removes the agent and everything it recorded", { timeout: 150_000 }, async () => {
  const agent = system.client.agent("vanishing")
  await agent.register({ role: "main" })
  const { entryId } = await agent.record({ origin: "USER", content: "My passport number is X1234567." })
  await wm("forget", "--agent", "vanishing")
  const log = await readLog(system.server.url)
  expect(log.filter((s) => s.event.agentId === "vanishing").map((s) => s.event._tag)).toEqual(["AgentForgotten"])
  await eventually(
    "the agent to be gone",
    async () =>
      await agent.view().then(
        () => false,
        (e: { _tag?: string }) => e._tag === "AgentNotFound",
      ),
    20_000,
  )
  await eventually(
    "the substrate to forget",
    async () =>
      await agent.raw(entryId).then(
        () => false,
        () => true,
      ),
    20_000,
  )
  // The id can be registered again, as a new agent with an empty memory.
  const again = await agent.register({ role: "supervisor" })
  expect(again.budget).toBe(12_000)
  expect((await agent.view()).entries).toEqual([])
})
