/**
 * The MCP server of one agent:
 *
 *   npm run mcp -- --agent <id> [--http <port> [--host <address>]] [--role <role> [--budget <tokens>]]
 *
 * Speaks MCP over stdio (what Claude Desktop and Claude Code spawn), or over streamable HTTP on
 * `http://<host>:<port>/mcp` with `--http`. The agent is `--agent`, else WM_AGENT; with `--role` it is
 * registered first (idempotent for the same configuration); without, a new agent is registered as
 * `main` on first use and a known one is left as it is. It is a client of the system: it reaches
 * the API through the TypeScript SDK with NATS_URL, NATS_USER, NATS_PASS and NATS_INBOX_PREFIX.
 * Nothing but MCP goes to stdout; notices go to stderr.
 */
import { parseArgs } from "node:util"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { Config, Effect, Option } from "effect"
import type { RequestOf } from "../contracts/api.ts"
import { readSetting, settings } from "../contracts/settings.ts"
import { serveMcpOverHttp } from "../mcp/http.ts"
import { createMcpServer } from "../mcp/server.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import { natsSettingsFromConfig } from "../services/platform/nats/settings.ts"

const { values: flags } = parseArgs({
  options: {
    agent: { type: "string" },
    http: { type: "string" },
    host: { type: "string", default: "127.0.0.1" },
    role: { type: "string" },
    budget: { type: "string" },
  },
})

const fail = (message: string): never => {
  console.error(message)
  process.exit(2)
}

const main = async () => {
  const agentId = flags.agent ?? Option.getOrUndefined(readSetting(settings.WM_AGENT))
  if (agentId === undefined && flags.http === undefined)
    fail("name the agent: npm run mcp -- --agent <id> (or set WM_AGENT)")
  // The same configuration as every entry point reads, with Effect Config.
  const nats = await Effect.runPromise(natsSettingsFromConfig("wm-mcp"))
  const inboxPrefix = Option.getOrUndefined(await Effect.runPromise(Config.option(Config.String("NATS_INBOX_PREFIX"))))
  const client = await WorkingMemoryClient.connect({
    servers: nats.servers,
    name: `wm-mcp${agentId ? `-${agentId}` : ""}`,
    ...(nats.user !== undefined ? { user: nats.user } : {}),
    ...(nats.pass !== undefined ? { pass: nats.pass } : {}),
    ...(inboxPrefix !== undefined ? { inboxPrefix } : {}),
  })
  if (flags.role === undefined && agentId !== undefined) {
    // A new agent named without a role is registered as `main` on first use; a known one is left as it is.
    const agent = client.agent(agentId)
    const known = await agent.view().then(
      () => true,
      (error: unknown) => {
        if ((error as { _tag?: unknown })._tag === "AgentNotFound") return false
        fail(`cannot read agent '${agentId}': ${error instanceof Error ? error.message : String(error)}`)
        return true
      },
    )
    if (!known) {
      try {
        await agent.register({
          role: "main",
          ...(flags.budget !== undefined ? { budget: Number(flags.budget) } : {}),
        } as RequestOf<"registerAgent">)
        console.error(`registered '${agentId}' as main (name another role with --role)`)
      } catch (error) {
        fail(
          `cannot register '${agentId}' as main on first use: ${error instanceof Error ? error.message : String(error)}; name its role with --role`,
        )
      }
    }
  }
  if (flags.role !== undefined) {
    if (agentId === undefined) fail("--role registers the --agent; name it")
    const request = {
      role: flags.role,
      ...(flags.budget !== undefined ? { budget: Number(flags.budget) } : {}),
    } as RequestOf<"registerAgent">
    try {
      await client.agent(agentId!).register(request)
    } catch (error) {
      fail(`cannot register '${agentId}': ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  const shutdown: Array<() => Promise<void>> = []
  const stop = async () => {
    for (const step of shutdown) await step().catch(() => undefined)
    await client.close()
    process.exit(0)
  }
  process.once("SIGINT", () => void stop())
  process.once("SIGTERM", () => void stop())

  if (flags.http !== undefined) {
    const port = Number(flags.http)
    if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`--http '${flags.http}' is not a port`)
    const served = await serveMcpOverHttp(client, { port, host: flags.host, defaultAgent: agentId })
    shutdown.push(served.close)
    console.error(`MCP over streamable HTTP on ${served.url}${agentId ? ` (agent ${agentId})` : ""}`)
    return
  }
  const server = createMcpServer(client, agentId!)
  const transport = new StdioServerTransport()
  // The client closing stdin ends the session, and this process with it.
  transport.onclose = () => void stop()
  process.stdin.once("end", () => void stop())
  await server.connect(transport)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
