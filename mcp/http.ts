/**
 * MCP over streamable HTTP: one MCP session per client (the `mcp-session-id` header), each with
 * its own server and agent — the one named by `?agent=<id>` on the URL, else the default agent.
 */
import { randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import type { WorkingMemoryClient } from "../sdk/client.ts"
import { createMcpServer } from "./server.ts"

export const MCP_PATH = "/mcp"

export interface HttpOptions {
  readonly port: number
  /** Default 127.0.0.1: a local assistant's server, not a public one. */
  readonly host?: string
  readonly defaultAgent?: string | undefined
}

export interface HttpMcp {
  readonly url: string
  readonly close: () => Promise<void>
}

const readBody = async (req: IncomingMessage): Promise<unknown> => {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const text = Buffer.concat(chunks).toString("utf8")
  return text.length === 0 ? undefined : JSON.parse(text)
}

const reply = (res: ServerResponse, status: number, message: string) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }))
}

export const serveMcpOverHttp = async (client: WorkingMemoryClient, options: HttpOptions): Promise<HttpMcp> => {
  const host = options.host ?? "127.0.0.1"
  const sessions = new Map<string, StreamableHTTPServerTransport>()

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://localhost")
    if (url.pathname !== MCP_PATH) return reply(res, 404, `MCP is served on ${MCP_PATH}`)
    const sessionId = req.headers["mcp-session-id"]
    const body = req.method === "POST" ? await readBody(req) : undefined
    const existing = typeof sessionId === "string" ? sessions.get(sessionId) : undefined
    if (existing) return existing.handleRequest(req, res, body)
    if (sessionId !== undefined) return reply(res, 404, "unknown MCP session")
    if (req.method !== "POST" || !isInitializeRequest(body))
      return reply(res, 400, "no MCP session: start one with an initialize request")
    const agentId = url.searchParams.get("agent") ?? options.defaultAgent
    if (agentId === undefined) return reply(res, 400, "name the agent: ?agent=<id> (or start the server with --agent)")
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, transport),
    })
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId)
    }
    await createMcpServer(client, agentId).connect(transport)
    return transport.handleRequest(req, res, body)
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      if (!res.headersSent) reply(res, 400, error instanceof Error ? error.message : String(error))
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port, host, () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://${host}:${port}${MCP_PATH}`,
    close: async () => {
      for (const transport of sessions.values()) await transport.close().catch(() => undefined)
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
