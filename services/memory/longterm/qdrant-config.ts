/**
 * Which long-term store the environment asks for:
 *
 * - `QDRANT_URL` set: the Qdrant store (durable — the projection resumes
 *   from its checkpoint), with `QDRANT_API_KEY` sent as the `api-key`
 *   header when set and `WM_QDRANT_COLLECTION_PREFIX` naming the
 *   collections (default `wm_longterm_`).
 * - Otherwise, with `WM_LONGTERM_DIR` set, the durable embedded store in
 *   that directory (it resumes from its own checkpoint; `npm start` sets it
 *   under its data directory).
 * - Otherwise the in-memory embedded store, rebuilt from the log at every start.
 */
import { Config, Effect, Layer } from "effect"
import { durableStoreLayer } from "./durable-store.ts"
import { embeddedStoreLayer } from "./embedded-store.ts"
import { type QdrantStoreConfig, qdrantStoreLayer } from "./qdrant-store.ts"
import type { LongTermStore } from "./store.ts"

type Env = Readonly<Record<string, string | undefined>>

const setting = (env: Env, name: string): string | undefined => {
  const value = env[name]?.trim()
  return value === undefined || value === "" ? undefined : value
}

/** The Qdrant settings of the environment, or `null` when `QDRANT_URL` is unset. */
export const qdrantConfigFromEnv = (env: Env = process.env): QdrantStoreConfig | null => {
  const url = setting(env, "QDRANT_URL")
  if (url === undefined) return null
  return {
    url,
    apiKey: setting(env, "QDRANT_API_KEY"),
    collectionPrefix: setting(env, "WM_QDRANT_COLLECTION_PREFIX"),
  }
}

/** The Qdrant store layer when `QDRANT_URL` is set, else `null`. */
export const qdrantStoreFromEnv = (env: Env = process.env): Layer.Layer<LongTermStore> | null => {
  const config = qdrantConfigFromEnv(env)
  return config === null ? null : qdrantStoreLayer(config)
}

/** The embedded store: durable under `WM_LONGTERM_DIR` when it is set, else in memory. */
export const embeddedStoreFromConfig: Layer.Layer<LongTermStore> = Layer.unwrap(
  Effect.gen(function* () {
    const dir = yield* Config.option(Config.String("WM_LONGTERM_DIR"))
    return dir._tag === "Some" && dir.value.trim() !== "" ? durableStoreLayer(dir.value.trim()) : embeddedStoreLayer
  }).pipe(Effect.orDie),
)

/**
 * The long-term store for `memoryService(settings, { store, durable })`.
 * `durable` asks for a checkpoint in the checkpoint bucket (Qdrant); the
 * durable embedded store keeps its own.
 */
export const longTermStoreFromEnv = (
  env: Env = process.env,
): { readonly store: Layer.Layer<LongTermStore>; readonly durable: boolean } => {
  const qdrant = qdrantStoreFromEnv(env)
  return qdrant === null ? { store: embeddedStoreFromConfig, durable: false } : { store: qdrant, durable: true }
}
