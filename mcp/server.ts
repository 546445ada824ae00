/**
 * An MCP server for one agent: the tools of mcp/tools.ts, each answered by the API through the
 * TypeScript SDK, and the agent's working view as a resource. Refusals come back as MCP tool errors
 * (`isError`) carrying the API's typed error: its tag, and the field and reason where it names them.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js"
import { mentions } from "../cli/audit/history.ts"
import { ValidationError } from "../contracts/errors.ts"
import { agentStepSubject, entrySubject } from "../contracts/subjects.ts"
import type { AgentClient, WorkingMemoryClient } from "../sdk/client.ts"
import { readOwnEvents } from "../sdk/own-events.ts"
import { inputSchemaOf, TOOLS, type ToolSpec } from "./tools.ts"

export const SERVER_NAME = "working-memory"
export const SERVER_VERSION = "0.1.0"

type Args = Record<string, unknown>

/** The resource holding the agent's working view. */
export const viewResourceUri = (agentId: string) => `wm://agents/${agentId}/view`

const ok = (value: unknown, text?: string): CallToolResult => ({
  content: [{ type: "text", text: text ?? JSON.stringify(value, null, 2) }],
  structuredContent: value as Record<string, unknown>,
})

/** The API's typed error (or the SDK's NoResponse) as an MCP tool error. */
export const toolError = (error: unknown): CallToolResult => {
  const tagged = typeof error === "object" && error !== null && "_tag" in error
  const tag = tagged ? String((error as { _tag: unknown })._tag) : error instanceof Error ? error.name : "Error"
  const message = error instanceof Error ? error.message : String(error)
  const fields = tagged ? JSON.parse(JSON.stringify(error)) : {}
  const detail = { ...fields, _tag: tag, message }
  const where = typeof detail.field === "string" ? ` on ${detail.field}` : ""
  return {
    isError: true,
    content: [{ type: "text", text: `${tag}${where}: ${message}` }],
    structuredContent: { error: detail },
  }
}

/** The session of one MCP connection: its agent, and the step it began. */
class Session {
  readonly agent: AgentClient
  readonly client: WorkingMemoryClient
  stepId: string | undefined

  constructor(client: WorkingMemoryClient, agentId: string) {
    this.client = client
    this.agent = client.agent(agentId)
  }

  /** The step a call names, else the one begun here, else the agent's open step. */
  async stepOf(args: Args): Promise<string | undefined> {
    if (typeof args.stepId === "string") return args.stepId
    if (this.stepId !== undefined) return this.stepId
    return (await this.agent.view()).step?.stepId
  }

  async withStep(args: Args): Promise<Args> {
    const stepId = await this.stepOf(args)
    return stepId === undefined ? args : { ...args, stepId }
  }

  async history(entryId: string) {
    const agentId = this.agent.agentId
    const own = entrySubject(agentId, entryId)
    const steps = agentStepSubject(agentId)
    const events = (await readOwnEvents(this.client, agentId)).filter(
      (e) => e.subject === own || (e.subject === steps && mentions(e.event, entryId)),
    )
    // An embedding is hundreds of numbers in base64: say which model made it, not its bytes.
    return {
      entryId,
      events: events.map(({ seq, event }) => {
        if (event._tag !== "EntryDemoted") return { seq, event }
        const { vector: _vector, ...embedding } = event.embedding
        return { seq, event: { ...event, embedding } }
      }),
    }
  }
}

type Handler = (session: Session, args: Args) => Promise<CallToolResult>

// The SDK's methods take the API's request types; the API decodes what arrives and refuses what is wrong
// with a ValidationError naming the field, so arguments pass through as the caller gave them.
// biome-ignore lint/suspicious/noExplicitAny: arguments are validated by the API, not here.
type Loose = any

const handlers: Readonly<Record<string, Handler>> = {
  remember: async (s, args) => ok(await s.agent.record(args as Loose)),
  recall: async (s, args) => {
    const { query, ...options } = args
    return ok(await s.agent.query(query as Loose, { explain: true, ...options } as Loose))
  },
  context: async (s, args) => {
    const built = await s.agent.buildContext((await s.withStep(args)) as Loose)
    const summary = `${built.tokens}/${built.budget} tokens, ${built.items.length} entries served, ${built.omitted} left out`
    return {
      content: [
        { type: "text", text: built.text },
        { type: "text", text: summary },
      ],
      structuredContent: built as unknown as Record<string, unknown>,
    }
  },
  begin_step: async (s, args) => {
    const started = await s.agent.beginStep(args as Loose)
    s.stepId = started.stepId
    return ok(started)
  },
  end_step: async (s, args) => {
    const request = await s.withStep(args)
    const ended = await s.agent.endStep(request.stepId as Loose)
    if (ended.stepId === s.stepId) s.stepId = undefined
    return ok(ended)
  },
  reference: async (s, args) => {
    const { stepId, entryIds, quotes } = (await s.withStep(args)) as Loose
    return ok(await s.agent.reference(stepId, entryIds ?? [], quotes))
  },
  raw: async (s, args) => {
    const record = await s.agent.raw(args.entryId as Loose)
    return { content: [{ type: "text", text: record.content }], structuredContent: record as Loose }
  },
  history: async (s, args) => ok(await s.history(String(args.entryId))),
}

const toolList = (tools: ReadonlyArray<ToolSpec>) =>
  tools.map((tool) => ({
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: inputSchemaOf(tool) as { type: "object" },
  }))

/** A server for one MCP connection, speaking for `agentId` through `client`. */
export const createMcpServer = (client: WorkingMemoryClient, agentId: string): Server => {
  const session = new Session(client, agentId)
  const server = new Server(
    { name: SERVER_NAME, version: SERVER_VERSION },
    {
      capabilities: { tools: {}, resources: {}, prompts: {} },
      instructions: `Working memory of agent '${agentId}'. Remember what matters as it happens; begin a step, build the context for it, reference the entries you used, end the step. Recall searches everything the agent ever recorded.`,
    },
  )
  const tools = toolList(TOOLS)

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const handler = handlers[request.params.name]
    if (handler === undefined)
      return toolError(
        ValidationError.one(
          "name",
          `no tool '${request.params.name}'; the tools are ${TOOLS.map((t) => t.name).join(", ")}`,
        ),
      )
    try {
      return await handler(session, request.params.arguments ?? {})
    } catch (error) {
      return toolError(error)
    }
  })

  const viewUri = viewResourceUri(agentId)
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [
      {
        uri: viewUri,
        name: "working-view",
        title: `Working view of ${agentId}`,
        description: "Budget use, entries by rung (raw, key points, summary), the entries and cues, the open step.",
        mimeType: "application/json",
      },
    ],
  }))
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    if (request.params.uri !== viewUri) throw new Error(`no resource ${request.params.uri}; this server has ${viewUri}`)
    const view = await session.agent.view()
    return { contents: [{ uri: viewUri, mimeType: "application/json", text: JSON.stringify(view, null, 2) }] }
  })

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: [
      {
        name: "with-memory",
        title: "Answer with working memory",
        description: "Builds the agent's context for the current step (or without one) and asks to answer with it.",
        arguments: [{ name: "question", description: "what to answer", required: true }],
      },
    ],
  }))
  server.setRequestHandler(GetPromptRequestSchema, async (request) => {
    if (request.params.name !== "with-memory") throw new Error(`no prompt ${request.params.name}`)
    const question = request.params.arguments?.question ?? ""
    const stepId = await session.stepOf({})
    const built = await session.agent.buildContext(stepId === undefined ? {} : { stepId })
    return {
      description: `Context of ${agentId}: ${built.tokens}/${built.budget} tokens`,
      messages: [
        {
          role: "user",
          content: { type: "text", text: `What you remember:\n\n${built.text}\n\n${question}` },
        },
      ],
    }
  })
  return server
}
