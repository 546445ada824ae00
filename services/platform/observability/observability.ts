/**
 * What a process offers its operators, provided once around every service it runs: one `Metrics`
 * registry and one `Readiness`, the port that serves them (ops-server.ts) and JSON logs (json-logs.ts).
 */
import { Effect, Layer } from "effect"
import { jsonLogsFromEnv } from "./json-logs.ts"
import { Metrics, makeMetrics } from "./metrics.ts"
import { OpsServer } from "./ops-server.ts"
import { makeReadiness, Readiness } from "./readiness.ts"

/** A fresh registry and readiness, for one process (or one replica of a test). */
export const processMetrics = (readiness = makeReadiness()) =>
  Layer.merge(Layer.succeed(Metrics, makeMetrics()), Layer.succeed(Readiness, readiness))

/** The process running `service`: its metrics and readiness (`shared`), the operations port and JSON logs. */
export const observability = (
  service: string,
  shared: Layer.Layer<never> = processMetrics(),
  server: Layer.Layer<OpsServer, Error> = OpsServer.fromEnv,
) => Layer.mergeAll(server, jsonLogsFromEnv(service)).pipe(Layer.provideMerge(shared))

const announceMetrics = Layer.effectDiscard(
  Effect.flatMap(OpsServer, ({ url }) => (url === undefined ? Effect.void : Effect.log(`Metrics on ${url}/metrics`))),
)

/** The process is built: readiness is its parts' from now on. */
export const processStarted = Layer.effectDiscard(
  Effect.flatMap(Readiness, (readiness) => Effect.sync(readiness.started)),
)

/** A service's process (services/<name>/main.ts): `layer` observed as `observability` says. */
export const serviceProcess = <A, E>(service: string, layer: Layer.Layer<A, E>) =>
  processStarted.pipe(Layer.provideMerge(Layer.merge(layer, announceMetrics)), Layer.provide(observability(service)))
