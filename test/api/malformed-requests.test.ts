/**
 * Every kind of malformed request gets a typed error naming the field and
 * the reason, and changes nothing: the log does not grow and no view moves.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_CONTENT_BYTES } from "../../contracts/api.ts"
import { viewSnapshot } from "../../domain/agent-view.ts"
import { lastSeq } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
let stepId: string
let entryId: string
beforeAll(async () => {
  system = await startTestSystem({}, { fade: false })
  const agent = system.client.agent("strict")
  await agent.register({ role: "main" })
  entryId = (await agent.record({ origin: "USER", content: "an accepted entry" })).entryId
  stepId = (await agent.beginStep()).stepId
})
afterAll(async () => system?.stop())

/** Sends a raw body on a raw subject, as a client in any language would. */
const rawRequest = async (subject: string, body: string) => {
  const reply = await system.client.nc.request(subject, body, { timeout: 5_000 })
  return JSON.parse(new TextDecoder().decode(reply.data)) as { ok: boolean; error?: Record<string, unknown> }
}

interface Case {
  readonly name: string
  readonly subject: string
  readonly body: unknown
  readonly tag: string
  readonly field?: string
  readonly reason?: RegExp
}

const cases = (): Case[] => [
  {
    name: "body that is not JSON",
    subject: "wm.api.strict.entry.record",
    body: "{not json",
    tag: "ValidationError",
    field: "(body)",
    reason: /JSON/,
  },
  { name: "body that is a JSON array", subject: "wm.api.strict.entry.record", body: [], tag: "ValidationError" },
  {
    name: "missing content",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER" },
    tag: "ValidationError",
    field: "content",
  },
  {
    name: "empty content",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "" },
    tag: "ValidationError",
    field: "content",
  },
  {
    name: "blank content",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: " \n\t " },
    tag: "ValidationError",
    field: "content",
    reason: /visible/,
  },
  {
    name: "oversized content",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "x".repeat(MAX_CONTENT_BYTES + 1) },
    tag: "ValidationError",
    field: "content",
    reason: new RegExp(`limit is ${MAX_CONTENT_BYTES} bytes`),
  },
  {
    name: "unknown origin",
    subject: "wm.api.strict.entry.record",
    body: { origin: "ROBOT", content: "hi" },
    tag: "ValidationError",
    field: "origin",
  },
  {
    name: "content of the wrong type",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: 42 },
    tag: "ValidationError",
    field: "content",
  },
  {
    name: "mood out of range",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "hi", mood: { valence: 3, arousal: 0.5 } },
    tag: "ValidationError",
    field: "mood.valence",
  },
  {
    name: "emotional weight out of range",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "hi", emotionalWeight: -0.1 },
    tag: "ValidationError",
    field: "emotionalWeight",
  },
  {
    name: "negative timestamp",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "hi", timestamp: -5 },
    tag: "ValidationError",
    field: "timestamp",
  },
  {
    name: "fractional timestamp",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "hi", timestamp: 1.5 },
    tag: "ValidationError",
    field: "timestamp",
  },
  {
    name: "a tag that is not a string",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "hi", tags: ["ok", 7] },
    tag: "ValidationError",
    field: "tags.1",
  },
  {
    name: "too many tags",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "hi", tags: Array.from({ length: 33 }, (_, i) => `t${i}`) },
    tag: "ValidationError",
    field: "tags",
  },
  {
    name: "an unknown field",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "hi", colour: "red" },
    tag: "ValidationError",
    field: "colour",
  },
  {
    name: "request id with a dot",
    subject: "wm.api.strict.entry.record",
    body: { origin: "USER", content: "hi", requestId: "a.b" },
    tag: "ValidationError",
    field: "requestId",
  },
  {
    name: "agent id with a bad character",
    subject: "wm.api.bad$agent.entry.record",
    body: { origin: "USER", content: "hi" },
    tag: "ValidationError",
    field: "agentId",
  },
  {
    name: "record for an unknown agent",
    subject: "wm.api.nobody.entry.record",
    body: { origin: "USER", content: "hi" },
    tag: "AgentNotFound",
  },
  {
    name: "register with an unknown role",
    subject: "wm.api.newbie.agent.register",
    body: { role: "wizard" },
    tag: "ValidationError",
    field: "role",
  },
  {
    name: "register custom role without budget",
    subject: "wm.api.newbie.agent.register",
    body: { role: "custom" },
    tag: "ValidationError",
    field: "budget",
  },
  {
    name: "register with a budget too small",
    subject: "wm.api.newbie.agent.register",
    body: { role: "main", budget: 3 },
    tag: "ValidationError",
    field: "budget",
  },
  {
    name: "register with an unknown encoding",
    subject: "wm.api.newbie.agent.register",
    body: { role: "main", encoding: "gpt5" },
    tag: "ValidationError",
    field: "encoding",
  },
  {
    name: "register again with another role",
    subject: "wm.api.strict.agent.register",
    body: { role: "supervisor" },
    tag: "AgentAlreadyRegistered",
  },
  {
    name: "retune to a fractional budget",
    subject: "wm.api.strict.budget.retune",
    body: { budget: 100.5 },
    tag: "ValidationError",
    field: "budget",
  },
  {
    name: "retune without a budget",
    subject: "wm.api.strict.budget.retune",
    body: {},
    tag: "ValidationError",
    field: "budget",
  },
  {
    name: "hyperfocus below the base budget",
    subject: "wm.api.strict.budget.hyperfocus.enter",
    body: { budget: 100 },
    tag: "ValidationError",
    field: "budget",
  },
  {
    name: "exit hyperfocus when not in it",
    subject: "wm.api.strict.budget.hyperfocus.exit",
    body: {},
    tag: "InvalidState",
    field: "hyperfocus",
  },
  {
    name: "begin a step while one is open",
    subject: "wm.api.strict.step.begin",
    body: { stepId: "another" },
    tag: "InvalidState",
    field: "stepId",
  },
  {
    name: "focus with an empty task",
    subject: "wm.api.strict.focus.set",
    body: { focus: { task: "" } },
    tag: "ValidationError",
    field: "focus.task",
  },
  {
    name: "reference with no entries",
    subject: "wm.api.strict.step.reference",
    body: { stepId: "x", entryIds: [] },
    tag: "ValidationError",
    field: "entryIds",
  },
  {
    name: "reference in a step that is not open",
    subject: "wm.api.strict.step.reference",
    body: { stepId: "not-open", entryIds: ["e1"] },
    tag: "InvalidState",
    field: "stepId",
  },
  {
    name: "end a step that is not open",
    subject: "wm.api.strict.step.end",
    body: { stepId: "not-open" },
    tag: "InvalidState",
    field: "stepId",
  },
  {
    name: "build with a limit of zero",
    subject: "wm.api.strict.context.build",
    body: { limit: 0 },
    tag: "ValidationError",
    field: "limit",
  },
  {
    name: "build in the wrong order",
    subject: "wm.api.strict.context.build",
    body: { order: "random" },
    tag: "ValidationError",
    field: "order",
  },
  {
    name: "build for a step that is not open",
    subject: "wm.api.strict.context.build",
    body: { stepId: "not-open" },
    tag: "InvalidState",
    field: "stepId",
  },
  { name: "build for an unknown agent", subject: "wm.api.ghost.context.build", body: {}, tag: "AgentNotFound" },
]

describe("malformed requests", () => {
  it("each gets a typed error naming the field and the reason, and nothing changes", async () => {
    const before = await lastSeq(system.server.url)
    const viewBefore = viewSnapshot((await system.liveView("strict"))!)
    for (const c of cases()) {
      const reply = await rawRequest(c.subject, typeof c.body === "string" ? c.body : JSON.stringify(c.body))
      expect(reply.ok, c.name).toBe(false)
      expect(reply.error?._tag, c.name).toBe(c.tag)
      expect(typeof reply.error?.message, c.name).toBe("string")
      if (c.field !== undefined) expect(reply.error?.field, c.name).toBe(c.field)
      if (c.reason !== undefined) expect(String(reply.error?.reason), c.name).toMatch(c.reason)
    }
    expect(await lastSeq(system.server.url)).toBe(before)
    expect(viewSnapshot((await system.liveView("strict"))!)).toEqual(viewBefore)
    expect(await system.liveView("newbie")).toBeUndefined()
  })

  it("lists every problem of a request, not only the first", async () => {
    const reply = await rawRequest("wm.api.strict.entry.record", JSON.stringify({ origin: "X", content: 1, tags: "a" }))
    const fields = ((reply.error?.issues ?? []) as Array<{ field: string }>).map((i) => i.field).sort()
    expect(fields).toEqual(["content", "origin", "tags"])
  })

  it("a reference to an entry the agent never had is refused, naming it", async () => {
    const reply = await rawRequest(
      "wm.api.strict.step.reference",
      JSON.stringify({ stepId, entryIds: [entryId, "never-recorded"] }),
    )
    expect(reply.error).toMatchObject({ _tag: "UnknownEntries", entryIds: ["never-recorded"] })
  })

  it("the SDK surfaces refusals as typed errors", async () => {
    const { ValidationError } = await import("../../contracts/errors.ts")
    const error = await system.client
      .agent("strict")
      .record({ origin: "USER", content: "" })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ValidationError)
    expect((error as InstanceType<typeof ValidationError>).field).toBe("content")
  })
})
