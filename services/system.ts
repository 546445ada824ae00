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

/** The connection and the log, for one service process. */
export const foundation = (settings: Layer.Layer<NatsSettings>) =>
  EventLog.layer.pipe(Layer.provideMerge(Nats.layer), Layer.provideMerge(settings))

export const gatewayService = (settings: Layer.Layer<NatsSettings>) => Gateway.layer.pipe(Layer.provide(foundation(settings)))
export const workingService = (settings: Layer.Layer<NatsSettings>) => Working.layer.pipe(Layer.provide(foundation(settings)))

/** Every service in one process, each with its own connection, as they would run apart. */
export const systemLayer = (settings: (service: string) => Layer.Layer<NatsSettings>) =>
  Layer.mergeAll(workingService(settings("wm-working")), gatewayService(settings("wm-gateway")))
