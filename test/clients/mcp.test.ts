/**
 * The MCP server (`npm run mcp`, node cli/mcp.ts) driven by the MCP SDK's own client, over stdio as an
 * assistant spawns it and over streamable HTTP, against the real system: its tools record, recall,
 * build the context of a step, reference, read raw text and history through the API, their inputs are
 * the API's schemas, and refusals come back as MCP tool errors carrying the API's typed error.
 */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { apiJsonSchema } from "../../contracts/json-schema.ts"
import { runDemo } from "../../examples/demo.ts"
import { readOwnEvents } from "../../sdk/own-events.ts"
import { eventually } from "../support/eventually.ts"
import { lastSeq } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const REPO = fileURLToPath(new URL("../..", import.meta.url))
const NODE = join(REPO, "node_modules", ".bin", "node")

let system: TestSystem
const clients: Client[] = []

beforeAll(async () => {
  system = await startTestSystem()
  await system.client.agent("assistant").register({ role: "main" })
  // A first start on a machine also derives the offline embedder's cache, on a loaded machine slowly.
}, 180_000)
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined)
  await system?.stop()
})

const env = () => ({ PATH: process.env.PATH ?? "", NATS_URL: system.server.url })

const overStdio = async (...args: string[]): Promise<Client> => {
  const client = new Client({ name: "test", version: "1.0.0" })
  await client.connect(
    new StdioClientTransport({ command: NODE, args: ["cli/mcp.ts", ...args], cwd: REPO, env: env(), stderr: "pipe" }),
  )
  clients.push(client)
  return client
}

const call = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
  (await client.callTool({ name, arguments: args })) as CallToolResult

const value = <T = Record<string, unknown>>(result: CallToolResult): T => {
  if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`)
  return result.structuredContent as T
}

const text = (result: CallToolResult) => result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n")

describe("the MCP server over stdio", () => {
  it("offers the memory tools with the API's request schemas as their inputs", async () => {
    const client = await overStdio("--agent", "assistant")
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual(
      ["begin_step", "context", "end_step", "history", "raw", "recall", "reference", "remember"].sort(),
    )
    const api = apiJsonSchema().operations as Record<string, { request: Record<string, unknown> }>
    const remember = tools.find((t) => t.name === "remember")!
    expect(remember.inputSchema.properties).toEqual(api.recordEntry!.request.properties)
    expect(remember.inputSchema.required).toEqual(["content", "origin"])
    const recall = tools.find((t) => t.name === "recall")!
    expect(Object.keys(recall.inputSchema.properties ?? {})).not.toContain("afterSeq")
    // The session supplies the step it began.
    expect(tools.find((t) => t.name === "end_step")!.inputSchema.required).toEqual([])
  })

  it("remembers, recalls with explain, and reads raw text", async () => {
    const client = await overStdio("--agent", "assistant")
    const recorded = value<{ entryId: string; tokens: number }>(
      await call(client, "remember", {
        origin: "USER",
        content: "Our cat Miso only eats salmon pâté after nine in the evening.",
        tags: ["pets"],
      }),
    )
    expect(recorded.tokens).toBeGreaterThan(0)

    const recalled = value<{ results: Array<{ entryId: string; explain?: { similarity: number } }> }>(
      await call(client, "recall", { query: "what does the cat eat", filter: { tags: ["pets"] } }),
    )
    expect(recalled.results[0]?.entryId).toBe(recorded.entryId)
    expect(recalled.results[0]?.explain?.similarity).toBeGreaterThan(0)

    const raw = await call(client, "raw", { entryId: recorded.entryId })
    expect(text(raw)).toBe("Our cat Miso only eats salmon pâté after nine in the evening.")
  })

  it("runs a step: builds its context, references the entry used, ends it, and shows that in the entry's history", async () => {
    const agentId = "stepper"
    await system.client.agent(agentId).register({ role: "custom", budget: 400 })
    const client = await overStdio("--agent", agentId)
    const { entryId } = value<{ entryId: string }>(
      await call(client, "remember", { origin: "INTERNAL", content: "The deploy window is Thursday 14:00 UTC." }),
    )
    const { stepId } = value<{ stepId: string }>(
      await call(client, "begin_step", { focus: { query: "when is the deploy window" } }),
    )

    const context = await call(client, "context", { limit: 200 })
    const built = value<{ text: string; tokens: number; budget: number; items: Array<{ entryId: string }> }>(context)
    expect(built.budget).toBe(200)
    expect(built.items.map((i) => i.entryId)).toContain(entryId)
    expect(text(context)).toContain("thought: The deploy window is Thursday 14:00 UTC.")
    expect(text(context)).toContain(`${built.tokens}/200 tokens`)

    value(await call(client, "reference", { entryIds: [entryId] }))
    expect(value<{ stepId: string }>(await call(client, "end_step")).stepId).toBe(stepId)

    const history = value<{ events: Array<{ event: { _tag: string } }> }>(await call(client, "history", { entryId }))
    expect(history.events.map((e) => e.event._tag)).toEqual(["EntryRecorded", "EntriesRead", "EntriesReferenced"])
  })

  it("gives a faded entry's history with each fade decision's score parts, and names the embedding's model without its bytes", async () => {
    await runDemo(system.client.agent("faded"), { log: () => undefined })
    // Fading goes on after the demo's last answer: wait for its first demotion.
    const demoted = await eventually("a demotion of the demo's agent", async () => {
      const events = await readOwnEvents(system.client, "faded")
      return events.find((e) => e.event._tag === "EntryDemoted")?.event
    })
    if (demoted._tag !== "EntryDemoted") throw new Error("no demotion in the demo")
    const client = await overStdio("--agent", "faded")
    const history = value<{
      events: Array<{ event: { _tag: string; score?: unknown; embedding?: Record<string, unknown> } }>
    }>(await call(client, "history", { entryId: demoted.entryId }))
    const decisions = history.events.filter((e) => e.event._tag === "RungChanged" || e.event._tag === "EntryDemoted")
    expect(decisions.length).toBeGreaterThan(0)
    const demotion = history.events.find((e) => e.event._tag === "EntryDemoted")!.event
    expect(demotion.score).toEqual(demoted.score)
    expect(demotion.embedding).toEqual({
      model: demoted.embedding.model,
      dims: demoted.embedding.dims,
      producer: demoted.embedding.producer,
    })
  })

  it("returns the API's typed errors as tool errors naming the field and the reason", async () => {
    const client = await overStdio("--agent", "assistant")
    const blank = await call(client, "remember", { origin: "USER", content: "   " })
    expect(blank.isError).toBe(true)
    expect(blank.structuredContent).toMatchObject({ error: { _tag: "ValidationError", field: "content" } })
    expect(text(blank)).toMatch(/^ValidationError on content: /)

    const unknownField = await call(client, "remember", { origin: "USER", content: "hi", colour: "red" })
    expect(unknownField.structuredContent).toMatchObject({ error: { _tag: "ValidationError", field: "colour" } })

    const ended = await call(client, "reference", { stepId: "never-begun", entryIds: ["x"] })
    expect(ended.isError).toBe(true)
    expect(ended.structuredContent).toMatchObject({ error: { _tag: "InvalidState", field: "stepId" } })
  })

  it("serves the agent's working view as a resource and a prompt with its context, and registers the agent when given a role", async () => {
    const client = await overStdio("--agent", "newcomer", "--role", "custom", "--budget", "300")
    value(await call(client, "remember", { origin: "ADVISOR", content: "The user sounds rushed today." }))
    const { resources } = await client.listResources()
    expect(resources.map((r) => r.uri)).toEqual(["wm://agents/newcomer/view"])
    const read = await client.readResource({ uri: "wm://agents/newcomer/view" })
    const view = JSON.parse(String((read.contents[0] as { text: string }).text)) as {
      budget: number
      entries: Array<{ content: string }>
    }
    expect(view.budget).toBe(300)
    expect(view.entries.map((e) => e.content)).toEqual(["The user sounds rushed today."])

    const prompt = await client.getPrompt({ name: "with-memory", arguments: { question: "How is the user?" } })
    const message = prompt.messages[0]!.content as { type: string; text: string }
    expect(message.text).toContain("advisor: The user sounds rushed today.")
    expect(message.text.endsWith("How is the user?")).toBe(true)
  })

  it("registers a new agent named without a role as main on first use, and leaves a known agent's role", async () => {
    const client = await overStdio("--agent", "first-use")
    value(await call(client, "remember", { origin: "USER", content: "Remember the blue folder." }))
    // Written by another process: read at the log's end, as a reader that knows of the write does.
    const firstUse = system.client.agent("first-use")
    firstUse.lastSeq = await lastSeq(system.server.url)
    const view = await firstUse.view()
    expect(view.agent.role).toBe("main")
    expect(view.entries.map((e) => e.content)).toEqual(["Remember the blue folder."])

    await system.client.agent("known-custom").register({ role: "custom", budget: 400 })
    const known = await overStdio("--agent", "known-custom")
    value(await call(known, "remember", { origin: "USER", content: "Still custom." }))
    const after = await system.client.agent("known-custom").view()
    expect([after.agent.role, after.budget]).toEqual(["custom", 400])
  })

  it("names --role when a new agent named without one cannot be registered as main", async () => {
    // A budget below the smallest: the registration as main is refused and the server does not start.
    const child = spawn(NODE, ["cli/mcp.ts", "--agent", "refused-first", "--budget", "8"], { cwd: REPO, env: env() })
    let stderr = ""
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
    expect(code).toBe(2)
    expect(stderr).toMatch(/cannot register 'refused-first' as main on first use: .*; name its role with --role/)
    await expect(system.client.agent("refused-first").view()).rejects.toMatchObject({ _tag: "AgentNotFound" })
  })
})

describe("the MCP server over streamable HTTP", () => {
  it("serves each session for the agent its URL names", async () => {
    await system.client.agent("web-agent").register({ role: "main" })
    const child = spawn(NODE, ["cli/mcp.ts", "--http", "0"], {
      cwd: REPO,
      env: env(),
      stdio: ["ignore", "pipe", "pipe"],
    })
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let err = ""
        child.stderr!.on("data", (c: Buffer) => {
          err += c.toString()
          const m = /on (http:\/\/\S+)/.exec(err)
          if (m) resolve(m[1]!)
        })
        child.once("exit", (code) => reject(new Error(`mcp exited ${code}: ${err}`)))
      })
      const client = new Client({ name: "test-http", version: "1.0.0" })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${url}?agent=web-agent`)))
      clients.push(client)
      const { entryId } = value<{ entryId: string }>(
        await call(client, "remember", { origin: "USER", content: "Ping me on Slack, not by email." }),
      )
      const webAgent = system.client.agent("web-agent")
      webAgent.lastSeq = await lastSeq(system.server.url)
      const view = await webAgent.view()
      expect(view.entries.map((e) => e.id)).toEqual([entryId])
      await client.close()
    } finally {
      child.kill("SIGTERM")
    }
  })
})
