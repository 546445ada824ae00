/**
 * The memory services (long-term projection and retrieval on the embedded
 * store) in one process, with settings from the environment (NATS_URL…), for
 * the retrieval measurement.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { memoryService } from "../../services/system.ts"

NodeRuntime.runMain(Layer.launch(memoryService(NatsSettings.fromEnv("wm-memory"))))
