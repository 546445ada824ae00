/**
 * The services of a fault scenario: composed in this process (stopped with
 * `runtime.dispose()`), or run as their own Node processes from
 * services/<name>/main.ts, exactly as deployed, so they can be SIGKILLed.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { type NatsServerProcess, startNatsServer } from "../../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../../sdk/client.ts"
import {
  FadeWorker,
  FadeWorkerSettings,
  type FadeWorkerSettingsShape,
  type FadeWorkerShape,
} from "../../../services/fade/fade-worker.ts"
import { Summarizer } from "../../../services/fade/summarizer.ts"
import { Gateway, type GatewayShape } from "../../../services/gateway/gateway.ts"
import { EmbeddingProvider } from "../../../services/platform/embedding/embedding-provider.ts"
import { hashedEmbedder } from "../../../services/platform/embedding/offline-embedder.ts"
import { NatsSettings, type NatsSettingsShape } from "../../../services/platform/nats/settings.ts"
import { PartitionSettings } from "../../../services/platform/partitions/settings.ts"
import { fadeService, gatewayService, workingService } from "../../../services/system.ts"
import { Working, type WorkingShape } from "../../../services/working/working.ts"
import { teardown } from "./audit.ts"
import { REPO_ROOT } from "./figures.ts"

export const settingsFor =
  (servers: string | ReadonlyArray<string>, overrides: Partial<NatsSettingsShape> = {}) =>
  (name: string) =>
    NatsSettings.make({ servers: typeof servers === "string" ? [servers] : servers, name, ...overrides })

/** Offline models: no network, no large files. */
export const offlineModels = Layer.merge(Summarizer.offline, EmbeddingProvider.offlineOnly(hashedEmbedder()))

/** A fade worker that only runs on triggers (no timer). */
export const fadeSettings = (settings: Partial<FadeWorkerSettingsShape> = {}) =>
  FadeWorkerSettings.make({ intervalMs: 3_600_000, ...settings })

export interface InProcess<R> {
  readonly runtime: ManagedRuntime.ManagedRuntime<R, unknown>
  readonly stop: () => Promise<void>
}

export const startInProcess = async <R>(layer: Layer.Layer<R, unknown>): Promise<InProcess<unknown>> => {
  const runtime = ManagedRuntime.make(layer)
  await runtime.runPromise(Effect.void)
  return { runtime: runtime as ManagedRuntime.ManagedRuntime<unknown, unknown>, stop: () => runtime.dispose() }
}

export const gatewayLayer = (servers: string | ReadonlyArray<string>, overrides: Partial<NatsSettingsShape> = {}) =>
  gatewayService(settingsFor(servers, overrides)("wm-gateway"))
export const workingLayer = (servers: string | ReadonlyArray<string>, overrides: Partial<NatsSettingsShape> = {}) =>
  workingService(settingsFor(servers, overrides)("wm-working"))
export const fadeLayer = (
  servers: string | ReadonlyArray<string>,
  worker: Partial<FadeWorkerSettingsShape> = {},
  models: Layer.Layer<Summarizer | EmbeddingProvider, unknown> = offlineModels,
  overrides: Partial<NatsSettingsShape> = {},
  partitions: Layer.Layer<PartitionSettings> = PartitionSettings.fromEnv,
) =>
  fadeService(settingsFor(servers, overrides)(`wm-${worker.name ?? "fade"}`), fadeSettings(worker), models, partitions)

/** The running service's own interface, from a runtime that composes it. */
export const gatewayOf = (p: InProcess<unknown>): Promise<GatewayShape> =>
  p.runtime.runPromise(Gateway as unknown as Effect.Effect<GatewayShape>)
export const workingOf = (p: InProcess<unknown>): Promise<WorkingShape> =>
  p.runtime.runPromise(Working as unknown as Effect.Effect<WorkingShape>)
export const fadeOf = (p: InProcess<unknown>): Promise<FadeWorkerShape> =>
  p.runtime.runPromise(FadeWorker as unknown as Effect.Effect<FadeWorkerShape>)

/** Node 22 runs the services' TypeScript directly; npm scripts run on it, a bare `node` may not. */
export const nodeBinary = (): string => {
  const major = Number(process.versions.node.split(".")[0])
  if (major >= 22) return process.execPath
  const pinned = join(REPO_ROOT, "node_modules", ".bin", "node")
  return existsSync(pinned) ? pinned : process.execPath
}

export interface ServiceProcess {
  readonly name: string
  readonly pid: number
  readonly output: () => string
  readonly isRunning: () => boolean
  /** SIGKILL: a crash. Waits for the process to be gone. */
  readonly kill: () => Promise<void>
  /** SIGTERM, waits for exit (SIGKILL after 5 s). */
  readonly stop: () => Promise<void>
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
  })

/** Starts `node services/<service>/main.ts` with the given environment. */
export const startServiceProcess = (
  service: "gateway" | "working" | "fade",
  env: Record<string, string>,
): ServiceProcess => startNodeProcess(service, join(REPO_ROOT, "services", service, "main.ts"), env)

/** Starts a TypeScript file as its own Node process, keeping the tail of its output. */
export const startNodeProcess = (name: string, file: string, env: Record<string, string>): ServiceProcess => {
  const child = spawn(nodeBinary(), [file], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let log = ""
  const keep = (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-20_000)
  }
  child.stdout?.on("data", keep)
  child.stderr?.on("data", keep)
  const running = () => child.exitCode === null && child.signalCode === null
  return {
    name,
    pid: child.pid ?? -1,
    output: () => log,
    isRunning: running,
    kill: async () => {
      if (running()) child.kill("SIGKILL")
      await exited(child)
    },
    stop: async () => {
      if (!running()) return
      child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000)
      await exited(child)
      clearTimeout(timer)
    },
  }
}

/** A fresh server with gateway, working and fade in this process, an SDK client and a plain connection. */
export interface CoreSystem {
  readonly server: NatsServerProcess
  readonly services: InProcess<unknown>
  readonly working: WorkingShape
  readonly gateway: GatewayShape
  readonly fade: FadeWorkerShape
  readonly client: WorkingMemoryClient
  readonly nc: NatsConnection
  readonly stop: () => Promise<void>
}

export const startCoreSystem = async (options: { readonly timeoutMs?: number } = {}): Promise<CoreSystem> => {
  const server = await startNatsServer()
  const services = await startInProcess(
    Layer.mergeAll(workingLayer(server.url), gatewayLayer(server.url), fadeLayer(server.url)),
  )
  const client = await WorkingMemoryClient.connect({
    servers: server.url,
    ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
  })
  const nc = await connect({ servers: server.url })
  return {
    server,
    services,
    working: await workingOf(services),
    gateway: await gatewayOf(services),
    fade: await fadeOf(services),
    client,
    nc,
    stop: () =>
      teardown(
        () => nc.close(),
        () => client.close(),
        () => services.stop(),
        () => server.stop(),
      ),
  }
}
