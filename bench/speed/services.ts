/** Service processes the benchmark starts: `node <script>` against the benchmark's server. */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { ensureTopology } from "../../services/platform/nats/topology.ts"

const repoRoot = fileURLToPath(new URL("../../", import.meta.url))

export interface ServiceProcess {
  readonly child: ChildProcess
  /** What the process has printed so far. */
  readonly output: () => string
  /** Rejects when the process exits (with what it printed): race it against readiness. */
  readonly exited: () => Promise<never>
}

export const spawnService = (
  script: string,
  url: string,
  nodeArgs: ReadonlyArray<string> = [],
  env: Readonly<Record<string, string>> = {},
): ServiceProcess => {
  const child = spawn(process.execPath, [...nodeArgs, script], {
    cwd: repoRoot,
    // Several services run side by side: none takes the default metrics port unless told to.
    env: { WM_METRICS_PORT: "0", ...process.env, ...env, NATS_URL: url, NODE_NO_WARNINGS: "1" },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  })
  let output = ""
  const collect = (c: Buffer) => {
    output += c.toString()
  }
  child.stdout?.on("data", collect)
  child.stderr?.on("data", collect)
  const exit = new Promise<never>((_, reject) =>
    child.once("exit", (code, signal) =>
      reject(new Error(`${script} exited (${signal ?? `code ${code}`}):\n${output}`)),
    ),
  )
  // Exiting when asked to stop is not a failure.
  exit.catch(() => undefined)
  return { child, output: () => output, exited: () => exit }
}

/** Asks the process to stop (SIGTERM) and waits until it has exited. */
export const stopChild = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGTERM")
  })

/** Creates the event log's streams on the benchmark's server, as a service would at start. */
export const createBenchTopology = async (nc: NatsConnection, url: string, dedupeWindowMs = 10 * 60_000) =>
  Effect.runPromise(
    ensureTopology(await jetstreamManager(nc), { servers: [url], name: "bench", replicas: 1, dedupeWindowMs }),
  )
