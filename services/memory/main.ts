/**
 * Runs long-term and retrieval together: `node services/memory/main.ts`. They share one store —
 * the embedded index (on disk under WM_LONGTERM_DIR when set), or Qdrant when QDRANT_URL is set
 * (QDRANT_API_KEY, WM_QDRANT_COLLECTION_PREFIX).
 * Also: NATS_URL, NATS_USER, NATS_PASS, WM_EMBEDDER, WM_EMBEDDER_URL/_MODEL/_API_KEY, WM_RECALL_DEPTH, WM_CUE_THRESHOLD,
 * WM_TENANTS (the tenants a thread spans).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { NatsSettings } from "../platform/nats/settings.ts"
import { serviceProcess } from "../platform/observability/observability.ts"
import { memoryService } from "../system.ts"

NodeRuntime.runMain(Layer.launch(serviceProcess("memory", memoryService(NatsSettings.fromEnv("wm-memory")))))
