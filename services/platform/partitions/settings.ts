/**
 * How a partitioned service divides the agents with its other replicas: WM_PARTITIONS, WM_PARTITION_PINS,
 * WM_LEASE_TTL_MS, WM_LEASE_SETTLE_MS, WM_REPLICA_ID and WM_SNAPSHOT_INTERVAL_MS, read through their
 * declarations in contracts/settings.ts (defaults, bounds and meanings are there, and in docs/configuration.md),
 * and checked against the count and pins that event subjects are built with.
 */
import { hostname } from "node:os"
import { nuid } from "@nats-io/nuid"
import { Context, Effect, Layer, Option } from "effect"
import { InvalidPlacementSetting, placementFromSettings } from "../../../contracts/partition-pins.ts"
import { deploymentPlacement, partitionCount } from "../../../contracts/partitions.ts"
import {
  DEFAULT_LEASE_SETTLE_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_SNAPSHOT_INTERVAL_MS,
  invalidSetting,
  settings,
} from "../../../contracts/settings.ts"

export interface PartitionSettingsShape {
  readonly partitions: number
  readonly leaseTtlMs: number
  readonly leaseSettleMs: number
  readonly replicaId: string
  readonly snapshotIntervalMs: number
}

const replicaName = () =>
  `${hostname()
    .replace(/[^A-Za-z0-9_-]/g, "-")
    .slice(0, 32)}-${process.pid}-${nuid.next().slice(-6)}`

/** The pins read with Config must be valid, and the ones event subjects are built with (the environment's). */
const checkPlacement = (partitions: number) =>
  Effect.gen(function* () {
    const pins = yield* settings.WM_PARTITION_PINS.config
    const tenants = yield* settings.WM_TENANTS.config
    const placement = yield* Effect.try({
      try: () => placementFromSettings(partitions, pins, tenants),
      catch: (error) =>
        error instanceof InvalidPlacementSetting
          ? invalidSetting(error.variable, error.reason)
          : invalidSetting(settings.WM_PARTITION_PINS.name, String(error)),
    })
    if (placement.fingerprint !== deploymentPlacement(partitions).fingerprint)
      return yield* Effect.die(
        new Error(
          `WM_PARTITION_PINS (or WM_TENANTS) here place agents otherwise than where event subjects are built (${pins || "no pins"})`,
        ),
      )
  })

export const partitionSettingsFromConfig = Effect.gen(function* () {
  const partitions = yield* settings.WM_PARTITIONS.config
  // Subjects are built with the deployment's count (contracts/partitions.ts): both must agree.
  if (partitions !== partitionCount())
    return yield* Effect.die(
      new Error(`WM_PARTITIONS is ${partitions} here but ${partitionCount()} where event subjects are built`),
    )
  yield* checkPlacement(partitions)
  const leaseTtlMs = yield* settings.WM_LEASE_TTL_MS.config
  const leaseSettleMs = yield* settings.WM_LEASE_SETTLE_MS.config
  const replicaId = Option.getOrElse(yield* settings.WM_REPLICA_ID.config, replicaName)
  const snapshotIntervalMs = yield* settings.WM_SNAPSHOT_INTERVAL_MS.config
  return { partitions, leaseTtlMs, leaseSettleMs, replicaId, snapshotIntervalMs } satisfies PartitionSettingsShape
})

export class PartitionSettings extends Context.Service<PartitionSettings, PartitionSettingsShape>()(
  "wm/PartitionSettings",
) {
  static readonly fromEnv = Layer.effect(PartitionSettings, partitionSettingsFromConfig.pipe(Effect.orDie))
  static readonly make = (settings: Partial<PartitionSettingsShape> = {}) =>
    Layer.succeed(PartitionSettings, {
      partitions: partitionCount(),
      leaseTtlMs: DEFAULT_LEASE_TTL_MS,
      leaseSettleMs: DEFAULT_LEASE_SETTLE_MS,
      replicaId: replicaName(),
      snapshotIntervalMs: DEFAULT_SNAPSHOT_INTERVAL_MS,
      ...settings,
    })
}
