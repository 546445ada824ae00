/**
 * What the gateway's writes are bounded by: WM_MAX_BATCH_ENTRIES, read through its declaration in
 * contracts/settings.ts (default, bounds and meaning are there, and in the README's table).
 */
import { Context, Effect, Layer } from "effect"
import { DEFAULT_BATCH_ENTRIES } from "../../contracts/api.ts"
import { settings } from "../../contracts/settings.ts"

export interface GatewaySettingsShape {
  /** The most entries one `entry.recordMany` takes. */
  readonly maxBatchEntries: number
}

export const gatewaySettingsFromConfig = Effect.gen(function* () {
  const maxBatchEntries = yield* settings.WM_MAX_BATCH_ENTRIES.config
  return { maxBatchEntries } satisfies GatewaySettingsShape
})

export class GatewaySettings extends Context.Service<GatewaySettings, GatewaySettingsShape>()("wm/GatewaySettings") {
  static readonly fromEnv = Layer.effect(GatewaySettings, gatewaySettingsFromConfig.pipe(Effect.orDie))
  static readonly make = (settings: Partial<GatewaySettingsShape> = {}) =>
    Layer.succeed(GatewaySettings, { maxBatchEntries: DEFAULT_BATCH_ENTRIES, ...settings })
}
