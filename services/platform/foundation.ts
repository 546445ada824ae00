import { Layer } from "effect"
import { EventLog } from "./log/event-log.ts"
import { Nats } from "./nats/connection.ts"
import type { NatsSettings } from "./nats/settings.ts"

/** The connection and the log of one service: fresh, so every service has its own connection (and credentials). */
export const foundation = (settings: Layer.Layer<NatsSettings>) =>
  Layer.fresh(EventLog.layer.pipe(Layer.provideMerge(Layer.fresh(Nats.layer)), Layer.provideMerge(settings)))
