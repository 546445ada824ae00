import { Layer } from "effect"
import { foundation } from "../platform/foundation.ts"
import type { NatsSettings } from "../platform/nats/settings.ts"
import { serviceLogs } from "../platform/observability/json-logs.ts"
import { PartitionSettings } from "../platform/partitions/settings.ts"
import { Gateway } from "./gateway.ts"
import { GatewaySettings } from "./settings.ts"

/** The gateway on its own connection (its own module: a replica loads nothing of the other services). */
export const gatewayService = (
  settings: Layer.Layer<NatsSettings>,
  partitions: Layer.Layer<PartitionSettings> = PartitionSettings.fromEnv,
  gateway: Layer.Layer<GatewaySettings> = GatewaySettings.fromEnv(),
) =>
  Gateway.layer.pipe(Layer.provide(Layer.mergeAll(foundation(settings), partitions, gateway, serviceLogs("gateway"))))
