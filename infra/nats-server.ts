/**
 * Starts real nats-server processes on loopback: one JetStream server, or a
 * three-node JetStream cluster. Used by the one-command start, the tests and
 * the benchmarks. Nothing here is mocked: it runs the installed binary.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Option } from "effect"
import { SERVER_PING_CONFIG } from "../contracts/connection.ts"
import type { Placement } from "../contracts/partition-pins.ts"
import { deploymentPlacement } from "../contracts/partitions.ts"
import { routingConfig } from "../contracts/routing.ts"
import { readSetting, settings } from "../contracts/settings.ts"

export const NATS_INSTALL_HINT =
  "nats-server was not found. Install it (Debian/Ubuntu: `sudo apt-get install -y nats-server`, " +
  "macOS: `brew install nats-server`, or a release from https://github.com/nats-io/nats-server/releases) " +
  "or point NATS_URL at a running JetStream-enabled server."

export const natsServerBinary = (): string | undefined => {
  const candidates = [
    Option.getOrUndefined(readSetting(settings.NATS_SERVER_BIN)),
    "nats-server",
    "/usr/bin/nats-server",
    "/usr/sbin/nats-server",
  ]
  for (const candidate of candidates) {
    if (!candidate) continue
    const probe = spawnSync(candidate, ["--version"], { encoding: "utf8" })
    if (probe.status === 0) return candidate
  }
  return undefined
}

export const natsServerVersion = (): string | undefined => {
  const bin = natsServerBinary()
  if (!bin) return undefined
  const out = spawnSync(bin, ["--version"], { encoding: "utf8" }).stdout
  return out.trim().replace(/^nats-server:\s*v?/, "")
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      if (address === null || typeof address === "string") return reject(new Error("no port"))
      server.close(() => resolve(address.port))
    })
  })

export interface NatsServerProcess {
  readonly url: string
  readonly port: number
  readonly storeDir: string
  readonly name: string
  /** Graceful stop (SIGTERM), waits for exit. */
  readonly stop: () => Promise<void>
  /** SIGKILL, waits for exit: a crash, for fault tests. */
  readonly kill: () => Promise<void>
  /** Starts the same server again on the same port and store. */
  readonly restart: () => Promise<void>
  readonly isRunning: () => boolean
}

interface StartOptions {
  readonly port?: number
  /** The address the server listens on (default: 127.0.0.1). */
  readonly host?: string
  /** A command the server is started under, e.g. `ip netns exec <namespace>` (default: none). */
  readonly command?: ReadonlyArray<string>
  /** JetStream store directory; a fresh temporary one when omitted. */
  readonly storeDir?: string
  /** Remove the store directory on stop (default: true for temporary stores). */
  readonly removeStoreOnStop?: boolean
  /** Extra configuration file contents (cluster nodes use this). */
  readonly config?: string
  /**
   * The placement whose requests the server routes to their partition's owner (contracts/routing.ts);
   * default: the environment's (WM_PARTITIONS, WM_PARTITION_PINS); false: none, every replica receives
   * every request.
   */
  readonly routing?: Placement | false
  readonly name?: string
  readonly readyTimeoutMs?: number
  /** Pass -DV to the server and echo its log. */
  readonly verbose?: boolean
}

const waitForReady = (child: ChildProcess, timeoutMs: number, name: string): Promise<void> =>
  new Promise((resolve, reject) => {
    let log = ""
    const timer = setTimeout(() => {
      cleanup()
      reject(new Error(`${name} did not report ready within ${timeoutMs} ms:\n${log}`))
    }, timeoutMs)
    const onData = (chunk: Buffer) => {
      log += chunk.toString()
      if (log.includes("Server is ready")) {
        cleanup()
        resolve()
      }
    }
    const onExit = (code: number | null) => {
      cleanup()
      reject(new Error(`${name} exited with code ${code} before it was ready:\n${log}`))
    }
    const cleanup = () => {
      clearTimeout(timer)
      child.stderr?.off("data", onData)
      child.off("exit", onExit)
    }
    child.stderr?.on("data", onData)
    child.on("exit", onExit)
  })

const waitForExit = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
  })

export const startNatsServer = async (options: StartOptions = {}): Promise<NatsServerProcess> => {
  const bin = natsServerBinary()
  if (!bin) throw new Error(NATS_INSTALL_HINT)
  const port = options.port ?? (await freePort())
  const temporary = options.storeDir === undefined
  const storeDir = options.storeDir ?? mkdtempSync(join(tmpdir(), "wm-nats-"))
  mkdirSync(storeDir, { recursive: true })
  const removeStore = options.removeStoreOnStop ?? temporary
  const name = options.name ?? `nats-${port}`
  const host = options.host ?? "127.0.0.1"
  const args = ["-a", host, "-p", String(port), "-js", "-sd", storeDir, "-n", name]
  const routing = options.routing ?? deploymentPlacement()
  const config = [routing === false ? "" : routingConfig(routing), options.config ?? ""].join("\n")
  if (config.trim() !== "") {
    const configFile = join(storeDir, `${name}.conf`)
    writeFileSync(configFile, config)
    args.push("-c", configFile)
  }
  if (options.verbose) args.push("-DV")

  let child: ChildProcess
  const launch = async () => {
    const [program, ...programArgs] = [...(options.command ?? []), bin, ...args]
    child = spawn(program!, programArgs, { stdio: ["ignore", "ignore", "pipe"] })
    if (options.verbose) child.stderr?.on("data", (c: Buffer) => process.stderr.write(c))
    await waitForReady(child, options.readyTimeoutMs ?? 15_000, name)
    // Keep draining stderr so the server never blocks on a full pipe.
    child.stderr?.on("data", () => {})
  }
  await launch()
  const running = () => child.exitCode === null && child.signalCode === null

  return {
    url: `nats://${host}:${port}`,
    port,
    storeDir,
    name,
    isRunning: running,
    stop: async () => {
      if (running()) {
        child.kill("SIGTERM")
        await waitForExit(child)
      }
      if (removeStore) rmSync(storeDir, { recursive: true, force: true })
    },
    kill: async () => {
      if (running()) {
        child.kill("SIGKILL")
        await waitForExit(child)
      }
    },
    restart: async () => {
      if (running()) throw new Error(`${name} is still running`)
      await launch()
    },
  }
}

/**
 * Each node says it is ready before the cluster has elected its JetStream meta leader, and until then
 * every JetStream request times out: a cluster is started once JetStream answers.
 */
const untilJetStreamAnswers = async (servers: ReadonlyArray<string>, timeoutMs = 60_000): Promise<void> => {
  const nc = await connect({ servers: [...servers] })
  try {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      try {
        await (await jetstreamManager(nc, { timeout: 2_000 })).getAccountInfo()
        return
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`the cluster's JetStream did not answer within ${timeoutMs} ms: ${error}`)
        await new Promise((r) => setTimeout(r, 250))
      }
    }
  } finally {
    await nc.close()
  }
}

export interface NatsCluster {
  readonly nodes: ReadonlyArray<NatsServerProcess>
  /** Client URLs of every node, for a client that fails over between them. */
  readonly servers: ReadonlyArray<string>
  readonly stop: () => Promise<void>
}

/** A JetStream cluster of `size` nodes, each with its own store: on loopback unless placed elsewhere. */
export const startNatsCluster = async (
  size = 3,
  clusterName = "wm",
  options: {
    /** Client port of the first node; the others follow (default: free ports). */
    readonly firstPort?: number
    /** Where the nodes keep their stores, kept on stop (default: a temporary directory, removed). */
    readonly dataDir?: string
    /**
     * Where each node runs: its own address (then its ports are 4222, 6222 for routes and 8222 for
     * monitoring) and the command it is started under (a network namespace, for partition tests).
     * Default: loopback, free ports, no monitoring.
     */
    readonly placement?: ReadonlyArray<{ readonly host: string; readonly command?: ReadonlyArray<string> }>
  } = {},
): Promise<NatsCluster> => {
  const root = options.dataDir ?? mkdtempSync(join(tmpdir(), "wm-cluster-"))
  mkdirSync(root, { recursive: true })
  const clientPorts: number[] = []
  const routePorts: number[] = []
  // A port closed after probing may be handed out again: every node's two ports must differ from the rest.
  const taken = new Set<number>()
  const distinctFreePort = async () => {
    for (;;) {
      const port = await freePort()
      if (!taken.has(port)) {
        taken.add(port)
        return port
      }
    }
  }
  for (let i = 0; i < size; i++) {
    if (options.placement !== undefined) {
      clientPorts.push(4222)
      routePorts.push(6222)
      continue
    }
    clientPorts.push(options.firstPort !== undefined ? options.firstPort + i : await distinctFreePort())
    routePorts.push(options.firstPort !== undefined ? options.firstPort + 2000 + i : await distinctFreePort())
  }
  const hostOf = (i: number) => options.placement?.[i]?.host ?? "127.0.0.1"
  const routes = routePorts.map((p, i) => `nats-route://${hostOf(i)}:${p}`).join(", ")
  const nodes = await Promise.all(
    clientPorts.map((port, i) => {
      const name = `n${i + 1}`
      const storeDir = join(root, name)
      const config = [
        // JetStream and its store come from -js -sd (startNatsServer): nats-server refuses store_dir given twice.
        `server_name: ${name}`,
        SERVER_PING_CONFIG,
        `cluster {`,
        `  name: ${clusterName}`,
        `  listen: ${hostOf(i)}:${routePorts[i]}`,
        `  routes: [ ${routes} ]`,
        `}`,
        ...(options.placement !== undefined ? [`http: "${hostOf(i)}:8222"`] : []),
      ].join("\n")
      const command = options.placement?.[i]?.command
      return startNatsServer({
        port,
        host: hostOf(i),
        ...(command !== undefined ? { command } : {}),
        storeDir,
        config,
        name,
        removeStoreOnStop: false,
        readyTimeoutMs: 30_000,
      })
    }),
  )
  await untilJetStreamAnswers(nodes.map((n) => n.url))
  return {
    nodes,
    servers: nodes.map((n) => n.url),
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()))
      if (options.dataDir === undefined) rmSync(root, { recursive: true, force: true })
    },
  }
}
