/**
 * What the gateway's writes are bounded by: WM_MAX_BATCH_ENTRIES and WM_MAX_PROJECTION_LAG, read through
 * their declarations in contracts/settings.ts (defaults, bounds and meanings are there, and in the
 * table in docs/configuration.md).
 */
import { Context, Effect, Layer } from "effect"
import { DEFAULT_BATCH_ENTRIES } from "../../contracts/api.ts"
import { DEFAULT_MAX_PROJECTION_LAG, settings } from "../../contracts/settings.ts"

export interface GatewaySettingsShape {
  /** The most entries one `entry.recordMany` takes. */
  readonly maxBatchEntries: number
  /** How many events of a partition a background projection may be behind before new entries are refused (0: no limit). */
  readonly maxProjectionLag: number
}

export const gatewaySettingsFromConfig = Effect.gen(function* () {
  const maxBatchEntries = yield* settings.WM_MAX_BATCH_ENTRIES.config
  const maxProjectionLag = yield* settings.WM_MAX_PROJECTION_LAG.config
  return { maxBatchEntries, maxProjectionLag } satisfies GatewaySettingsShape
})

export class GatewaySettings extends Context.Service<GatewaySettings, GatewaySettingsShape>()("wm/GatewaySettings") {
  static readonly fromEnv = Layer.effect(GatewaySettings, gatewaySettingsFromConfig.pipe(Effect.orDie))
  static readonly make = (settings: Partial<GatewaySettingsShape> = {}) =>
    Layer.succeed(GatewaySettings, {
      maxBatchEntries: DEFAULT_BATCH_ENTRIES,
      maxProjectionLag: DEFAULT_MAX_PROJECTION_LAG,
      ...settings,
    })
}
