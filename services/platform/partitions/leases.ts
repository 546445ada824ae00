/**
 * Partition ownership from NATS itself: a KV bucket (`wm_leases`) whose
 * entries expire by the bucket's TTL holds one lease per (service,
 * partition) and one heartbeat per live replica. Each replica, every quarter
 * of the TTL:
 *
 *   1. puts its heartbeat; the live replicas are the service's heartbeat keys;
 *   2. renews each lease it holds with a compare-and-set on the revision it
 *      last wrote (`kv.update`); a renewal refused means another replica took
 *      the partition after the lease lapsed: it is dropped at once;
 *   3. releases leases above its fair share, ceil(P / live replicas), so a
 *      joining replica finds free partitions;
 *   4. takes free partitions (no live entry: never taken, released, or
 *      expired with a dead owner) with `kv.create`, which only one replica
 *      can win, until it holds its share.
 *
 * A replica holds a lease only until a quarter TTL before the server could
 * expire it (measured from when its last renewal was sent), so two replicas
 * never both believe they own a partition. Leases are released at shutdown.
 */
import type { KV } from "@nats-io/kv"
import { Kvm } from "@nats-io/kv"
import { Deferred, Effect, type Scope } from "effect"
import { heartbeatKey, LEASE_BUCKET, leaseKey } from "../../../contracts/buckets.ts"
import { fnv1a32 } from "../../../contracts/partitions.ts"
import { Nats } from "../nats/connection.ts"
import { NatsSettings } from "../nats/settings.ts"
import { PartitionSettings } from "./settings.ts"

export interface LeaseCallbacks {
  /** The partition became this replica's: start catching up (return at once; answering waits for readiness). */
  readonly acquired: (partition: number) => void
  /** The partition is no longer this replica's (released, refused or lapsed): stop answering for it. */
  readonly lost: (partition: number) => void
}

export interface PartitionLeases {
  readonly replicaId: string
  /** True while this replica's lease on the partition is certainly valid. */
  readonly holds: (partition: number) => boolean
  readonly held: () => ReadonlyArray<number>
  /** Completes after the first round (the replica holds its first share, if any was free). */
  readonly firstRound: Effect.Effect<void>
}

interface Held {
  revision: number
  validUntil: number
}

/** How many partitions each of `live` replicas should hold. */
export const fairShare = (partitions: number, live: number): number => Math.ceil(partitions / Math.max(1, live))

/** The order in which a replica tries partitions: from a start of its own, so replicas spread out. */
export const preferenceOrder = (replicaId: string, partitions: number): number[] => {
  const start = fnv1a32(replicaId) % partitions
  return Array.from({ length: partitions }, (_, i) => (start + i) % partitions)
}

const openLeaseBucket = (ttlMs: number) =>
  Effect.gen(function* () {
    const { js } = yield* Nats
    const settings = yield* NatsSettings
    return yield* Effect.tryPromise({
      try: (): Promise<KV> =>
        new Kvm(js).create(LEASE_BUCKET, {
          ttl: ttlMs,
          history: 1,
          replicas: settings.replicas,
          // On file, so the leases outlive a broker restart: a memory bucket vanishes with the broker and
          // every renewal and take would fail against a stream that no longer exists.
          storage: "file" as never,
        }),
      catch: (cause) => new Error(`cannot open KV bucket ${LEASE_BUCKET}: ${String(cause)}`, { cause }),
    }).pipe(Effect.orDie)
  })

export const holdPartitionLeases = (
  service: string,
  callbacks: LeaseCallbacks,
): Effect.Effect<PartitionLeases, never, Nats | NatsSettings | PartitionSettings | Scope.Scope> =>
  Effect.gen(function* () {
    const { partitions, leaseTtlMs, leaseSettleMs, replicaId } = yield* PartitionSettings
    const kv = yield* openLeaseBucket(leaseTtlMs)
    const period = Math.max(100, Math.floor(leaseTtlMs / 4))
    const held = new Map<number, Held>()
    const order = preferenceOrder(replicaId, partitions)
    const value = JSON.stringify({ replica: replicaId })
    const firstRound = yield* Deferred.make<void>()
    let stopped = false

    const drop = (partition: number) => {
      if (!held.delete(partition)) return
      callbacks.lost(partition)
    }

    const liveReplicas = async (): Promise<number> => {
      let live = 0
      for await (const _ of await kv.keys(heartbeatKey(service, "*"))) live++
      return live
    }

    const renew = async (partition: number, lease: Held) => {
      const sent = Date.now()
      try {
        lease.revision = await kv.update(leaseKey(service, partition), value, lease.revision)
        lease.validUntil = sent + leaseTtlMs - period
      } catch {
        // Refused: the lease lapsed and may be another replica's now. A timeout proves nothing either way.
        if (Date.now() >= lease.validUntil || !(await stillOurs(partition, lease))) drop(partition)
      }
    }

    const stillOurs = async (partition: number, lease: Held) => {
      const entry = await kv.get(leaseKey(service, partition)).catch(() => null)
      return entry !== null && entry.operation === "PUT" && entry.revision === lease.revision
    }

    const take = async (partition: number): Promise<boolean> => {
      const key = leaseKey(service, partition)
      const current = await kv.get(key)
      if (current !== null && current.operation === "PUT") return false
      const sent = Date.now()
      try {
        const revision = await kv.create(key, value)
        held.set(partition, { revision, validUntil: sent + leaseTtlMs - period })
        callbacks.acquired(partition)
        return true
      } catch {
        return false
      }
    }

    const release = async (partition: number) => {
      const lease = held.get(partition)
      if (lease === undefined) return
      drop(partition)
      await kv.delete(leaseKey(service, partition), { previousSeq: lease.revision }).catch(() => undefined)
    }

    const round = async () => {
      await kv.put(heartbeatKey(service, replicaId), value)
      const share = fairShare(partitions, await liveReplicas())
      const now = Date.now()
      await Promise.all(
        [...held].map(([partition, lease]) =>
          now >= lease.validUntil ? Promise.resolve(drop(partition)) : renew(partition, lease),
        ),
      )
      const mine = order.filter((p) => held.has(p))
      for (const extra of mine.slice(share).reverse()) await release(extra)
      for (const partition of order) {
        if (held.size >= share || stopped) break
        if (!held.has(partition)) await take(partition)
      }
    }

    const loop = Effect.gen(function* () {
      // Announce first and wait: replicas started together see each other before taking,
      // so none catches up on partitions it would hand over a moment later.
      yield* Effect.tryPromise(() => kv.put(heartbeatKey(service, replicaId), value)).pipe(Effect.ignore)
      yield* Effect.sleep(leaseSettleMs)
      while (!stopped) {
        yield* Effect.tryPromise(round).pipe(
          Effect.catch((error) =>
            Effect.sync(() => console.error(`[${service}] lease round failed: ${String(error)}`)),
          ),
        )
        yield* Deferred.succeed(firstRound, undefined)
        yield* Effect.sleep(period)
      }
    })
    yield* Effect.forkScoped(loop)

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        stopped = true
        for (const partition of [...held.keys()]) await release(partition)
        await kv.delete(heartbeatKey(service, replicaId)).catch(() => undefined)
      }),
    )

    return {
      replicaId,
      holds: (partition) => {
        const lease = held.get(partition)
        return lease !== undefined && Date.now() < lease.validUntil
      },
      held: () => [...held.keys()].sort((a, b) => a - b),
      firstRound: Deferred.await(firstRound),
    } satisfies PartitionLeases
  })
