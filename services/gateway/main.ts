/** Runs the gateway alone: `node services/gateway/main.ts` (NATS_URL, NATS_USER, NATS_PASS). */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { NatsSettings } from "../platform/nats/settings.ts"
import { gatewayService } from "../system.ts"

NodeRuntime.runMain(Layer.launch(gatewayService(NatsSettings.fromEnv("wm-gateway"))))
