/**
 * The embedding service used by fading and retrieval: an OpenAI-compatible
 * `/v1/embeddings` endpoint when configured (OpenAI, Ollama, vLLM, TEI...),
 * with timeouts and retries, falling back to the offline embedder when it
 * fails — and saying so in what it returns, so the event records it.
 */
import { Config, Context, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import type { Producer } from "../../contracts/fade.ts"
import { normalise, type Embedder } from "./embedder.ts"
import { loadOfflineEmbedder } from "./offline-embedder.ts"

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
  /** Never fails: a remote failure falls back to the offline embedder. */
  readonly embed: (text: string) => Effect.Effect<Embedded>
  /** Embeds a query with a given model, for searching records of that model. */
  readonly embedQuery: (text: string, model: string) => Effect.Effect<Float32Array | null>
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
    Effect.promise(() => offline.embed([text])).pipe(
      Effect.map(([vector]) => ({
        vector: vector!,
        model: offline.model,
        producer: { kind: "offline", model: offline.model, fallbackReason: null, attempts: 1 } as const,
      })),
    ),
  embedQuery: (text, model) =>
    model === offline.model ? Effect.promise(() => offline.embed([text])).pipe(Effect.map(([v]) => v!)) : Effect.succeed(null),
})

export class EmbeddingProvider extends Context.Service<EmbeddingProvider, EmbeddingProviderShape>()("wm/EmbeddingProvider") {
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
              Effect.map(fallback.embed(text), (e): Embedded => ({
                ...e,
                producer: { ...e.producer, fallbackReason: `remote embedder failed after ${attempts} attempts: ${String(error)}`, attempts },
              })),
            ),
          )
        }
        return {
          offline,
          embed,
          embedQuery: (text, model) =>
            model === config.model
              ? call(text).pipe(Effect.retry({ times: config.retries }), Effect.orElseSucceed(() => null))
              : fallback.embedQuery(text, model),
        }
      }),
    ).pipe(Layer.provide(FetchHttpClient.layer))

  /**
   * The remote provider when WM_EMBEDDER_URL is set, else the offline one
   * (see offline-embedder.ts; its first load on a machine derives a cache file).
   */
  static readonly fromEnv = () =>
    Layer.unwrap(
      Effect.gen(function* () {
        const offline = yield* Effect.promise(loadOfflineEmbedder)
        const url = yield* Config.String("WM_EMBEDDER_URL").pipe(Config.withDefault(""))
        if (!url) return EmbeddingProvider.offlineOnly(offline)
        const apiKey = yield* Config.option(Config.String("WM_EMBEDDER_API_KEY"))
        return EmbeddingProvider.withRemote(offline, {
          baseUrl: url,
          model: yield* Config.String("WM_EMBEDDER_MODEL").pipe(Config.withDefault("text-embedding-3-small")),
          apiKey: apiKey._tag === "Some" && apiKey.value !== "" ? apiKey.value : undefined,
          timeout: Duration.millis(yield* Config.Int("WM_EMBEDDER_TIMEOUT_MS").pipe(Config.withDefault(10_000))),
          retries: yield* Config.Int("WM_EMBEDDER_RETRIES").pipe(Config.withDefault(2)),
        })
      }).pipe(Effect.orDie),
    )
}
