/**
 * The embedding service used by fading and retrieval: an OpenAI-compatible
 * `/v1/embeddings` endpoint when configured (OpenAI, Ollama, vLLM, TEI...),
 * with timeouts and retries, falling back to the in-process embedder (WM_EMBEDDER:
 * the offline default or a local sentence model) when it fails — and saying so in
 * what it returns, so the event records it with the model's name.
 */
import { Context, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import type { Producer } from "../../../contracts/fade.ts"
import { settings } from "../../../contracts/settings.ts"
import { type Embedder, normalise } from "./embedder.ts"
import { acquireLocalEmbedder, localEmbedderFor } from "./local-embedders.ts"

export interface Embedded {
  readonly vector: Float32Array
  readonly model: string
  readonly producer: Producer
}

export interface RemoteEmbedderConfig {
  readonly baseUrl: string
  readonly model: string
  readonly apiKey?: string | undefined
  readonly timeout: Duration.Input
  readonly retries: number
}

export interface EmbeddingProviderShape {
  /**
   * Embeds an entry being demoted: background work, which an embedder running in worker threads
   * serves after queries. Never fails: a remote failure falls back to the in-process embedder.
   */
  readonly embed: (text: string) => Effect.Effect<Embedded>
  /** Embeds a query with a given model, for searching records of that model; null when that model cannot be run here. */
  readonly embedQuery: (text: string, model: string) => Effect.Effect<Float32Array | null>
  /** The in-process embedder (WM_EMBEDDER): what embeds without a remote, and what a remote falls back to. */
  readonly offline: Embedder
}

const EmbeddingsResponse = Schema.Struct({
  data: Schema.Array(Schema.Struct({ embedding: Schema.Array(Schema.Finite) })).check(Schema.isMinLength(1)),
})

export const remoteEmbedder = (config: RemoteEmbedderConfig) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    return (text: string) =>
      HttpClientRequest.post(`${config.baseUrl.replace(/\/$/, "")}/embeddings`).pipe(
        HttpClientRequest.bodyJsonUnsafe({ model: config.model, input: [text] }),
        config.apiKey ? HttpClientRequest.bearerToken(config.apiKey) : (r) => r,
        client.execute,
        Effect.flatMap(HttpClientResponse.filterStatusOk),
        Effect.flatMap(HttpClientResponse.schemaBodyJson(EmbeddingsResponse)),
        Effect.map((body) => normalise(Float32Array.from(body.data[0]!.embedding))),
        Effect.timeout(config.timeout),
      )
  })

export const offlineProvider = (offline: Embedder): EmbeddingProviderShape => ({
  offline,
  embed: (text) =>
    Effect.promise(() => offline.embed([text], { priority: "background" })).pipe(
      Effect.map(([vector]) => ({
        vector: vector!,
        model: offline.model,
        producer: { kind: "offline", model: offline.model, fallbackReason: null, attempts: 1 } as const,
      })),
    ),
  embedQuery: (text, model) => {
    const embedder = model === offline.model ? Effect.succeed(offline) : localEmbedderFor(model)
    return Effect.flatMap(embedder, (e) =>
      e === null
        ? Effect.succeed(null)
        : // A query the embedder cannot take now (overloaded, closing) ranks without its vector.
          Effect.tryPromise(() => e.embed([text])).pipe(
            Effect.map(([v]) => v!),
            Effect.orElseSucceed(() => null),
          ),
    )
  },
})

export class EmbeddingProvider extends Context.Service<EmbeddingProvider, EmbeddingProviderShape>()(
  "wm/EmbeddingProvider",
) {
  static readonly offlineOnly = (offline: Embedder) => Layer.succeed(EmbeddingProvider, offlineProvider(offline))

  static readonly withRemote = (offline: Embedder, config: RemoteEmbedderConfig) =>
    Layer.effect(
      EmbeddingProvider,
      Effect.gen(function* () {
        const call = yield* remoteEmbedder(config)
        const fallback = offlineProvider(offline)
        const embed = (text: string): Effect.Effect<Embedded> => {
          let attempts = 0
          return Effect.suspend(() => {
            attempts++
            return call(text)
          }).pipe(
            Effect.retry({ schedule: Schedule.exponential("200 millis"), times: config.retries }),
            Effect.map(
              (vector): Embedded => ({
                vector,
                model: config.model,
                producer: { kind: "remote", model: config.model, fallbackReason: null, attempts },
              }),
            ),
            Effect.catch((error) =>
              Effect.map(
                fallback.embed(text),
                (e): Embedded => ({
                  ...e,
                  producer: {
                    ...e.producer,
                    fallbackReason: `remote embedder failed after ${attempts} attempts: ${String(error)}`,
                    attempts,
                  },
                }),
              ),
            ),
          )
        }
        return {
          offline,
          embed,
          embedQuery: (text, model) =>
            model === config.model
              ? call(text).pipe(
                  Effect.retry({ times: config.retries }),
                  Effect.orElseSucceed(() => null),
                )
              : fallback.embedQuery(text, model),
        }
      }),
    ).pipe(Layer.provide(FetchHttpClient.layer))

  /**
   * Read from the environment with Effect Config:
   * WM_EMBEDDER picks the in-process embedder (`offline`, the default: SIF
   * word vectors, see offline-embedder.ts; or a sentence model such as
   * `minilm`, set up once by `npm run models:fetch`, run in WM_EMBEDDER_THREADS
   * worker threads); WM_EMBEDDER_URL, when
   * set, puts an OpenAI-compatible remote provider in front of it, the
   * in-process one being the fallback. Fails with UnknownEmbedder,
   * ModelFilesMissing or ModelLoadFailed rather than starting on another model.
   */
  static readonly fromEnv = () =>
    Layer.unwrap(
      Effect.gen(function* () {
        const id = yield* settings.WM_EMBEDDER.config
        const modelsDir = Option.getOrUndefined(yield* settings.WM_MODELS_DIR.config)
        const threads = Option.getOrUndefined(yield* settings.WM_EMBEDDER_THREADS.config)
        // held while the layer lasts: its worker threads end with the last layer holding them
        const local = yield* acquireLocalEmbedder(id, {
          ...(modelsDir === undefined ? {} : { modelsDir }),
          ...(threads === undefined ? {} : { threads }),
        })
        const url = yield* settings.WM_EMBEDDER_URL.config
        if (Option.isNone(url)) return EmbeddingProvider.offlineOnly(local)
        return EmbeddingProvider.withRemote(local, {
          baseUrl: url.value,
          model: yield* settings.WM_EMBEDDER_MODEL.config,
          apiKey: Option.getOrUndefined(yield* settings.WM_EMBEDDER_API_KEY.config),
          timeout: Duration.millis(yield* settings.WM_EMBEDDER_TIMEOUT_MS.config),
          retries: yield* settings.WM_EMBEDDER_RETRIES.config,
        })
      }).pipe(Effect.orDie),
    )
}
