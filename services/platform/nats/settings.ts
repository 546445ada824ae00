import { Context, Effect, Layer, Option } from "effect"
import { settings as configured } from "../../../contracts/settings.ts"

export interface NatsSettingsShape {
  /** Client URLs; several for a cluster. */
  readonly servers: ReadonlyArray<string>
  /** Connection name shown by the server (per service). */
  readonly name: string
  readonly user?: string | undefined
  readonly pass?: string | undefined
  /**
   * How often the connection pings its server; two pings unanswered and it reconnects to another one.
   * A server cut off by a network partition keeps its TCP connections open, so only a ping notices.
   * Default: DEFAULT_NATS_PING_INTERVAL_MS.
   */
  readonly pingIntervalMs?: number
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
 * NATS_URL (comma-separated), NATS_USER, NATS_PASS, WM_NATS_PING_INTERVAL_MS, WM_STREAM_REPLICAS, WM_DEDUPE_WINDOW_MS,
 * WM_STREAM_MAX_BYTES, WM_STREAM_MAX_MSGS, read with Effect Config.
 */
export const natsSettingsFromConfig = (name: string) =>
  Effect.gen(function* () {
    const url = yield* configured.NATS_URL.config
    const user = yield* configured.NATS_USER.config
    const pass = yield* configured.NATS_PASS.config
    const pingIntervalMs = yield* configured.WM_NATS_PING_INTERVAL_MS.config
    const replicas = yield* configured.WM_STREAM_REPLICAS.config
    const dedupeWindowMs = yield* configured.WM_DEDUPE_WINDOW_MS.config
    const streamMaxBytes = yield* configured.WM_STREAM_MAX_BYTES.config
    const streamMaxMsgs = yield* configured.WM_STREAM_MAX_MSGS.config
    return {
      servers: serverList(url),
      name,
      user: Option.getOrUndefined(user),
      pass: Option.getOrUndefined(pass),
      pingIntervalMs,
      replicas,
      dedupeWindowMs,
      streamMaxBytes,
      streamMaxMsgs,
    } satisfies NatsSettingsShape
  })
