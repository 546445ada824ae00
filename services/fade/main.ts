/**
 * Runs a fade worker alone: `node services/fade/main.ts`. Environment: NATS_URL, WM_LEASE_TTL_MS,
 * WM_FADE_INTERVAL_MS, WM_FADE_TAU, WM_SUMMARIZER_URL/_MODEL/_API_KEY,
 * WM_EMBEDDER, WM_EMBEDDER_URL/_MODEL/_API_KEY.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { NatsSettings } from "../platform/nats/settings.ts"
import { serviceProcess } from "../platform/observability/observability.ts"
import { fadeService } from "../system.ts"
import { FadeWorker } from "./fade-worker.ts"

/** It serves no API, so it says when it is warm: after its models are loaded and the log is replayed. */
const announceReady = Layer.effectDiscard(
  Effect.gen(function* () {
    const fade = yield* FadeWorker
    yield* Effect.log(`fade worker ready: replayed ${fade.warmUp.events} events in ${fade.warmUp.millis} ms`)
  }),
)

NodeRuntime.runMain(
  Layer.launch(serviceProcess("fade", announceReady.pipe(Layer.provide(fadeService(NatsSettings.fromEnv("wm-fade")))))),
)
