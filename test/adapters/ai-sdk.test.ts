/**
 * @working-memory/ai-sdk against the real system, driven by the real AI SDK (`generateText`, `streamText`,
 * `wrapLanguageModel`) over its own test model: what each call records, the step it runs, the memory it
 * puts into the prompt, the references it reports, and the typed errors of bad input.
 */
import type {
  LanguageModelV4Content,
  LanguageModelV4GenerateResult,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider"
import { type BuiltContext, defaultFormatMemory, workingMemoryMiddleware } from "@working-memory/ai-sdk"
import { generateText, jsonSchema, type ModelMessage, stepCountIs, streamText, tool, wrapLanguageModel } from "ai"
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai/test"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AgentNotFound, Unavailable, ValidationError } from "../../contracts/errors.ts"
import { countTokens } from "../../domain/tokens.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"
import { agentIdFor, eventsOf, runExample } from "./support.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
}
const answer = (...content: LanguageModelV4Content[]): LanguageModelV4GenerateResult => ({
  content,
  finishReason: { unified: "stop", raw: undefined },
  usage,
  warnings: [],
})
const text = (t: string): LanguageModelV4Content => ({ type: "text", text: t })
const reasoning = (t: string): LanguageModelV4Content => ({ type: "reasoning", text: t })

const registered = async (name: string, budget = 2_000) => {
  const agent = system.client.agent(agentIdFor(name))
  await agent.register({ role: "custom", budget })
  return agent
}

const memoryIn = (prompt: LanguageModelV4Prompt) => prompt.flatMap((m) => (m.role === "system" ? [m.content] : []))

const recorded = (agentId: string) => eventsOf(system.client, agentId, "EntryRecorded")

describe("workingMemoryMiddleware with generateText", () => {
  it("records each new user message once and the reply apart from its reasoning, one focused step per call, the earlier turns in the prompt", async () => {
    const agent = await registered("ai-turns")
    const contexts: BuiltContext[] = []
    const mock = new MockLanguageModelV4({
      doGenerate: [
        answer(reasoning("The user is telling me the name of their cat."), text("Miso is a lovely name.")),
        answer(text("Showers are likely tomorrow afternoon.")),
        answer(reasoning("They told me earlier."), text("Your cat is called Miso.")),
      ],
    })
    const middleware = workingMemoryMiddleware({
      agent,
      budget: 500,
      formatMemory: (context) => {
        contexts.push(context)
        return defaultFormatMemory(context)
      },
    })
    const model = wrapLanguageModel({ model: mock, middleware })
    // A multi-turn prompt, as the AI SDK's chat apps keep it: every earlier message comes again.
    const messages: ModelMessage[] = []
    const users = ["My cat is called Miso.", "Will it rain in Lisbon tomorrow?", "What is my cat called?"]
    for (const user of users) {
      messages.push({ role: "user", content: user })
      const result = await generateText({ model, messages })
      messages.push(...result.response.messages)
    }

    const entries = await recorded(agent.agentId)
    expect(entries.filter((e) => e.tags.includes("user")).map((e) => [e.origin, e.content])).toEqual(
      users.map((u) => ["USER", u]),
    )
    expect(entries.filter((e) => e.tags.includes("reply")).map((e) => [e.origin, e.content])).toEqual([
      ["USER", "Assistant: Miso is a lovely name."],
      ["USER", "Assistant: Showers are likely tomorrow afternoon."],
      ["USER", "Assistant: Your cat is called Miso."],
    ])
    expect(entries.filter((e) => e.tags.includes("reasoning")).map((e) => [e.origin, e.content])).toEqual([
      ["INTERNAL", "The user is telling me the name of their cat."],
      ["INTERNAL", "They told me earlier."],
    ])
    expect(entries).toHaveLength(8)

    const started = await eventsOf(system.client, agent.agentId, "StepStarted")
    expect(started.map((s) => s.focus?.query)).toEqual(users)
    const ended = await eventsOf(system.client, agent.agentId, "StepEnded")
    expect(ended.map((s) => s.stepId)).toEqual(started.map((s) => s.stepId))

    // Turn 1 had no memory yet; turn 3 was handed the earlier turns, within the budget.
    expect(memoryIn(mock.doGenerateCalls[0]!.prompt)).toEqual([])
    const third = contexts.at(-1)!
    expect(memoryIn(mock.doGenerateCalls[2]!.prompt)).toEqual([defaultFormatMemory(third)])
    expect(third.text).toContain("My cat is called Miso.")
    expect(third.text).toContain("Assistant: Showers are likely tomorrow afternoon.")
    expect(third.text).toContain("thought: The user is telling me the name of their cat.")
    expect(countTokens(third.text, "o200k_base")).toBeLessThanOrEqual(500)
  })

  it("reports the memory entries the reply quotes as used in the step, and no others", async () => {
    const agent = await registered("ai-references")
    const cat = await agent.record({ origin: "USER", content: "My cat is called Miso." })
    await agent.record({ origin: "USER", content: "The bus to the office was late again this morning." })
    const mock = new MockLanguageModelV4({ doGenerate: [answer(text("Your cat is called Miso."))] })
    const model = wrapLanguageModel({ model: mock, middleware: workingMemoryMiddleware({ agent }) })
    await generateText({ model, prompt: "What is my cat called?" })

    const [step] = await eventsOf(system.client, agent.agentId, "StepStarted")
    const references = await eventsOf(system.client, agent.agentId, "EntriesReferenced")
    expect(references.map((r) => [r.stepId, r.entryIds])).toEqual([[step!.stepId, [cat.entryId]]])
  })

  it("never puts more memory into the prompt than the budget, counted in the agent's encoding", async () => {
    const agent = await registered("ai-budget")
    for (let i = 0; i < 30; i++)
      await agent.record({ origin: "USER", content: `Note ${i}: the parcel for flat ${i} was left with the porter.` })
    const contexts: BuiltContext[] = []
    const mock = new MockLanguageModelV4({ doGenerate: [answer(text("Noted."))] })
    const middleware = workingMemoryMiddleware({
      agent,
      budget: 120,
      formatMemory: (context) => {
        contexts.push(context)
        return context.text
      },
    })
    await generateText({ model: wrapLanguageModel({ model: mock, middleware }), prompt: "Which parcels arrived?" })

    const [context] = contexts
    expect(context!.omitted).toBeGreaterThan(0)
    expect(context!.items.length).toBeGreaterThan(0)
    const [memory] = memoryIn(mock.doGenerateCalls[0]!.prompt)
    expect(memory).toBe(context!.text)
    expect(countTokens(memory!, "o200k_base")).toBeLessThanOrEqual(120)
  })

  it("records a message sent again after a failed call once, and the same words in a later turn again", async () => {
    const agent = await registered("ai-retry")
    let calls = 0
    const mock = new MockLanguageModelV4({
      doGenerate: async () => {
        if (++calls === 1) throw new Error("the model is unreachable")
        return answer(text("Noted."))
      },
    })
    const model = wrapLanguageModel({ model: mock, middleware: workingMemoryMiddleware({ agent }) })
    await expect(generateText({ model, prompt: "Yes, book it.", maxRetries: 0 })).rejects.toThrow("unreachable")
    await generateText({ model, prompt: "Yes, book it.", maxRetries: 0 }) // the caller tries again
    await generateText({ model, prompt: "Yes, book it." }) // a new turn that happens to say the same

    const users = (await recorded(agent.agentId)).filter((e) => e.tags.includes("user"))
    expect(users.map((e) => e.content)).toEqual(["Yes, book it.", "Yes, book it."])
    // The failed call's step ended too: none is left open.
    expect((await eventsOf(system.client, agent.agentId, "StepEnded")).length).toBe(3)
    expect((await agent.view()).step).toBeNull()
  })

  it("records a tool loop's calls and results, each once", async () => {
    const agent = await registered("ai-tools")
    const mock = new MockLanguageModelV4({
      doGenerate: [
        answer({ type: "tool-call", toolCallId: "call-1", toolName: "weather", input: '{"city":"Lisbon"}' }),
        answer(text("It will be sunny in Lisbon.")),
      ],
    })
    const model = wrapLanguageModel({ model: mock, middleware: workingMemoryMiddleware({ agent }) })
    await generateText({
      model,
      prompt: "What is the weather in Lisbon?",
      tools: {
        weather: tool({
          inputSchema: jsonSchema<{ city: string }>({ type: "object", properties: { city: { type: "string" } } }),
          execute: async ({ city }) => `sunny in ${city}`,
        }),
      },
      stopWhen: stepCountIs(2),
    })

    const entries = await recorded(agent.agentId)
    expect(entries.map((e) => [e.origin, e.tags, e.content])).toEqual([
      ["USER", ["user"], "What is the weather in Lisbon?"],
      ["INTERNAL", ["tool-call"], 'Called weather with {"city":"Lisbon"}'],
      ["SYSTEM", ["tool-result"], "Tool result (weather): sunny in Lisbon"],
      ["USER", ["reply"], "Assistant: It will be sunny in Lisbon."],
    ])
  })
})

describe("workingMemoryMiddleware with streamText", () => {
  it("records the streamed reply, reports its references and ends the step when the stream finishes", async () => {
    const agent = await registered("ai-stream")
    const cat = await agent.record({ origin: "USER", content: "My cat is called Miso." })
    const parts: LanguageModelV4StreamPart[] = [
      { type: "stream-start", warnings: [] },
      { type: "reasoning-start", id: "r" },
      { type: "reasoning-delta", id: "r", delta: "The user told me " },
      { type: "reasoning-delta", id: "r", delta: "about the cat." },
      { type: "reasoning-end", id: "r" },
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "Your cat is " },
      { type: "text-delta", id: "t", delta: "called Miso." },
      { type: "text-end", id: "t" },
      { type: "finish", usage, finishReason: { unified: "stop", raw: undefined } },
    ]
    const mock = new MockLanguageModelV4({ doStream: { stream: convertArrayToReadableStream(parts) } })
    const model = wrapLanguageModel({ model: mock, middleware: workingMemoryMiddleware({ agent, budget: 200 }) })
    const result = streamText({ model, prompt: "What is my cat called?" })
    let streamed = ""
    for await (const delta of result.textStream) streamed += delta
    expect(streamed).toBe("Your cat is called Miso.")

    expect(memoryIn(mock.doStreamCalls[0]!.prompt).join("")).toContain("My cat is called Miso.")
    const entries = await recorded(agent.agentId)
    expect(entries.slice(1).map((e) => [e.origin, e.tags, e.content])).toEqual([
      ["USER", ["user"], "What is my cat called?"],
      ["INTERNAL", ["reasoning"], "The user told me about the cat."],
      ["USER", ["reply"], "Assistant: Your cat is called Miso."],
    ])
    const [step] = await eventsOf(system.client, agent.agentId, "StepStarted")
    expect(step!.focus).toEqual({ query: "What is my cat called?" })
    const references = await eventsOf(system.client, agent.agentId, "EntriesReferenced")
    expect(references.map((r) => r.entryIds)).toEqual([[cat.entryId]])
    expect((await eventsOf(system.client, agent.agentId, "StepEnded")).map((e) => e.stepId)).toEqual([step!.stepId])
  })
})

describe("workingMemoryMiddleware on bad input", () => {
  const once = () => new MockLanguageModelV4({ doGenerate: [answer(text("Noted."))] })

  it("refuses a message above the API's content limit with ValidationError and leaves no step open", async () => {
    const agent = await registered("ai-oversized")
    const model = wrapLanguageModel({ model: once(), middleware: workingMemoryMiddleware({ agent }) })
    const error = await generateText({ model, prompt: "a".repeat(70_000) }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ValidationError)
    expect((await agent.view()).step).toBeNull()
  })

  it("refuses an agent that is not registered with AgentNotFound", async () => {
    const agent = system.client.agent(agentIdFor("ai-unregistered"))
    const model = wrapLanguageModel({ model: once(), middleware: workingMemoryMiddleware({ agent }) })
    await expect(generateText({ model, prompt: "Hello" })).rejects.toBeInstanceOf(AgentNotFound)
  })

  it("answers Unavailable at once on a closed connection", async () => {
    const agentId = (await registered("ai-closed")).agentId
    const wm = await WorkingMemoryClient.connect({ servers: system.server.url })
    await wm.close()
    const model = wrapLanguageModel({
      model: once(),
      middleware: workingMemoryMiddleware({ agent: wm.agent(agentId) }),
    })
    await expect(generateText({ model, prompt: "Hello" })).rejects.toBeInstanceOf(Unavailable)
  })
})

it("examples/ai-sdk.ts prints the memory the model was handed on turn 3, which holds Miso", async () => {
  const output = await runExample("ai-sdk", system.server.url)
  const memory = output.slice(output.indexOf("The memory the model was handed on turn 3:"))
  expect(memory).toContain("My cat is called Miso.")
}, 120_000)
