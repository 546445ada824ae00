import { Effect, Layer } from "effect"
import { EventLog } from "./log/event-log.ts"
import { Nats } from "./nats/connection.ts"
import { NatsSettings } from "./nats/settings.ts"
import { tracingLayer } from "./tracing/export.ts"

/** This service's tracer, named as its connection is. */
const tracing = Layer.unwrap(Effect.map(NatsSettings, (settings) => tracingLayer(settings.name)))

/**
 * The connection, the log and the tracer of one service: fresh, so every service has its own connection
 * (and credentials) and exports its spans under its own name.
 */
export const foundation = (settings: Layer.Layer<NatsSettings>) =>
  Layer.fresh(
    EventLog.layer.pipe(
      Layer.provideMerge(Layer.fresh(Nats.layer)),
      Layer.provideMerge(tracing),
      Layer.provideMerge(settings),
    ),
  )
