/**
 * One NATS connection per service, with its JetStream client and manager.
 * It reconnects forever: a broker restart or a cluster failover is waited
 * out, never treated as the end of the service.
 */
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Context, Effect, Layer } from "effect"
import { DEFAULT_NATS_PING_INTERVAL_MS, dialLeastRecent, MAX_PINGS_OUT } from "../../../contracts/connection.ts"
import { Metrics, serviceLabel } from "../observability/metrics.ts"
import { Readiness } from "../observability/readiness.ts"
import { NatsSettings } from "./settings.ts"

export interface NatsShape {
  readonly nc: NatsConnection
  readonly js: JetStreamClient
  readonly jsm: JetStreamManager
}

export class Nats extends Context.Service<Nats, NatsShape>()("wm/Nats") {
  static readonly make = Effect.gen(function* () {
    const settings = yield* NatsSettings
    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          connect({
            servers: [...settings.servers],
            name: settings.name,
            ...(settings.user !== undefined ? { user: settings.user } : {}),
            ...(settings.pass !== undefined ? { pass: settings.pass } : {}),
            maxReconnectAttempts: -1,
            reconnectTimeWait: 250,
            pingInterval: settings.pingIntervalMs ?? DEFAULT_NATS_PING_INTERVAL_MS,
            maxPingOut: MAX_PINGS_OUT,
            reconnectToServer: dialLeastRecent,
            waitOnFirstConnect: true,
            // Stack traces captured for every request cost the gateway about 15% of its CPU.
            noAsyncTraces: true,
            timeout: 10_000,
          }),
        catch: (cause) =>
          new Error(`cannot connect to NATS at ${settings.servers.join(", ")}: ${String(cause)}`, { cause }),
      }).pipe(Effect.orDie),
      (nc) => Effect.promise(() => nc.drain().catch(() => nc.close())),
    )
    yield* watchConnection(nc, settings.name)
    // No API check here: a cluster still electing its JetStream leader would fail the start; the
    // topology step that follows retries until JetStream answers.
    const jsm = yield* Effect.promise(() => jetstreamManager(nc, { timeout: 10_000, checkAPI: false }))
    const js = jetstream(nc, { timeout: 10_000 })
    return { nc, js, jsm } satisfies NatsShape
  })

  static readonly layer = Layer.effect(Nats, Nats.make)
}

/**
 * Follows the connection's status events: `wm_nats_connected` is 1 while it is up, and the process is not
 * ready while it is down. `name` is the connection's (`wm-<service>`).
 */
const watchConnection = Effect.fnUntraced(function* (nc: NatsConnection, name: string) {
  const service = serviceLabel(name)
  let connected = !nc.isClosed()
  yield* Effect.forkScoped(
    Effect.promise(async () => {
      for await (const status of nc.status()) {
        if (status.type === "disconnect" || status.type === "close") connected = false
        else if (status.type === "reconnect") connected = true
      }
    }),
  )
  const metrics = yield* Metrics
  yield* metrics.collect(() => metrics.natsConnected.set({ service }, connected ? 1 : 0))
  const readiness = yield* Readiness
  yield* readiness.register(() => (connected ? [] : [`${service}: not connected to NATS`]))
})
