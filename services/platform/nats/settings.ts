import { Config, Context, Effect, Layer, Schema } from "effect"
import { DEFAULT_NATS_URL } from "../../../contracts/subjects.ts"

export interface NatsSettingsShape {
  /** Client URLs; several for a cluster. */
  readonly servers: ReadonlyArray<string>
  /** Connection name shown by the server (per service). */
  readonly name: string
  readonly user?: string | undefined
  readonly pass?: string | undefined
  /** Replicas of the event stream: 1 locally, 3 in a cluster. */
  readonly replicas: number
  /** How long a retried publish with the same id is recognised as a duplicate. */
  readonly dedupeWindowMs: number
  /**
   * Limits of the event stream (-1: none). When one is reached new writes are refused
   * (`StorageFull`); nothing already stored is dropped.
   */
  readonly streamMaxBytes?: number
  readonly streamMaxMsgs?: number
}

/** A positive limit, or -1 (the default) for none. */
const streamLimit = (name: string) =>
  Config.schema(
    Schema.Int.check(Schema.makeFilter((n: number) => n === -1 || n > 0 || "a positive number, or -1 for no limit")),
    name,
  ).pipe(Config.withDefault(-1))

export class NatsSettings extends Context.Service<NatsSettings, NatsSettingsShape>()("wm/NatsSettings") {
  static readonly make = (settings: Partial<NatsSettingsShape> & { readonly servers: ReadonlyArray<string> }) =>
    Layer.succeed(NatsSettings, {
      name: "working-memory",
      replicas: 1,
      dedupeWindowMs: 10 * 60_000,
      streamMaxBytes: -1,
      streamMaxMsgs: -1,
      ...settings,
    })

  /**
   * The settings every entry point uses (each services/<name>/main.ts, `npm start`, the operator CLI):
   * read from the configuration by `natsSettingsFromConfig`; `overrides` for what the entry point
   * decides itself (e.g. `npm start`'s own server).
   */
  static readonly fromEnv = (name: string, overrides: Partial<NatsSettingsShape> = {}) =>
    Layer.effect(
      NatsSettings,
      natsSettingsFromConfig(name).pipe(
        Effect.map((settings) => ({ ...settings, ...overrides })),
        Effect.orDie,
      ),
    )
}

/** Splits NATS_URL's comma-separated list. */
export const serverList = (url: string): string[] =>
  url
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)

/**
 * NATS_URL (comma-separated), NATS_USER, NATS_PASS, WM_STREAM_REPLICAS, WM_DEDUPE_WINDOW_MS,
 * WM_STREAM_MAX_BYTES, WM_STREAM_MAX_MSGS, read with Effect Config.
 */
export const natsSettingsFromConfig = (name: string) =>
  Effect.gen(function* () {
    const url = yield* Config.String("NATS_URL").pipe(Config.withDefault(DEFAULT_NATS_URL))
    const user = yield* Config.option(Config.String("NATS_USER"))
    const pass = yield* Config.option(Config.String("NATS_PASS"))
    const replicas = yield* Config.Int("WM_STREAM_REPLICAS").pipe(Config.withDefault(1))
    const dedupeWindowMs = yield* Config.Int("WM_DEDUPE_WINDOW_MS").pipe(Config.withDefault(10 * 60_000))
    const streamMaxBytes = yield* streamLimit("WM_STREAM_MAX_BYTES")
    const streamMaxMsgs = yield* streamLimit("WM_STREAM_MAX_MSGS")
    return {
      servers: serverList(url),
      name,
      user: user._tag === "Some" ? user.value : undefined,
      pass: pass._tag === "Some" ? pass.value : undefined,
      replicas,
      dedupeWindowMs,
      streamMaxBytes,
      streamMaxMsgs,
    } satisfies NatsSettingsShape
  })
