/**
 * How a partitioned service divides the agents with its other replicas, read with Effect Config:
 *
 *   WM_PARTITIONS           partitions of the deployment (default 16); the same in every process
 *   WM_PARTITION_PINS       tenants pinned to partitions (contracts/partition-pins.ts); the same in every process
 *   WM_LEASE_TTL_MS         a partition lease lapses this long after its owner's last renewal (default 6000)
 *   WM_LEASE_SETTLE_MS      a starting replica announces itself and waits this long before taking partitions,
 *                           so replicas started together divide them at once, and reads the snapshots of the
 *                           partitions it expects to take meanwhile (default 500)
 *   WM_REPLICA_ID           this replica's name in the lease bucket (default: host name, pid and a random suffix)
 *   WM_SNAPSHOT_INTERVAL_MS how often each owned partition's views are snapshotted (default 60000; 0: only at shutdown)
 */
import { hostname } from "node:os"
import { nuid } from "@nats-io/nuid"
import { Config, Context, Effect, Layer, Schema } from "effect"
import { InvalidPlacementSetting, placementFromSettings } from "../../../contracts/partition-pins.ts"
import {
  DEFAULT_PARTITIONS,
  deploymentPlacement,
  partitionCount,
  partitionCountProblem,
} from "../../../contracts/partitions.ts"
import { invalidSetting, settings } from "../../../contracts/settings.ts"

export interface PartitionSettingsShape {
  readonly partitions: number
  readonly leaseTtlMs: number
  readonly leaseSettleMs: number
  readonly replicaId: string
  readonly snapshotIntervalMs: number
}

const partitionsConfig = Config.schema(
  Schema.Int.check(Schema.makeFilter((n: number) => partitionCountProblem(n) ?? true)),
  settings.WM_PARTITIONS.name,
).pipe(Config.withDefault(DEFAULT_PARTITIONS))

const millis = (name: string, fallback: number, minimum: number) =>
  Config.schema(
    Schema.Int.check(Schema.makeFilter((n: number) => n >= minimum || `must be at least ${minimum} ms`)),
    name,
  ).pipe(Config.withDefault(fallback))

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
  const partitions = yield* partitionsConfig
  // Subjects are built with the deployment's count (contracts/partitions.ts): both must agree.
  if (partitions !== partitionCount())
    return yield* Effect.die(
      new Error(`WM_PARTITIONS is ${partitions} here but ${partitionCount()} where event subjects are built`),
    )
  yield* checkPlacement(partitions)
  const leaseTtlMs = yield* millis(settings.WM_LEASE_TTL_MS.name, 6_000, 1_000)
  const leaseSettleMs = yield* millis(settings.WM_LEASE_SETTLE_MS.name, 500, 0)
  const replicaId = yield* Config.String(settings.WM_REPLICA_ID.name).pipe(Config.withDefault(replicaName()))
  const snapshotIntervalMs = yield* millis(settings.WM_SNAPSHOT_INTERVAL_MS.name, 60_000, 0)
  return { partitions, leaseTtlMs, leaseSettleMs, replicaId, snapshotIntervalMs } satisfies PartitionSettingsShape
})

export class PartitionSettings extends Context.Service<PartitionSettings, PartitionSettingsShape>()(
  "wm/PartitionSettings",
) {
  static readonly fromEnv = Layer.effect(PartitionSettings, partitionSettingsFromConfig.pipe(Effect.orDie))
  static readonly make = (settings: Partial<PartitionSettingsShape> = {}) =>
    Layer.succeed(PartitionSettings, {
      partitions: partitionCount(),
      leaseTtlMs: 6_000,
      leaseSettleMs: 500,
      replicaId: replicaName(),
      snapshotIntervalMs: 60_000,
      ...settings,
    })
}
