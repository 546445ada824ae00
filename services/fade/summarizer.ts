/**
 * Rung 2 summaries: an OpenAI-compatible chat-completions endpoint when
 * configured, with a timeout per attempt and retries on an Effect schedule;
 * otherwise, or when it keeps failing, the offline telegraphic summariser.
 * The result always says which produced it and why a fallback was used.
 */
import { Context, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import type { Encoding } from "../../contracts/agent.ts"
import type { Producer } from "../../contracts/fade.ts"
import { settings } from "../../contracts/settings.ts"
import { OFFLINE_SUMMARY_MODEL, offlineSummary } from "../../domain/offline-summary.ts"
import { countTokens } from "../../domain/tokens.ts"

export interface Summary {
  readonly text: string
  readonly producer: Producer
}

export interface SummarizerShape {
  /** Never fails: a remote failure falls back to the offline summariser. */
  readonly summarize: (
    text: string,
    options: { readonly share: number; readonly encoding: Encoding },
  ) => Effect.Effect<Summary>
}

export interface RemoteSummarizerConfig {
  readonly baseUrl: string
  readonly model: string
  readonly apiKey?: string | undefined
  readonly timeout: Duration.Input
  readonly retries: number
}

const ChatResponse = Schema.Struct({
  choices: Schema.Array(Schema.Struct({ message: Schema.Struct({ content: Schema.String }) })).check(
    Schema.isMinLength(1),
  ),
})

const offline = (
  text: string,
  share: number,
  encoding: Encoding,
  fallbackReason: string | null,
  attempts: number,
): Summary => ({
  text: offlineSummary(text, share, encoding),
  producer: { kind: "offline", model: OFFLINE_SUMMARY_MODEL, fallbackReason, attempts },
})

export const offlineSummarizer: SummarizerShape = {
  summarize: (text, { share, encoding }) => Effect.sync(() => offline(text, share, encoding, null, 1)),
}

export class Summarizer extends Context.Service<Summarizer, SummarizerShape>()("wm/Summarizer") {
  static readonly offline = Layer.succeed(Summarizer, offlineSummarizer)

  static readonly remote = (config: RemoteSummarizerConfig) =>
    Layer.effect(
      Summarizer,
      Effect.gen(function* () {
        const client = yield* HttpClient.HttpClient
        const call = (text: string, maxTokens: number) =>
          HttpClientRequest.post(`${config.baseUrl.replace(/\/$/, "")}/chat/completions`).pipe(
            HttpClientRequest.bodyJsonUnsafe({
              model: config.model,
              temperature: 0,
              max_tokens: maxTokens,
              messages: [
                {
                  role: "system",
                  content:
                    `Summarise the user's text in at most ${maxTokens} tokens. Keep who said it, names, dates, ` +
                    "numbers and decisions. Answer with the summary only.",
                },
                { role: "user", content: text },
              ],
            }),
            config.apiKey ? HttpClientRequest.bearerToken(config.apiKey) : (r) => r,
            client.execute,
            Effect.flatMap(HttpClientResponse.filterStatusOk),
            Effect.flatMap(HttpClientResponse.schemaBodyJson(ChatResponse)),
            Effect.map((body) => body.choices[0]!.message.content.trim()),
            Effect.filterOrFail(
              (summary) => summary.length > 0,
              () => new Error("empty summary"),
            ),
            Effect.timeout(config.timeout),
          )
        return {
          summarize: (text, { share, encoding }) => {
            let attempts = 0
            const maxTokens = Math.max(8, Math.floor(countTokens(text, encoding) * share))
            return Effect.suspend(() => {
              attempts++
              return call(text, maxTokens)
            }).pipe(
              Effect.retry({ schedule: Schedule.exponential("200 millis"), times: config.retries }),
              Effect.map(
                (summary): Summary => ({
                  text: summary,
                  producer: { kind: "remote", model: config.model, fallbackReason: null, attempts },
                }),
              ),
              Effect.catch((error) =>
                Effect.sync(() =>
                  offline(
                    text,
                    share,
                    encoding,
                    `remote summariser failed after ${attempts} attempts: ${String(error)}`,
                    attempts,
                  ),
                ),
              ),
            )
          },
        }
      }),
    ).pipe(Layer.provide(FetchHttpClient.layer))

  /** The remote summariser when WM_SUMMARIZER_URL is set, else the offline one (WM_SUMMARIZER_*, read with Effect Config). */
  static readonly fromEnv = () =>
    Layer.unwrap(
      Effect.gen(function* () {
        const url = yield* settings.WM_SUMMARIZER_URL.config
        if (Option.isNone(url)) return Summarizer.offline
        return Summarizer.remote({
          baseUrl: url.value,
          model: yield* settings.WM_SUMMARIZER_MODEL.config,
          apiKey: Option.getOrUndefined(yield* settings.WM_SUMMARIZER_API_KEY.config),
          timeout: Duration.millis(yield* settings.WM_SUMMARIZER_TIMEOUT_MS.config),
          retries: yield* settings.WM_SUMMARIZER_RETRIES.config,
        })
      }).pipe(Effect.orDie),
    )
}
