/** Runs the working service alone: `node services/working/main.ts` (NATS_URL, NATS_USER, NATS_PASS). */
const modulesLoadedAt = performance.now()

import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { NatsSettings } from "../platform/nats/settings.ts"
import { serviceProcess } from "../platform/observability/observability.ts"
import { announceReady } from "../platform/partitions/announce-ready.ts"
import { workingService } from "./service.ts"
import { Working } from "./working.ts"

const ready = Layer.effectDiscard(
  Effect.flatMap(Working, (working) => announceReady("working", working, modulesLoadedAt)),
)

NodeRuntime.runMain(
  Layer.launch(
    serviceProcess("working", ready.pipe(Layer.provideMerge(workingService(NatsSettings.fromEnv("wm-working"))))),
  ),
)
