/** Runs the working service alone: `node services/working/main.ts` (NATS_URL, NATS_USER, NATS_PASS). */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { NatsSettings } from "../platform/nats/settings.ts"
import { workingService } from "../system.ts"

NodeRuntime.runMain(Layer.launch(workingService(NatsSettings.fromEnv("wm-working"))))
