/**
 * What the gateway's writes are bounded by: WM_MAX_BATCH_ENTRIES, WM_MAX_PROJECTION_LAG and
 * WM_GATEWAY_CONCURRENT_REQUESTS, read through
 * their declarations in contracts/settings.ts (defaults, bounds and meanings are there, and in the
 * table in docs/configuration.md).
 */
import { Context, Effect, Layer, Option } from "effect"
import { DEFAULT_BATCH_ENTRIES } from "../../contracts/api.ts"
import { DEFAULT_GATEWAY_CONCURRENT_REQUESTS, DEFAULT_MAX_PROJECTION_LAG, settings } from "../../contracts/settings.ts"

export interface GatewaySettingsShape {
  /** The most entries one `entry.recordMany` takes. */
  readonly maxBatchEntries: number
  /** How many events of a partition a background projection may be behind before new entries are refused (0: no limit). */
  readonly maxProjectionLag: number
  /** How many requests run at once besides those of idle agents (api/admission.ts; 0: no limit). */
  readonly concurrentRequests: number
}

/** Where the gateway runs: with the other services in one process (`npm start`), or on its own. */
export type GatewayPlacement = keyof typeof DEFAULT_GATEWAY_CONCURRENT_REQUESTS

export const gatewaySettingsFromConfig = (placement: GatewayPlacement) =>
  Effect.gen(function* () {
    const maxBatchEntries = yield* settings.WM_MAX_BATCH_ENTRIES.config
    const maxProjectionLag = yield* settings.WM_MAX_PROJECTION_LAG.config
    const concurrentRequests = Option.getOrElse(
      yield* settings.WM_GATEWAY_CONCURRENT_REQUESTS.config,
      () => DEFAULT_GATEWAY_CONCURRENT_REQUESTS[placement],
    )
    return { maxBatchEntries, maxProjectionLag, concurrentRequests } satisfies GatewaySettingsShape
  })

export class GatewaySettings extends Context.Service<GatewaySettings, GatewaySettingsShape>()("wm/GatewaySettings") {
  static readonly fromEnv = (placement: GatewayPlacement = "alone") =>
    Layer.effect(GatewaySettings, gatewaySettingsFromConfig(placement).pipe(Effect.orDie))
  static readonly make = (settings: Partial<GatewaySettingsShape> = {}) =>
    Layer.succeed(GatewaySettings, {
      maxBatchEntries: DEFAULT_BATCH_ENTRIES,
      maxProjectionLag: DEFAULT_MAX_PROJECTION_LAG,
      concurrentRequests: DEFAULT_GATEWAY_CONCURRENT_REQUESTS.alone,
      ...settings,
    })
}
