/**
 * Test harness: a real nats-server on a free port with a temporary store,
 * the services composed in this process, and an SDK client.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { ConfigProvider, Effect, Layer, ManagedRuntime } from "effect"
import { NotCaughtUp } from "../../contracts/errors.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { NatsSettings, type NatsSettingsShape } from "../../services/platform/nats/settings.ts"
import { ensureTopology } from "../../services/platform/nats/topology.ts"
import { type SystemOptions, systemLayer } from "../../services/system.ts"
import { Working } from "../../services/working/working.ts"
import { eventually } from "./eventually.ts"
import { lastSeq } from "./log.ts"

export const settingsFor =
  (url: string | ReadonlyArray<string>, overrides: Partial<NatsSettingsShape> = {}) =>
  (name: string) =>
    NatsSettings.make({ servers: typeof url === "string" ? [url] : url, name, ...overrides })

/** The log's streams and buckets on the server, as a service creates them at start, with no service running. */
export const createStreams = async (url: string): Promise<void> => {
  const nc = await connect({ servers: url })
  try {
    const jsm = await jetstreamManager(nc)
    await Effect.runPromise(
      Effect.flatMap(NatsSettings, (settings) => ensureTopology(jsm, settings)).pipe(
        Effect.provide(settingsFor(url)("wm-test")),
      ),
    )
  } finally {
    await nc.close()
  }
}

export interface RunningServices {
  readonly runtime: ManagedRuntime.ManagedRuntime<unknown, unknown>
  readonly stop: () => Promise<void>
}

/** Starts the services of `layer` against the server and waits until they serve. */
export const startServices = async <R, E>(layer: Layer.Layer<R, E>): Promise<RunningServices> => {
  const runtime = ManagedRuntime.make(layer)
  await runtime.runPromise(Effect.void)
  return { runtime: runtime as ManagedRuntime.ManagedRuntime<unknown, unknown>, stop: () => runtime.dispose() }
}

/** The whole system, as `npm start` composes it, reading its settings from `env` instead of this process's. */
export const startSystemWithEnv = (url: string, env: Record<string, string | undefined>): Promise<RunningServices> =>
  startServices(
    systemLayer(settingsFor(url)).pipe(
      Layer.provide(
        ConfigProvider.layer(
          ConfigProvider.fromEnv({
            env: Object.fromEntries(
              Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined),
            ),
          }),
        ),
      ),
    ),
  )

export interface TestSystem {
  readonly server: NatsServerProcess
  readonly client: WorkingMemoryClient
  services: RunningServices
  /** Stops the services and starts them again on the same log (a restart). */
  readonly restartServices: () => Promise<void>
  /** Starts more services against the same server (e.g. a second replica), stopped with the system. */
  readonly startReplica: <R, E>(layer: Layer.Layer<R, E>) => Promise<RunningServices>
  /**
   * The live view of an agent held by the working replica that owns its partition (this system's or a
   * replica's), once it has applied `afterSeq` (default: the log's end).
   */
  readonly liveView: (agentId: string, afterSeq?: number) => Promise<AgentView | undefined>
  readonly stop: () => Promise<void>
}

export const startTestSystem = async (
  overrides: Partial<NatsSettingsShape> = {},
  options: SystemOptions = {},
): Promise<TestSystem> => {
  const server = await startNatsServer()
  const layer = () => systemLayer(settingsFor(server.url, overrides), options)
  const services = await startServices(layer())
  const client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 5_000 })
  const replicas: RunningServices[] = []
  /** The running working replica that answers for the agent now; waits while its partition moves. */
  const ownerOf = (agentId: string) =>
    eventually(
      `a working replica to answer for ${agentId}`,
      async () => {
        for (const running of [system.services, ...replicas]) {
          const working = await running.runtime.runPromise(Effect.serviceOption(Working))
          if (working._tag === "Some" && working.value.owns(agentId)) return { running, working: working.value }
        }
        return undefined
      },
      15_000,
      50,
    )
  const system: TestSystem = {
    server,
    client,
    services,
    startReplica: async (layer) => {
      const running = await startServices(layer)
      replicas.push(running)
      return running
    },
    liveView: async (agentId, afterSeq) => {
      const seq = afterSeq ?? (await lastSeq(server.url))
      const deadline = Date.now() + 10_000
      for (;;) {
        const { running, working } = await ownerOf(agentId)
        try {
          await running.runtime.runPromise(working.waitApplied(seq, agentId))
          return working.view(agentId)
        } catch (error) {
          // A loaded machine can delay a lease's renewal past its margin: the partition stops answering (it has
          // applied nothing it may answer from) until the renewal lands, and the owner is asked again. A halted
          // projection, or a wait that timed out, is the test's failure.
          const notAnswering = error instanceof NotCaughtUp && error.appliedSeq === 0
          if (!notAnswering || Date.now() >= deadline) throw error
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
      }
    },
    restartServices: async () => {
      await system.services.stop()
      system.services = await startServices(layer())
    },
    stop: async () => {
      await client.close()
      for (const replica of replicas.splice(0).reverse()) await replica.stop()
      await system.services.stop()
      await server.stop()
    },
  }
  return system
}
