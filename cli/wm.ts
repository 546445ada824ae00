/**
 * The operator's audit tool. Every subcommand only reads (the log, and the
 * working service through its read API), except `auth-config`, which only
 * prints a configuration, and `forget`, which records the tombstone every
 * projection forgets by, then erases an entry or an agent from the log,
 * the dead letters and (through the projections) every store, and `migrate`,
 * which rewrites a log of the layout before partitions, or of another
 * WM_PARTITIONS or WM_PARTITION_PINS, into today's (services stopped).
 *
 *   npm run wm -- history <entryId> [--agent <id>] [--json] [--full]
 *   npm run wm -- replay --agent <id> (--at <ISO time | epoch ms> | --seq <n>) [--limit <tokens>] [--order timestamp|priority] [--entries <n>|all] [--json]
 *   npm run wm -- verify [--check <name>]... [--json]
 *   npm run wm -- forget --agent <id> [--entry <id>] [--wait <seconds>] [--json]
 *   npm run wm -- migrate [--json]
 *   npm run wm -- rotate-keys [--json]
 *   npm run wm -- status [--json]
 *   npm run wm -- auth-config --agent <id>... [--tenant <name>=<a>,<b>]... --credentials <file> [--out <file> [--compose-env <file>]]
 *
 * Connection: --server (or NATS_URL, default nats://127.0.0.1:4222), --user /
 * --pass (or NATS_USER / NATS_PASS), --inbox-prefix (or NATS_INBOX_PREFIX).
 * Progress of long reads goes to stderr (--no-progress to silence it).
 *
 * Exit status: 0 done (verify: everything matches; forget: complete); 1 verify
 * found differences, nothing to show, a forget refused (nothing written) or
 * not yet confirmed by every projection, status found a background projection
 * over WM_MAX_PROJECTION_LAG; 2 bad usage or no connection.
 */

import { writeFileSync } from "node:fs"
import { type ParseArgsConfig, parseArgs } from "node:util"
import type { NatsConnection } from "@nats-io/transport-node"
import { Option } from "effect"
import { SERVER_PING_CONFIG } from "../contracts/connection.ts"
import { deploymentPlacement } from "../contracts/partitions.ts"
import { routingConfig } from "../contracts/routing.ts"
import { readSetting, settings } from "../contracts/settings.ts"
import { contextOfView } from "../domain/context-builder.ts"
import { generatePassword, natsAuth, SERVICE_NAMES, type ServiceName, type TenantAccount } from "../infra/auth.ts"
import { deploymentEnv } from "../infra/deployment-env.ts"
import { rotateKeys } from "../services/platform/keys/rotate-keys.ts"
import { ForgetRefused, type Forgotten, forget } from "./audit/forget.ts"
import { collectHistory, formatHistory, HistoryError, historyJson } from "./audit/history.ts"
import { contentKeysOf, openConnection } from "./audit/log.ts"
import { migrateLog } from "./audit/migrate.ts"
import { progress } from "./audit/progress.ts"
import { type Cut, formatReplay, parseInstant, replayAgent, replayJson } from "./audit/replay.ts"
import { formatStatus, readStatus } from "./audit/status.ts"
import { type AuditContext, CHECKS, describeDifference, describeUnchecked } from "./audit/verify.ts"

const USAGE = `wm — audit working memory from its event log

  wm history <entryId> [--agent <id>] [--json] [--full]
      every event of one entry in order: recorded, the reads that served it,
      references, rung changes with their score and its parts, demotion, cues
  wm forget --agent <id> [--entry <id>] [--wait <seconds>] [--json]
      record the tombstone, then erase the entry (or the agent) from the log, the dead
      letters and every store; waits up to --wait (30 s) for the projections to confirm
  wm rotate-keys [--json]
      give every agent a new content key wrapped by the first of WM_KEY_ENCRYPTION_KEYS, re-wrap its
      entry keys under it and erase the old ones: a copy of the store taken before opens nothing once
      the retired key-encryption keys are removed
  wm replay --agent <id> (--at <ISO time | epoch ms> | --seq <n>) [--limit <tokens>] [--order timestamp|priority]
            [--entries <n>|all] [--json]
      the agent's working view and built context as they were at that instant
  wm verify [--check <name>]... [--json]
      rebuild projections from the log and compare them with the live ones
      (checks: ${CHECKS.map((c) => c.name).join(", ")})
  wm migrate [--json]
      with every service stopped: rewrite a log of the layout before partitions
      (wm.evt.<agent>.…), or one written with another WM_PARTITIONS or
      WM_PARTITION_PINS, into today's (wm.evt.<partition>.<agent>.…); resumable
  wm status [--json]
      where each service's work on each partition has got and how many events of the
      partition it is behind (the lag the gateways hold new entries back on)
  wm auth-config --agent <id>... [--tenant <name>=<agent>,<agent>]... [--service <name>]...
                 [--deny-op <operation>]... [--no-admin] --credentials <file> [--out <file> [--compose-env <file>]]
      a nats-server authorization block isolating each agent (see SECURITY.md); --compose-env
      also writes the settings docker-compose.yml reads (each service's user, QDRANT_API_KEY, WM_TENANTS);
      the block starts with routing-config's
  wm routing-config
      the nats-server subject mappings that deliver each request only to the replica owning its
      agent's partition, for WM_PARTITIONS and WM_PARTITION_PINS (regenerate when they change)

connection: --server <url> (NATS_URL), --user/--pass (NATS_USER/NATS_PASS), --inbox-prefix (NATS_INBOX_PREFIX)
`

class UsageError extends Error {
  override readonly name = "UsageError"
}

const connectionOptions = {
  server: { type: "string" },
  user: { type: "string" },
  pass: { type: "string" },
  "inbox-prefix": { type: "string" },
  "timeout-ms": { type: "string" },
  "no-progress": { type: "boolean", default: false },
  json: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const satisfies ParseArgsConfig["options"]

const parse = <O extends NonNullable<ParseArgsConfig["options"]>>(args: string[], options: O) => {
  try {
    return parseArgs({ args, options: { ...connectionOptions, ...options }, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
}

const positiveInt = (flag: string, value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new UsageError(`${flag} must be a positive integer, not '${value}'`)
  return Number(value)
}

const withConnection = async <A>(
  values: Record<string, unknown>,
  run: (nc: NatsConnection) => Promise<A>,
): Promise<A> => {
  let nc: NatsConnection
  try {
    nc = await openConnection({
      servers: values.server as string | undefined,
      user: values.user as string | undefined,
      pass: values.pass as string | undefined,
      inboxPrefix: values["inbox-prefix"] as string | undefined,
    })
  } catch (error) {
    throw new UsageError(`cannot connect to NATS: ${error instanceof Error ? error.message : String(error)}`)
  }
  try {
    return await run(nc)
  } finally {
    await nc.close().catch(() => undefined)
  }
}

const progressFor = (values: Record<string, unknown>) => (label: string) =>
  progress(label, { enabled: values["no-progress"] !== true })

const out = (text: string) => process.stdout.write(text)

// ---------------------------------------------------------------------------

const history = async (args: string[]): Promise<number> => {
  const { values, positionals } = parse(args, { agent: { type: "string" }, full: { type: "boolean", default: false } })
  const entryId = positionals[0]
  if (entryId === undefined || positionals.length > 1) throw new UsageError("history takes one entry id")
  return withConnection(values, async (nc) => {
    try {
      const { agentId, items } = await collectHistory(nc, entryId, values.agent, progressFor(values))
      out(
        values.json
          ? `${JSON.stringify(historyJson(agentId, entryId, items), null, 2)}\n`
          : formatHistory(agentId, entryId, items, { width: values.full ? 0 : 100 }),
      )
      return 0
    } catch (error) {
      if (error instanceof HistoryError) {
        process.stderr.write(`${error.message}\n`)
        return 1
      }
      throw error
    }
  })
}

const replay = async (args: string[]): Promise<number> => {
  const { values, positionals } = parse(args, {
    agent: { type: "string" },
    at: { type: "string" },
    seq: { type: "string" },
    limit: { type: "string" },
    order: { type: "string" },
    entries: { type: "string" },
  })
  if (positionals.length > 0)
    throw new UsageError(`replay takes no positional arguments (got ${positionals.join(" ")})`)
  if (values.agent === undefined) throw new UsageError("replay needs --agent <id>")
  if (values.at === undefined && values.seq === undefined) throw new UsageError("replay needs --at <time> or --seq <n>")
  if (values.order !== undefined && values.order !== "timestamp" && values.order !== "priority") {
    throw new UsageError("--order is timestamp or priority")
  }
  let cut: Cut
  try {
    const seq = positiveInt("--seq", values.seq)
    cut = {
      ...(values.at !== undefined ? { at: parseInstant(values.at) } : {}),
      ...(seq !== undefined ? { seq } : {}),
    }
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
  const limit = positiveInt("--limit", values.limit)
  const entries = values.entries === "all" ? Infinity : (positiveInt("--entries", values.entries) ?? 50)
  const agentId = values.agent
  return withConnection(values, async (nc) => {
    const replayed = await replayAgent(nc, agentId, cut, progressFor(values)(`replay ${agentId}`))
    const context = replayed.view
      ? contextOfView(replayed.view, {
          ...(limit !== undefined ? { limit } : {}),
          ...(values.order !== undefined ? { order: values.order as "timestamp" | "priority" } : {}),
        })
      : undefined
    out(
      values.json
        ? `${JSON.stringify(replayJson(replayed, context), null, 2)}\n`
        : formatReplay(replayed, context, { entries }),
    )
    return replayed.view ? 0 : 1
  })
}

const verify = async (args: string[]): Promise<number> => {
  const { values, positionals } = parse(args, { check: { type: "string", multiple: true } })
  if (positionals.length > 0)
    throw new UsageError(`verify takes no positional arguments (got ${positionals.join(" ")})`)
  const names = values.check ?? CHECKS.map((c) => c.name)
  const unknown = names.filter((n) => !CHECKS.some((c) => c.name === n))
  if (unknown.length > 0)
    throw new UsageError(`unknown check ${unknown.join(", ")}; checks: ${CHECKS.map((c) => c.name).join(", ")}`)
  const timeoutMs = positiveInt("--timeout-ms", values["timeout-ms"]) ?? 5_000
  return withConnection(values, async (nc) => {
    const context: AuditContext = { nc, timeoutMs, progress: progressFor(values) }
    const results = []
    for (const check of CHECKS.filter((c) => names.includes(c.name))) {
      const outcome = await check.run(context)
      results.push({
        name: check.name,
        ok: outcome.differences.length === 0 && outcome.unchecked.length === 0,
        ...outcome,
      })
    }
    if (values.json) {
      out(`${JSON.stringify({ ok: results.every((r) => r.ok), checks: results }, null, 2)}\n`)
    } else {
      for (const r of results) {
        const count = r.differences.length
        const problems = [
          `${count} difference${count === 1 ? "" : "s"}`,
          ...(r.unchecked.length > 0 ? [`${r.unchecked.length} not compared`] : []),
        ].join(", ")
        out(
          `${r.ok ? "ok  " : "FAIL"}  ${r.name}: ${r.summary}; ${r.ok ? "the live projection matches the log" : problems}\n`,
        )
        for (const d of r.differences) out(`      ${describeDifference(d)}\n`)
        for (const u of r.unchecked) out(`      ${describeUnchecked(u)}\n`)
      }
    }
    return results.every((r) => r.ok) ? 0 : 1
  })
}

const authConfigCommand = async (args: string[]): Promise<number> => {
  const { values, positionals } = parse(args, {
    agent: { type: "string", multiple: true },
    tenant: { type: "string", multiple: true },
    service: { type: "string", multiple: true },
    "deny-op": { type: "string", multiple: true },
    "no-admin": { type: "boolean", default: false },
    credentials: { type: "string" },
    out: { type: "string" },
    "compose-env": { type: "string" },
  })
  if (positionals.length > 0)
    throw new UsageError(`auth-config takes no positional arguments (got ${positionals.join(" ")})`)
  const agents = values.agent ?? []
  if (agents.length === 0) throw new UsageError("auth-config needs at least one --agent <id>")
  if (values.credentials === undefined)
    throw new UsageError("auth-config needs --credentials <file> to store the generated passwords")
  const tenants: TenantAccount[] = (values.tenant ?? []).map((t) => {
    const [name, list] = t.split("=")
    if (!name || !list) throw new UsageError(`--tenant takes <name>=<agent>,<agent>… (got '${t}')`)
    return { name, agents: list.split(",").filter((a) => a.length > 0), password: generatePassword() }
  })
  const services = (values.service ?? SERVICE_NAMES) as ServiceName[]
  const badService = services.find((s) => !SERVICE_NAMES.includes(s))
  if (badService !== undefined)
    throw new UsageError(`unknown service ${badService}; services: ${SERVICE_NAMES.join(", ")}`)
  let auth: ReturnType<typeof natsAuth>
  try {
    auth = natsAuth({
      agents,
      tenants,
      services,
      ...(values["no-admin"] ? { admin: false as const } : {}),
      denyAgentOperations: values["deny-op"] ?? [],
    })
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
  const credentials = {
    agents: Object.fromEntries(agents.map((a) => [a, auth.agent(a)])),
    tenants: Object.fromEntries(tenants.map((t) => [t.name, auth.tenant(t.name)])),
    services: Object.fromEntries(services.map((s) => [s, auth.service(s)])),
    ...(auth.admin ? { admin: auth.admin } : {}),
  }
  writeFileSync(values.credentials, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 })
  // The server's configuration: pings that find a partitioned peer stale, the routing of requests by
  // partition, then the users.
  const config = `${SERVER_PING_CONFIG}\n${serverRouting()}\n${auth.config}`
  if (values.out !== undefined) writeFileSync(values.out, config, { mode: 0o600 })
  else out(config)
  if (values["compose-env"] !== undefined) {
    if (values.out === undefined)
      throw new UsageError("--compose-env needs --out <file>: docker-compose.yml mounts the configuration from there")
    let env: string
    try {
      env = deploymentEnv(auth, values.out)
    } catch (error) {
      throw new UsageError(
        `--compose-env: ${error instanceof Error ? error.message : String(error)} (docker-compose.yml runs gateway, working, fade, substrate and memory)`,
      )
    }
    writeFileSync(values["compose-env"], env, { mode: 0o600 })
    process.stderr.write(`docker compose settings written to ${values["compose-env"]}\n`)
  }
  process.stderr.write(`credentials of ${auth.users.length} users written to ${values.credentials}\n`)
  return 0
}

// ---------------------------------------------------------------------------

const forgetCommand = async (args: string[]): Promise<number> => {
  const { values, positionals } = parse(args, {
    agent: { type: "string" },
    entry: { type: "string" },
    wait: { type: "string" },
  })
  if (positionals.length > 0)
    throw new UsageError(`forget takes no positional arguments (got ${positionals.join(" ")})`)
  if (values.agent === undefined)
    throw new UsageError("forget needs --agent <id> (and --entry <id> to forget one entry)")
  const agentId = values.agent
  const waitSeconds = values.wait === undefined ? 30 : Number(values.wait)
  if (!Number.isFinite(waitSeconds) || waitSeconds < 0)
    throw new UsageError(`--wait must be a number of seconds, not '${values.wait}'`)
  return withConnection(values, async (nc) => {
    let result: Forgotten
    try {
      result = await forget(nc, agentId, values.entry, { waitMs: waitSeconds * 1_000 })
    } catch (error) {
      if (!(error instanceof ForgetRefused)) throw error
      process.stderr.write(`wm forget: ${error.message}; nothing was written\n`)
      return 1
    }
    const what = `${values.entry !== undefined ? `entry ${values.entry} of ` : ""}agent ${agentId}`
    out(
      values.json
        ? `${JSON.stringify({ agentId, entryId: values.entry ?? null, ...result })}\n`
        : [
            `${result.recorded ? "forgot" : "resumed forgetting"} ${what}: tombstone at sequence ${result.tombstoneSeq}`,
            `  erased ${result.erasedEvents} event(s) from the log and ${result.erasedDeadLetters} dead letter(s)`,
            ...(result.erasedSubstrateRecords > 0
              ? [`  erased ${result.erasedSubstrateRecords} record(s) from the retired wm_substrate bucket`]
              : []),
            `  confirmed by: ${result.confirmed.join(", ") || "(no durable projection)"}`,
            result.complete
              ? result.retained.length === 0
                ? "  complete: no stream or store holds the content"
                : `  erased from every stream and through every store's API; still on disk below a store's API:\n${result.retained.map((line) => `    ${line}`).join("\n")}`
              : `  not complete yet: waiting for ${result.pending.join(", ") || "the log"}; the eraser beside the substrate finishes it (or run this again)`,
            "",
          ].join("\n"),
    )
    return result.complete ? 0 : 1
  })
}

const migrateCommand = async (args: string[]): Promise<number> => {
  const { values, positionals } = parse(args, {})
  if (positionals.length > 0)
    throw new UsageError(`migrate takes no positional arguments (got ${positionals.join(" ")})`)
  return withConnection(values, async (nc) => {
    const result = await migrateLog(nc)
    out(
      values.json
        ? `${JSON.stringify(result)}\n`
        : result.alreadyCurrent
          ? "every record is in its agent's partition already: nothing to migrate\n"
          : `migrated ${result.records} record(s), ${result.upgraded} of them to their agent's partition now, ${result.sealed} with their content sealed now; checkpoints, snapshots and the request ledger were cleared\n`,
    )
    return 0
  })
}

const rotateKeysCommand = async (args: string[]): Promise<number> => {
  const { values, positionals } = parse(args, {})
  if (positionals.length > 0)
    throw new UsageError(`rotate-keys takes no positional arguments (got ${positionals.join(" ")})`)
  return withConnection(values, async (nc) => {
    const keys = await contentKeysOf(nc)
    const result = await rotateKeys(nc, keys.store)
    out(
      values.json
        ? `${JSON.stringify({ kek: keys.store.keks.current.id, ...result })}\n`
        : `rotated ${result.agents} agent key(s) under key-encryption key '${keys.store.keks.current.id}', re-wrapped ${result.entryKeys} entry key(s) and ${result.snapshotKeys} snapshot key(s), erased ${result.erased} old revision(s)\n`,
    )
    return 0
  })
}

const statusCommand = async (args: string[]): Promise<number> => {
  const { values, positionals } = parse(args, {})
  if (positionals.length > 0)
    throw new UsageError(`status takes no positional arguments (got ${positionals.join(" ")})`)
  return withConnection(values, async (nc) => {
    const status = await readStatus(nc, readSetting(settings.WM_MAX_PROJECTION_LAG))
    out(values.json ? `${JSON.stringify(status, null, 2)}\n` : formatStatus(status))
    return status.partitions.some((p) => p.overLimit) ? 1 : 0
  })
}

/** The subject mappings routing each request to its partition's owner, for this environment's placement. */
const serverRouting = (): string => {
  try {
    return routingConfig(deploymentPlacement())
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
}

const routingConfigCommand = async (args: string[]): Promise<number> => {
  if (args.length > 0) throw new UsageError(`routing-config takes no arguments (got ${args.join(" ")})`)
  out(serverRouting())
  return 0
}

const commands: Record<string, (args: string[]) => Promise<number>> = {
  history,
  replay,
  verify,
  forget: forgetCommand,
  migrate: migrateCommand,
  "rotate-keys": rotateKeysCommand,
  status: statusCommand,
  "auth-config": authConfigCommand,
  "routing-config": routingConfigCommand,
}

const main = async (argv: string[]): Promise<number> => {
  const [command, ...rest] = argv
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    out(USAGE)
    return command === undefined ? 2 : 0
  }
  const run = commands[command]
  if (run === undefined) {
    process.stderr.write(`unknown command '${command}'\n\n${USAGE}`)
    return 2
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    out(USAGE)
    return 0
  }
  try {
    return await run(rest)
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`wm ${command}: ${error.message}\n`)
      return 2
    }
    const detail =
      error instanceof Error
        ? Option.isSome(readSetting(settings.WM_DEBUG))
          ? (error.stack ?? error.message)
          : error.message
        : String(error)
    process.stderr.write(`wm ${command}: ${detail}\n`)
    return 2
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    console.error(error)
    process.exitCode = 2
  },
)
