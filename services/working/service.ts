import { Layer } from "effect"
import { foundation } from "../platform/foundation.ts"
import type { NatsSettings } from "../platform/nats/settings.ts"
import { serviceLogs } from "../platform/observability/json-logs.ts"
import { PartitionSettings } from "../platform/partitions/settings.ts"
import { Working } from "./working.ts"

/** The working service on its own connection (its own module: a replica loads nothing of the other services). */
export const workingService = (
  settings: Layer.Layer<NatsSettings>,
  partitions: Layer.Layer<PartitionSettings> = PartitionSettings.fromEnv,
) => Working.layer.pipe(Layer.provide(Layer.mergeAll(foundation(settings), partitions, serviceLogs("working"))))
