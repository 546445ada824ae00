/**
 * One command to run the whole system on the embedded defaults:
 *
 *   npm start [-- --no-demo] [--exit-after-demo]
 *
 * Connects to NATS_URL (default nats://127.0.0.1:4222); when nothing answers
 * there and nats-server is installed, starts one with JetStream and its store
 * in .data/nats. Then runs every service in this process and a short demo.
 * Long-term records are kept in .data/longterm (WM_LONGTERM_DIR, unless set).
 */
import { connect } from "@nats-io/transport-node"
import { ManagedRuntime } from "effect"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { runDemo } from "../examples/demo.ts"
import { NATS_INSTALL_HINT, natsServerBinary, natsServerVersion, startNatsServer, type NatsServerProcess } from "../infra/nats-server.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import { NatsSettings, DEFAULT_NATS_URL } from "../services/nats/settings.ts"
import { systemLayer } from "../services/system.ts"
import { Working } from "../services/working/working.ts"

const { values: flags } = parseArgs({
  options: {
    "no-demo": { type: "boolean", default: false },
    "exit-after-demo": { type: "boolean", default: false },
    "data-dir": { type: "string", default: join(process.cwd(), ".data") },
  },
})

const answers = async (url: string) => {
  try {
    const nc = await connect({ servers: url, timeout: 1_000, reconnect: false })
    await nc.close()
    return true
  } catch {
    return false
  }
}

const main = async () => {
  const url = process.env.NATS_URL ?? DEFAULT_NATS_URL
  let server: NatsServerProcess | undefined
  if (!(await answers(url))) {
    if (process.env.NATS_URL !== undefined || natsServerBinary() === undefined) {
      console.error(`No NATS server answers at ${url}.\n${NATS_INSTALL_HINT}`)
      process.exit(1)
    }
    const port = Number(new URL(url.replace(/^nats:/, "http:")).port || 4222)
    server = await startNatsServer({ port, storeDir: join(flags["data-dir"], "nats"), removeStoreOnStop: false })
    console.log(`Started nats-server ${natsServerVersion()} with JetStream on ${server.url} (store ${server.storeDir})`)
  } else {
    console.log(`Using the NATS server at ${url}`)
  }

  const servers = server ? [server.url] : url.split(",")
  // Long-term records on disk beside the log, resumed from their checkpoint at the next start.
  process.env.WM_LONGTERM_DIR ??= join(flags["data-dir"], "longterm")
  const runtime = ManagedRuntime.make(systemLayer((name) => NatsSettings.make({ servers, name })))
  const working = await runtime.runPromise(Working)
  console.log(`Working service warmed up: replayed ${working.warmUp.events} events in ${working.warmUp.millis} ms`)

  const stop = async () => {
    await runtime.dispose()
    await server?.stop()
  }
  process.once("SIGINT", () => void stop().then(() => process.exit(0)))
  process.once("SIGTERM", () => void stop().then(() => process.exit(0)))

  if (!flags["no-demo"]) {
    const client = await WorkingMemoryClient.connect({ servers })
    await runDemo(client.agent(`demo-${Date.now().toString(36)}`), { pauseMs: flags["exit-after-demo"] ? 0 : 150 })
    await client.close()
  }
  if (flags["exit-after-demo"]) {
    await stop()
    return
  }
  console.log(`\nServing on ${servers.join(", ")} — API subjects wm.api.<agentId>.<operation> (see README). Ctrl-C to stop.`)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
