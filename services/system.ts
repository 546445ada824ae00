/**
 * Composition of the services. Each service is a layer that starts serving
 * when built; `systemLayer` composes them all into one process, the embedded
 * default. Separately deployed, each runs alone (see services/<name>/main.ts)
 * and they meet only through the event log and the API subjects.
 */
import { Layer } from "effect"
import { Gateway } from "./gateway/gateway.ts"
import { EventLog } from "./log/event-log.ts"
import { Nats } from "./nats/connection.ts"
import { NatsSettings } from "./nats/settings.ts"
import { Working } from "./working/working.ts"
import { EmbeddingProvider } from "./embedding/embedding-provider.ts"
import { FadeWorker, FadeWorkerSettings } from "./fade/fade-worker.ts"
import { Summarizer } from "./fade/summarizer.ts"

/** The connection and the log, for one service process. */
export const foundation = (settings: Layer.Layer<NatsSettings>) =>
  EventLog.layer.pipe(Layer.provideMerge(Nats.layer), Layer.provideMerge(settings))

export const gatewayService = (settings: Layer.Layer<NatsSettings>) => Gateway.layer.pipe(Layer.provide(foundation(settings)))
export const workingService = (settings: Layer.Layer<NatsSettings>) => Working.layer.pipe(Layer.provide(foundation(settings)))

/** The fade worker with its summariser and embedder as configured by the environment. */
export const fadeService = (
  settings: Layer.Layer<NatsSettings>,
  worker: Layer.Layer<FadeWorkerSettings> = FadeWorkerSettings.fromEnv(),
  models: Layer.Layer<Summarizer | EmbeddingProvider> = Layer.merge(Summarizer.fromEnv(), EmbeddingProvider.fromEnv()),
) => FadeWorker.layer.pipe(Layer.provide(Layer.mergeAll(worker, models, foundation(settings))))

export interface SystemOptions {
  /** Run the fade worker (default true); its settings and models otherwise come from the environment. */
  readonly fade?: boolean
}

/** Every service in one process, each with its own connection, as they would run apart. */
export const systemLayer = (settings: (service: string) => Layer.Layer<NatsSettings>, options: SystemOptions = {}) => {
  const core = Layer.mergeAll(workingService(settings("wm-working")), gatewayService(settings("wm-gateway")))
  return options.fade === false ? core : Layer.merge(core, fadeService(settings("wm-fade")))
}
