/** Runs the gateway alone: `node services/gateway/main.ts` (NATS_URL, NATS_USER, NATS_PASS). */
const modulesLoadedAt = performance.now()

import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { NatsSettings } from "../platform/nats/settings.ts"
import { serviceProcess } from "../platform/observability/observability.ts"
import { announceReady } from "../platform/partitions/announce-ready.ts"
import { Gateway } from "./gateway.ts"
import { gatewayService } from "./service.ts"

const ready = Layer.effectDiscard(
  Effect.flatMap(Gateway, (gateway) => announceReady("gateway", gateway, modulesLoadedAt)),
)

NodeRuntime.runMain(
  Layer.launch(
    serviceProcess("gateway", ready.pipe(Layer.provideMerge(gatewayService(NatsSettings.fromEnv("wm-gateway"))))),
  ),
)
