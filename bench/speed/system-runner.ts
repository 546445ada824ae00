/**
 * Every service in one process, the embedded default, with settings from the
 * environment (NATS_URL…): what the benchmark starts when asked for
 * `--services embedded`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { systemLayer } from "../../services/system.ts"

NodeRuntime.runMain(Layer.launch(systemLayer((name) => NatsSettings.fromEnv(name))))
