/**
 * The audit CLI (`cli/wm.ts`) run as a child process against a real
 * nats-server with the services running: history, replay to an instant,
 * and verify on a healthy system and on one whose live view no longer
 * matches its log.
 */

import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { jetstreamManager } from "@nats-io/jetstream"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { agentStepSubject, EVENTS_STREAM, entrySubject } from "../../contracts/subjects.ts"
import { appendEvents } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const ROOT = fileURLToPath(new URL("../..", import.meta.url))
const NODE = fileURLToPath(new URL("../../node_modules/.bin/node", import.meta.url))

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const wm = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Run> =>
  new Promise((resolve, reject) => {
    const child = spawn(NODE, ["cli/wm.ts", ...args], {
      cwd: ROOT,
      env: { ...process.env, NATS_URL: system.server.url, WM_PROGRESS_INTERVAL_MS: "60000", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

let system: TestSystem
const AGENT = "audited"
const FIRST = "Budget for the Lisbon trip is 300 euros per person."
const SECOND = "Prefer Cascais over Sintra: the promenade is flat."
let first: { entryId: string; seq: number }
let second: { entryId: string; seq: number }
let between: number
let readSeq: number
let referenceSeq: number
let rungSeq: number

beforeAll(async () => {
  // The working tier alone: no fade worker or retrieval appends events while the log is read.
  system = await startTestSystem({}, { fade: false, memory: false })
  const agent = system.client.agent(AGENT)
  await agent.register({ role: "custom", budget: 2_000 })
  first = await agent.record({ origin: "USER", content: FIRST, requestId: "entry-first", tags: ["budget"] })
  await sleep(30)
  between = Date.now()
  await sleep(30)
  second = await agent.record({ origin: "INTERNAL", content: SECOND, requestId: "entry-second" })
  const { stepId } = await agent.beginStep({ stepId: "step-1" })
  readSeq = (await agent.buildContext({ stepId })).seq
  referenceSeq = (await agent.reference(stepId, [first.entryId])).seq
  await agent.endStep(stepId)
  // A fade decision about the first entry, appended as the fade worker would.
  const rung: EventOf<"RungChanged"> = {
    _tag: "RungChanged",
    v: 1,
    eventId: `${AGENT}:fade:rung-1`,
    agentId: AGENT,
    at: Date.now(),
    causationId: null,
    correlationId: null,
    entryId: first.entryId,
    from: 0,
    to: 1,
    text: "Budget: 300 euros per person.",
    tokens: 14,
    score: {
      total: 0.7,
      parts: { age: 0.4, frequency: -0.1, emotion: 0, focus: -0.05, pressure: 0.45 },
      trigger: "threshold",
      threshold: 0.5,
      usage: 0.9,
      tau: 0.8,
      now: Date.now(),
    },
    producer: { kind: "extractive", model: "key-points", fallbackReason: null, attempts: 1 },
  }
  rungSeq = await appendEvents(system.server.url, [rung])
  // Another agent's activity must not leak into the history or replay.
  const other = system.client.agent("bystander")
  await other.register({ role: "main" })
  await other.record({ origin: "USER", content: "Unrelated chatter.", requestId: "entry-first" })
})
afterAll(async () => system?.stop())

describe("wm history", () => {
  it("lists every event of an entry in stream order: recorded, read, referenced, rung change", async () => {
    const run = await wm(["history", first.entryId, "--agent", AGENT, "--json"])
    expect(run.code).toBe(0)
    const out = JSON.parse(run.stdout) as {
      agentId: string
      events: Array<{ seq: number; type: string; at: string; subject: string }>
    }
    expect(out.agentId).toBe(AGENT)
    expect(out.events.map((e) => [e.seq, e.type])).toEqual([
      [first.seq, "EntryRecorded"],
      [readSeq, "EntriesRead"],
      [referenceSeq, "EntriesReferenced"],
      [rungSeq, "RungChanged"],
    ])
    for (const e of out.events) expect(e.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(out.events.map((e) => e.subject)).toEqual([
      entrySubject(AGENT, first.entryId),
      agentStepSubject(AGENT),
      agentStepSubject(AGENT),
      entrySubject(AGENT, first.entryId),
    ])
  })

  it("prints times, what each read served, and the fade score with its parts", async () => {
    const run = await wm(["history", first.entryId, "--agent", AGENT])
    expect(run.code).toBe(0)
    const lines = run.stdout.trim().split("\n")
    expect(lines[0]).toBe(`Entry ${first.entryId} of agent ${AGENT}: 4 events`)
    const events = lines.slice(2)
    expect(events).toHaveLength(4)
    expect(events[0]).toMatch(
      new RegExp(
        `^  #\\s*${first.seq}  \\S+Z  recorded\\s+USER, \\d+ tokens, emotional weight 0, tags budget: "${FIRST}"$`,
      ),
    )
    expect(events[1]).toMatch(
      /read\s+served as raw in a context of \d+\/2000 tokens with 1 other entry \(step step-1\)$/,
    )
    expect(events[2]).toMatch(/referenced\s+used by the agent in step step-1$/)
    expect(events[3]).toContain("rung 0→1")
    expect(events[3]).toContain("key points of 14 tokens by extractive (key-points)")
    expect(events[3]).toContain(
      "score 0.700 = age +0.400, frequency -0.100, emotion +0.000, focus -0.050, pressure +0.450; crossed the threshold 0.500",
    )
  })

  it("finds the agent from the log when --agent is omitted, and keeps other entries' reads apart", async () => {
    const run = await wm(["history", second.entryId, "--json"])
    expect(run.code).toBe(0)
    const out = JSON.parse(run.stdout) as { agentId: string; events: Array<{ type: string }> }
    expect(out.agentId).toBe(AGENT)
    // Served in the same build, never referenced, never faded.
    expect(out.events.map((e) => e.type)).toEqual(["EntryRecorded", "EntriesRead"])
  })

  it("asks for --agent when two agents use the same entry id, and says when there is nothing", async () => {
    const ambiguous = await wm(["history", "entry-first"])
    expect(ambiguous.code).toBe(1)
    expect(ambiguous.stderr).toContain("used by several agents (audited, bystander); name one with --agent")
    const missing = await wm(["history", "no-such-entry"])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("no events for entry 'no-such-entry'")
  })
})

describe("wm replay", () => {
  it("at a time between two records, shows the first entry and not the second, in the view and the context", async () => {
    const run = await wm(["replay", "--agent", AGENT, "--at", new Date(between).toISOString(), "--json"])
    expect(run.code).toBe(0)
    const out = JSON.parse(run.stdout) as {
      applied: number
      view: { entries: Array<{ id: string; content: string }>; usage: number }
      context: { text: string; items: Array<{ entryId: string }> }
    }
    expect(out.applied).toBe(2) // registered, first recorded
    expect(out.view.entries.map((e) => e.id)).toEqual([first.entryId])
    expect(out.context.items.map((i) => i.entryId)).toEqual([first.entryId])
    expect(out.context.text).toContain(FIRST)
    expect(out.context.text).not.toContain(SECOND)

    const text = await wm(["replay", "--agent", AGENT, "--at", String(between)])
    expect(text.code).toBe(0)
    expect(text.stdout).toContain(`│ `)
    expect(text.stdout).toContain(FIRST)
    expect(text.stdout).not.toContain(SECOND)
  })

  it("by stream sequence, shows the state right after that event, exactly as the live view had it", async () => {
    const run = await wm(["replay", "--agent", AGENT, "--seq", String(referenceSeq), "--json"])
    expect(run.code).toBe(0)
    const out = JSON.parse(run.stdout) as {
      view: {
        entries: Array<{ id: string; referenceCount: number; citationCount: number; rung: number }>
        step: { stepId: string } | null
      }
      context: { items: Array<{ entryId: string; form: string }> }
    }
    expect(out.view.step?.stepId).toBe("step-1")
    expect(out.view.entries.map((e) => [e.id, e.rung, e.referenceCount, e.citationCount])).toEqual([
      [first.entryId, 0, 1, 1],
      [second.entryId, 0, 1, 0],
    ])
    expect(out.context.items.map((i) => [i.entryId, i.form])).toEqual([
      [first.entryId, "raw"],
      [second.entryId, "raw"],
    ])
  })

  it("rebuilds the context a focused build served: same ranking, same text", async () => {
    const agent = system.client.agent("focused")
    await agent.register({ role: "custom", budget: 60 })
    const oldest = await agent.record({
      origin: "USER",
      content: "The hotel in Lisbon must have a quiet room and breakfast.",
    })
    for (const topic of ["the weather forecast", "a football match", "the train timetable", "a birthday present"]) {
      await agent.record({ origin: "USER", content: `Unrelated: we chatted about ${topic} for a while today.` })
    }
    const { stepId } = await agent.beginStep({ focus: { task: "book the hotel in Lisbon" } })
    const built = await agent.buildContext({ stepId })
    // The focus ranks the oldest entry in although the budget holds only a few: recency alone would leave it out.
    expect(built.items.map((i) => i.entryId)).toContain(oldest.entryId)
    expect(built.omitted).toBeGreaterThan(0)

    const run = await wm(["replay", "--agent", "focused", "--seq", String(built.seq - 1), "--json"])
    expect(run.code).toBe(0)
    const out = JSON.parse(run.stdout) as {
      context: { text: string; tokens: number; items: unknown[]; omitted: number }
    }
    expect(out.context.text).toBe(built.text)
    expect(out.context.tokens).toBe(built.tokens)
    expect(out.context.items).toEqual(built.items)
    expect(out.context.omitted).toBe(built.omitted)
  })

  it("says when the agent was not registered yet, and reports progress on stderr when asked", async () => {
    const before = await wm(["replay", "--agent", AGENT, "--at", "1000"])
    expect(before.code).toBe(1)
    expect(before.stdout).toContain("The agent was not registered at that point.")
    const withProgress = await wm(["replay", "--agent", AGENT, "--seq", String(rungSeq)], {
      WM_PROGRESS_INTERVAL_MS: "0",
    })
    expect(withProgress.code).toBe(0)
    expect(withProgress.stderr).toMatch(/replay audited: \d+ events read · stream seq \d+\/\d+ \(\d+%\)/)
    expect(withProgress.stderr.trim().split("\n").at(-1)).toMatch(/\(100%\).*— done$/)
  })

  it("refuses a replay without an instant", async () => {
    const run = await wm(["replay", "--agent", AGENT])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain("replay needs --at <time> or --seq <n>")
  })
})

describe("wm verify", () => {
  it("exits 0 when every live working view matches the log", async () => {
    const run = await wm(["verify"])
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(
      /^ok {4}working-views: 3 agents compared at .+; the live projection matches the log\nok {4}working-snapshots: .+\nok {4}gateway-snapshots: .+\nok {4}memory-snapshots: .+\nok {4}fade-snapshots: .+\nok {4}substrate: .+\n$/,
    )
  })

  it("exits non-zero and names agent, entry and field when the live view no longer matches the log", async () => {
    // The working service applied this agent's read event; then the event disappears from the log.
    // Its live view keeps what it applied, while a rebuild from the log as it now stands cannot.
    const agent = system.client.agent("tampered")
    await agent.register({ role: "main" })
    const recorded = await agent.record({ origin: "USER", content: "Served once, then the read is lost." })
    const built = await agent.buildContext()
    expect(built.items.map((i) => i.entryId)).toEqual([recorded.entryId])
    const live = await agent.view() // the live view has applied the read
    const readAt = live.entries[0]!.lastReadAt
    expect(readAt).toBeTypeOf("number")
    const jsm = await jetstreamManager(system.client.nc)
    expect(await jsm.streams.deleteMessage(EVENTS_STREAM, built.seq)).toBe(true)

    const run = await wm(["verify"])
    expect(run.code).toBe(1)
    const lines = run.stdout
      .trim()
      .split("\n")
      .filter((l) => !l.startsWith("ok    substrate") && !/^ok {4}[a-z]+-snapshots/.test(l))
    expect(lines[0]).toMatch(/^FAIL {2}working-views: 4 agents compared at .+; 2 differences$/)
    expect(lines.slice(1).map((l) => l.trim())).toEqual([
      `agent tampered, entry ${recorded.entryId}, field lastReadAt: live ${readAt}, log null`,
      `agent tampered, entry ${recorded.entryId}, field referenceCount: live 1, log 0`,
    ])
    const json = await wm(["verify", "--json"])
    expect(json.code).toBe(1)
    const report = JSON.parse(json.stdout) as {
      ok: boolean
      checks: Array<{ name: string; differences: Array<Record<string, unknown>> }>
    }
    expect(report.ok).toBe(false)
    expect(report.checks[0]!.differences).toContainEqual({
      agent: "tampered",
      entry: recorded.entryId,
      field: "referenceCount",
      live: 1,
      log: 0,
    })
  })
})
