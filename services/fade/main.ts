/**
 * Runs a fade worker alone: `node services/fade/main.ts`. Environment: NATS_URL, WM_FADE_SHARD
 * ("index/count" for several workers), WM_FADE_INTERVAL_MS, WM_FADE_TAU, WM_SUMMARIZER_URL/_MODEL/_API_KEY,
 * WM_EMBEDDER, WM_EMBEDDER_URL/_MODEL/_API_KEY.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { NatsSettings } from "../nats/settings.ts"
import { fadeService } from "../system.ts"

NodeRuntime.runMain(Layer.launch(fadeService(NatsSettings.fromEnv("wm-fade"))))
