/** Runs the substrate alone: `node services/substrate/main.ts` (NATS_URL, NATS_USER, NATS_PASS). */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { NatsSettings } from "../platform/nats/settings.ts"
import { serviceProcess } from "../platform/observability/observability.ts"
import { substrateService } from "../system.ts"

NodeRuntime.runMain(Layer.launch(serviceProcess("substrate", substrateService(NatsSettings.fromEnv("wm-substrate")))))
