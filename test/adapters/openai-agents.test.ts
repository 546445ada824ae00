/**
 * @working-memory/openai-agents against the real system, driven by the real OpenAI Agents SDK (`Runner`
 * with a scripted `Model`): what addItems records, what getItems serves within the budget (faded and recalled
 * turns included), what popItem and clearSession do to the conversation and leave in the log, and the typed
 * errors of bad input.
 */
import { Agent, type AgentInputItem, Runner } from "@openai/agents"
import { WorkingMemorySession } from "@working-memory/openai-agents"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ResponseOf } from "../../contracts/api.ts"
import { countTokens } from "../../domain/tokens.ts"
import { describeItem, ScriptedModel } from "../../examples/openai-agents.ts"
import { AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { Unavailable, ValidationError } from "../../sdk/index.ts"
import { followOwnEvents } from "../../sdk/own-events.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"
import { agentIdFor, eventsOf, runExample } from "./support.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

const user = (text: string): AgentInputItem => ({ role: "user", content: text })
const assistant = (text: string): AgentInputItem => ({
  role: "assistant",
  status: "completed",
  content: [{ type: "output_text", text }],
})
const sessionFor = (name: string, budget = 1_000) => {
  const sessionId = agentIdFor(name)
  return new WorkingMemorySession({ client: system.client, sessionId, budget })
}
const recorded = async (agentId: string) =>
  (await eventsOf(system.client, agentId, "EntryRecorded")).map((e) => [e.origin, e.tags, e.content])
const tokensOf = (items: ReadonlyArray<AgentInputItem>) =>
  items.map(describeItem).reduce((sum, line) => sum + countTokens(line.slice(line.indexOf(": ") + 2), "o200k_base"), 0)

describe("WorkingMemorySession", () => {
  it("records each item as an entry: what the user said, the reply apart from the reasoning, tool calls and results", async () => {
    const session = sessionFor("agents-record")
    await session.addItems([
      user("What is the weather in Lisbon?"),
      { type: "reasoning", content: [{ type: "input_text", text: "I should ask the weather tool." }] },
      { type: "function_call", callId: "c1", name: "weather", arguments: '{"city":"Lisbon"}' },
      { type: "function_call_result", callId: "c1", name: "weather", status: "completed", output: "sunny" },
      { role: "user", content: [{ type: "input_image", image: "https://example.com/cat.png" }] },
      assistant("It is sunny in Lisbon."),
    ])
    expect(await recorded(await session.getSessionId())).toEqual([
      ["USER", ["user"], "What is the weather in Lisbon?"],
      ["INTERNAL", ["reasoning"], "I should ask the weather tool."],
      ["INTERNAL", ["tool-call"], 'Called weather with {"city":"Lisbon"}'],
      ["SYSTEM", ["tool-result"], "Tool result (weather): sunny"],
      ["USER", ["reply"], "Assistant: It is sunny in Lisbon."],
    ])
  })

  it("runs a Runner conversation: each turn recorded once, the earlier turns handed to the model as items", async () => {
    const session = sessionFor("agents-run")
    const replies = ["Miso is a lovely name.", "Showers are likely tomorrow.", "Your cat is called Miso."]
    const model = new ScriptedModel(replies)
    const runner = new Runner({ modelProvider: { getModel: () => model }, tracingDisabled: true })
    const agent = new Agent({ name: "Assistant", instructions: "Be brief." })
    const users = ["My cat is called Miso.", "Will it rain in Lisbon tomorrow?", "What is my cat called?"]
    for (const u of users) await runner.run(agent, u, { session })

    expect((model.requests[0]!.input as AgentInputItem[]).map(describeItem)).toEqual([`user: ${users[0]}`])
    expect((model.requests[2]!.input as AgentInputItem[]).map(describeItem)).toEqual([
      "user: My cat is called Miso.",
      "assistant: Miso is a lovely name.",
      "user: Will it rain in Lisbon tomorrow?",
      "assistant: Showers are likely tomorrow.",
      "user: What is my cat called?",
    ])
    const agentId = await session.getSessionId()
    expect(await recorded(agentId)).toEqual(
      users.flatMap((u, i) => [
        ["USER", ["user"], u],
        ["USER", ["reply"], `Assistant: ${replies[i]}`],
      ]),
    )
    // Each getItems is a step of its own, focused on the latest user message recorded before it.
    const started = await eventsOf(system.client, agentId, "StepStarted")
    expect(started.map((s) => s.focus?.query)).toEqual([undefined, users[0], users[1]])
    expect((await eventsOf(system.client, agentId, "StepEnded")).map((s) => s.stepId)).toEqual(
      started.map((s) => s.stepId),
    )
  })

  it("never serves more tokens than the budget, and the latest `limit` items when asked", async () => {
    const session = sessionFor("agents-budget", 150)
    await session.addItems(
      Array.from({ length: 30 }, (_, i) => user(`Note ${i}: the parcel for flat ${i} was left with the porter.`)),
    )
    const items = await session.getItems()
    expect(items.length).toBeGreaterThan(2)
    expect(items.length).toBeLessThan(30)
    expect(tokensOf(items)).toBeLessThanOrEqual(150)
    expect(await session.getItems(2)).toHaveLength(2)
    expect(await session.getItems(0)).toEqual([])
  })

  it("serves every item of the context it built, though fading moved them on before it read their texts", async () => {
    const sessionId = agentIdFor("agents-fading")
    const writer = system.client.agent(sessionId)
    const note = (i: number) => ({ origin: "USER" as const, content: `Note ${i}: the parcel for flat ${i} was left.` })
    /** Whether working memory holds none of the context's items at the form it served any more. */
    const noneHeldAsServed = async (context: ResponseOf<"buildContext">) => {
      const held = new Map((await writer.view()).entries.map((e) => [e.id, e]))
      return context.items.every((item) => {
        const entry = held.get(item.entryId)
        return !(item.form === "raw" ? entry?.content : item.form === "keyPoints" ? entry?.keyPoints : entry?.summary)
      })
    }
    let built: ResponseOf<"buildContext"> | undefined
    // Between the build and the session's read of the view, more notes arrive and fading takes every served
    // entry past the form it was served at: what a busy fade service may do on its own.
    class FadingMeanwhile extends AgentClient {
      override async buildContext(request?: Parameters<AgentClient["buildContext"]>[0]) {
        const context = await super.buildContext(request)
        built = context
        for (let i = 100; !(await noneHeldAsServed(context)); i++) {
          expect(i, "fading never moved the served entries").toBeLessThan(400)
          await writer.record(note(i))
        }
        return context
      }
    }
    const client = new Proxy(system.client, {
      get: (target, property) =>
        property === "agent"
          ? (agentId: string) => new FadingMeanwhile(target, agentId)
          : Reflect.get(target, property, target),
    })
    const session = new WorkingMemorySession({ client, sessionId, budget: 150 })
    await session.addItems(Array.from({ length: 30 }, (_, i) => user(note(i).content)))

    const items = await session.getItems()
    expect(built!.items.some((item) => item.form === "raw")).toBe(true)
    expect(items).toHaveLength(built!.items.length)
    expect(tokensOf(items)).toBeLessThanOrEqual(150)
  })

  it("serves a turn that faded out of working memory, recalled from long-term for the latest question", async () => {
    const sessionId = agentIdFor("agents-recall")
    const session = new WorkingMemorySession({ client: system.client, sessionId, budget: 200 })
    await session.addItems([user("We adopted a golden retriever puppy called Biscuit last week.")])
    const [puppy] = await eventsOf(system.client, sessionId, "EntryRecorded")
    let seen: () => void = () => undefined
    const demoted = new Promise<void>((resolve) => {
      seen = resolve
    })
    const following = await followOwnEvents(system.client, sessionId, {
      onEvent: ({ event }) => {
        if (event._tag === "EntryDemoted" && event.entryId === puppy!.entryId) seen()
      },
    })
    const fillers = [
      "The weather was grey and the bus was late again this morning.",
      "Remember to water the tomatoes on the balcony before noon.",
      "The quarterly tax report is due at the end of the month.",
      "We talked about repainting the kitchen a pale green colour.",
      "My brother keeps asking about the football tickets for Sunday.",
    ]
    try {
      await session.addItems(Array.from({ length: 30 }, (_, i) => assistant(fillers[i % fillers.length]!)))
      await demoted // the fade service moved the puppy out of working memory into long-term
    } finally {
      await following.stop()
    }
    await session.addItems([user("Which dog did I adopt recently?")])

    const served = (await session.getItems()).map(describeItem)
    expect(served).toContain("user: We adopted a golden retriever puppy called Biscuit last week.")
    expect(tokensOf(await session.getItems())).toBeLessThanOrEqual(200)
  })
})

describe("WorkingMemorySession's popItem and clearSession on the append-only log", () => {
  it("popItem withdraws the latest item from the conversation, returns it, and the log keeps it", async () => {
    const session = sessionFor("agents-pop")
    const sessionId = await session.getSessionId()
    await session.addItems([user("My cat is called Miso."), assistant("Nice name!"), user("Oops, wrong chat.")])

    expect(await session.popItem()).toEqual(user("Oops, wrong chat."))
    expect(await session.getItems()).toEqual([user("My cat is called Miso."), assistant("Nice name!")])
    expect(await session.popItem()).toEqual(assistant("Nice name!"))
    expect(await session.getItems()).toEqual([user("My cat is called Miso.")])
    // Another process opening the session reads the same conversation from the log.
    const reopened = new WorkingMemorySession({ client: system.client, sessionId, budget: 1_000 })
    expect(await reopened.getItems()).toEqual([user("My cat is called Miso.")])
    // The log keeps every item and says which were withdrawn.
    const entries = await recorded(sessionId)
    expect(entries.slice(0, 3).map((e) => e[2])).toEqual([
      "My cat is called Miso.",
      "Assistant: Nice name!",
      "Oops, wrong chat.",
    ])
    expect(entries.slice(3).map((e) => [e[0], e[1]])).toEqual([
      ["SYSTEM", ["session"]],
      ["SYSTEM", ["session"]],
    ])
    expect(await reopened.popItem()).toEqual(user("My cat is called Miso."))
    expect(await reopened.popItem()).toBeUndefined()
  })

  it("clearSession starts an empty epoch of the session on a fresh agent; the earlier one stays in the log", async () => {
    const session = sessionFor("agents-clear")
    const sessionId = await session.getSessionId()
    await session.addItems([user("My cat is called Miso."), assistant("Nice name!")])
    await session.clearSession()
    expect(await session.getItems()).toEqual([])
    expect(await session.getSessionId()).toBe(sessionId)
    await session.addItems([user("Hello again.")])
    expect(await session.getItems()).toEqual([user("Hello again.")])

    const reopened = new WorkingMemorySession({ client: system.client, sessionId, budget: 1_000 })
    expect(await reopened.getItems()).toEqual([user("Hello again.")])
    await reopened.clearSession()
    expect(await reopened.getItems()).toEqual([])
    expect(await new WorkingMemorySession({ client: system.client, sessionId }).getItems()).toEqual([])

    expect((await recorded(sessionId)).map((e) => e[2])).toEqual([
      "My cat is called Miso.",
      "Assistant: Nice name!",
      `The conversation was cleared; it goes on as agent ${sessionId}_1.`,
      `The conversation was cleared; it goes on as agent ${sessionId}_2.`,
    ])
    expect((await recorded(`${sessionId}_1`)).map((e) => e[2])).toEqual(["Hello again."])
  })
})

describe("WorkingMemorySession on bad input", () => {
  it("refuses an item above the API's content limit with ValidationError", async () => {
    const session = sessionFor("agents-oversized")
    await expect(session.addItems([user("a".repeat(70_000))])).rejects.toBeInstanceOf(ValidationError)
  })

  it("refuses a session whose agent id the API cannot take with ValidationError", async () => {
    const session = new WorkingMemorySession({ client: system.client, sessionId: "a session with spaces" })
    await expect(session.getItems()).rejects.toBeInstanceOf(ValidationError)
  })

  it("answers Unavailable at once on a closed connection", async () => {
    const sessionId = agentIdFor("agents-closed")
    const wm = await WorkingMemoryClient.connect({ servers: system.server.url })
    const session = new WorkingMemorySession({ client: wm, sessionId })
    await session.addItems([user("Hello.")])
    await wm.close()
    await expect(session.getItems()).rejects.toBeInstanceOf(Unavailable)
    await expect(session.addItems([user("Still there?")])).rejects.toBeInstanceOf(Unavailable)
    await expect(session.popItem()).rejects.toBeInstanceOf(Unavailable)
  })
})

it("examples/openai-agents.ts prints the history the session handed the model on turn 3, which holds Miso", async () => {
  const output = await runExample("openai-agents", system.server.url)
  const history = output.slice(output.indexOf("The history the session handed the model on turn 3:"))
  expect(history).toContain("user: My cat is called Miso.")
}, 120_000)
