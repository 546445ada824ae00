/**
 * Which long-term store the configuration asks for:
 *
 * - `QDRANT_URL` set: the Qdrant store (durable — the projection resumes
 *   from its checkpoint), with `QDRANT_API_KEY` sent as the `api-key`
 *   header when set, `WM_QDRANT_COLLECTION_PREFIX` naming the
 *   collections (default `wm_longterm_`) and `WM_QDRANT_COLLECTIONS`
 *   dividing them: `shared` (one per model, the default) or `per-agent`.
 * - Otherwise, with `WM_LONGTERM_DIR` set, the durable embedded store in
 *   that directory (it resumes from its own checkpoint; `npm start` sets it
 *   under its data directory).
 * - Otherwise the in-memory embedded store, rebuilt from the log at every start.
 *
 * Read with Effect Config (contracts/settings.ts); the `…FromEnv(env)` forms
 * read the same Config from a given set of variables.
 */
import { Config, ConfigProvider, Effect, Layer, Option } from "effect"
import { settings } from "../../../contracts/settings.ts"
import { durableStoreLayer } from "./durable-store.ts"
import { embeddedStoreLayer } from "./embedded-store.ts"
import { type QdrantStoreConfig, qdrantStoreLayer } from "./qdrant-store.ts"
import type { LongTermStore } from "./store.ts"

type Env = Readonly<Record<string, string | undefined>>

/** The Qdrant settings, or `null` when `QDRANT_URL` is unset. */
export const qdrantConfig: Config.Config<QdrantStoreConfig | null> = Config.all({
  url: settings.QDRANT_URL.config,
  apiKey: settings.QDRANT_API_KEY.config,
  collectionPrefix: settings.WM_QDRANT_COLLECTION_PREFIX.config,
  collections: settings.WM_QDRANT_COLLECTIONS.config,
}).pipe(
  Config.map(({ url, apiKey, collectionPrefix, collections }) =>
    Option.isNone(url)
      ? null
      : {
          url: url.value,
          apiKey: Option.getOrUndefined(apiKey),
          collectionPrefix: Option.getOrUndefined(collectionPrefix),
          collections,
        },
  ),
)

export interface LongTermStoreChoice {
  readonly store: Layer.Layer<LongTermStore>
  /** Whether the projection keeps its checkpoint in the checkpoint bucket (Qdrant); the durable embedded store keeps its own. */
  readonly durable: boolean
}

/** The embedded store: durable under `WM_LONGTERM_DIR` when it is set, else in memory. */
export const embeddedStoreFromConfig: Layer.Layer<LongTermStore> = Layer.unwrap(
  Effect.map(settings.WM_LONGTERM_DIR.config, (dir) =>
    Option.isSome(dir) ? durableStoreLayer(dir.value) : embeddedStoreLayer,
  ).pipe(Effect.orDie),
)

/** The long-term store for `memoryService(settings, { store, durable })`, as configured. */
export const longTermStoreConfig: Config.Config<LongTermStoreChoice> = Config.map(qdrantConfig, (qdrant) =>
  qdrant === null
    ? { store: embeddedStoreFromConfig, durable: false }
    : { store: qdrantStoreLayer(qdrant), durable: true },
)

/** Reads `config` from the given variables (the process's environment by default). */
const readFrom = <A>(config: Config.Config<A>, env: Env | undefined): A =>
  Effect.runSync(
    Effect.orDie(
      env === undefined
        ? config
        : Effect.provide(config, ConfigProvider.layer(ConfigProvider.fromEnv({ env: env as Record<string, string> }))),
    ),
  )

export const qdrantConfigFromEnv = (env?: Env): QdrantStoreConfig | null => readFrom(qdrantConfig, env)

/** The Qdrant store layer when `QDRANT_URL` is set, else `null`. */
export const qdrantStoreFromEnv = (env?: Env): Layer.Layer<LongTermStore> | null => {
  const config = qdrantConfigFromEnv(env)
  return config === null ? null : qdrantStoreLayer(config)
}

export const longTermStoreFromEnv = (env?: Env): LongTermStoreChoice => readFrom(longTermStoreConfig, env)
