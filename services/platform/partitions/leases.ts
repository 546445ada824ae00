/**
 * Partition ownership from NATS itself: a KV bucket (`wm_leases`) whose
 * entries expire by the bucket's TTL holds one lease per (service,
 * partition) and one heartbeat per live replica. Each replica, every quarter
 * of the TTL:
 *
 *   1. puts its heartbeat; the live replicas are the service's heartbeat keys;
 *   2. renews each lease it holds with a compare-and-set on the revision it
 *      last wrote (`kv.update`);
 *   3. releases leases above its fair share, ceil(P / live replicas), so a
 *      joining replica finds free partitions, keeping those whose agents come
 *      closest to its fair part of them, and one more when another replica
 *      holds fewer than floor(P / live replicas) and none is free (shares.ts);
 *   4. takes free partitions (no live entry: never taken, released, or
 *      expired with a dead owner) with `kv.create`, which only one replica
 *      can win: as many at once as it lacks of floor(P / live replicas), then,
 *      up to its share, those already free at its last round (shares.ts).
 *
 * A starting replica announces itself and settles (WM_LEASE_SETTLE_MS) before its first round, so
 * replicas started together divide the partitions at once; in its last half second the service prepares
 * the partitions the replica then expects to take (it reads their snapshots).
 *
 * A replica answers for a partition only until a quarter TTL before the
 * server could expire its lease (measured from when its last renewal was
 * sent), so two replicas never both answer for one. A lease that lapsed that
 * way (a stalled process, a broker election) is suspended, not lost: the
 * partition's projection keeps following the log, and the replica answers
 * again as soon as the entry is its own once more (its renewal lands, or it
 * re-creates the expired entry). Only another replica's entry, or a release,
 * makes it lost. Leases are released at shutdown.
 *
 * The same bucket holds each replica's progress report on the partitions it holds (progress.ts), which
 * expire as its leases do when it stops refreshing them.
 */
import type { KV, KvEntry } from "@nats-io/kv"
import { Kvm } from "@nats-io/kv"
import { Clock, Deferred, Effect, Schedule, type Scope } from "effect"
import { heartbeatKey, LEASE_BUCKET, leaseKey, progressKey } from "../../../contracts/buckets.ts"
import { allPartitions, fnv1a32 } from "../../../contracts/partitions.ts"
import { Nats } from "../nats/connection.ts"
import { NatsSettings } from "../nats/settings.ts"
import { Metrics, serviceLabel } from "../observability/metrics.ts"
import { Readiness } from "../observability/readiness.ts"
import { PartitionSettings } from "./settings.ts"
import { firstTake, partitionsToKeep } from "./shares.ts"

export interface LeaseCallbacks {
  /** The partition became this replica's: start catching up (return at once; answering waits for readiness). */
  readonly acquired: (partition: number) => void
  /** The partition is another replica's, or was released: drop what is held for it. */
  readonly lost: (partition: number) => void
  /**
   * While a starting replica settles: the partitions it expects to take (free now, in its preference
   * order, as many as its share of the replicas it sees), to prepare them; runs beside the settle.
   */
  readonly settling?: (expected: ReadonlyArray<number>) => Effect.Effect<void>
  /** The agents this replica holds in a partition it holds: what it keeps by when it gives partitions up. */
  readonly weight?: (partition: number) => number
}

export interface PartitionLeases {
  readonly replicaId: string
  /** True while this replica's lease on the partition is certainly valid (not lapsed, not lost). */
  readonly holds: (partition: number) => boolean
  readonly held: () => ReadonlyArray<number>
  /** Completes after the first round (the replica holds its first share, if any was free). */
  readonly firstRound: Effect.Effect<void>
  /**
   * Puts this replica's progress report on a partition it holds (`<service>.progress.<p>`, progress.ts); it
   * is deleted when the partition is dropped, and expires with the bucket's TTL when no longer refreshed.
   */
  readonly report: (partition: number, value: string) => Promise<void>
  /**
   * The service's partitions no live replica held a lease on at the end of this replica's last round: no
   * entry, or the entry of a replica whose heartbeat has expired.
   */
  readonly withoutOwner: () => ReadonlyArray<number>
}

interface Held {
  revision: number
  validUntil: number
}

/**
 * How long before the end of its settle a replica starts preparing the partitions it expects (reading 16
 * partitions' snapshots of 1,000 agents at 1M events took about 0.45 s, BENCHMARKS.md).
 */
const PREPARE_BEFORE_TAKING_MS = 500
/** How soon a failed first round is tried again. */
const FIRST_ROUND_RETRY_MS = 200
/** A replica holding its share looks for partitions without an owner every this many rounds. */
const OWNERLESS_EVERY = 4

/** How many partitions each of `live` replicas should hold. */
export const fairShare = (partitions: number, live: number): number => Math.ceil(partitions / Math.max(1, live))

/** The order in which a replica tries partitions: from a start of its own, so replicas spread out. */
export const preferenceOrder = (replicaId: string, partitions: number): number[] => {
  const start = fnv1a32(replicaId) % partitions
  return Array.from({ length: partitions }, (_, i) => (start + i) % partitions)
}

/** The replica a lease entry names (undefined: not a lease of this code's). */
const ownerOf = (entry: KvEntry): string | undefined => {
  try {
    const replica = (JSON.parse(entry.string()) as { replica?: unknown }).replica
    return typeof replica === "string" ? replica : undefined
  } catch {
    return undefined
  }
}

/** The lease bucket (created with this TTL when absent): leases, heartbeats and progress reports. */
export const openLeaseBucket = (ttlMs: number) =>
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
      // A cluster that has just formed may time out creating a replicated bucket: try again, as openBucket does.
    }).pipe(Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))), Effect.orDie)
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
    const weight = callbacks.weight ?? (() => 0)
    const value = JSON.stringify({ replica: replicaId })
    const firstRound = yield* Deferred.make<void>()
    let stopped = false
    let settled = false
    let share = partitions
    let unowned: ReadonlyArray<number> = []
    /** Another live replica held fewer than the first take at the last read of the leases. */
    let anotherBelowFirstTake = false
    let roundsSinceOwnerless = 0
    const metrics = yield* Metrics
    const label = { service: serviceLabel(service) }
    const clock = yield* Clock.Clock

    /** The revision of this replica's last progress report per partition held. */
    const reported = new Map<number, number>()
    const unreporting = new Set<Promise<unknown>>()
    /** Deletes the partition's progress report, unless another replica's has replaced it. */
    const unreport = (partition: number) => {
      const revision = reported.get(partition)
      if (revision === undefined) return
      reported.delete(partition)
      const deleting = kv.delete(progressKey(service, partition), { previousSeq: revision }).catch(() => undefined)
      unreporting.add(deleting)
      void deleting.finally(() => unreporting.delete(deleting))
    }

    const drop = (partition: number) => {
      if (!held.delete(partition)) return
      unreport(partition)
      callbacks.lost(partition)
    }

    const report = async (partition: number, progress: string) => {
      if (!held.has(partition)) return
      const revision = await kv.put(progressKey(service, partition), progress).catch(() => null)
      if (revision !== null && held.has(partition)) reported.set(partition, revision)
    }

    const liveReplicas = async (): Promise<Set<string>> => {
      const live = new Set<string>()
      const prefix = heartbeatKey(service, "")
      for await (const key of await kv.keys(heartbeatKey(service, "*"))) live.add(key.slice(prefix.length))
      return live
    }

    /**
     * The partitions whose lease entry is missing or names a replica that is not live, and how many each other
     * live replica holds. Those this replica holds have an owner (it is live: its heartbeat was just written),
     * so only the others are read.
     */
    const otherLeases = async (
      live: ReadonlySet<string>,
    ): Promise<{ readonly withoutOwner: number[]; readonly heldBy: ReadonlyMap<string, number> }> => {
      const others = allPartitions(partitions).filter((p) => !held.has(p))
      const entries = await Promise.all(others.map((p) => kv.get(leaseKey(service, p)).catch(() => undefined)))
      const withoutOwner: number[] = []
      const heldBy = new Map<string, number>()
      others.forEach((partition, i) => {
        const entry = entries[i]
        if (entry === undefined) return
        const owner = entry === null || entry.operation !== "PUT" ? undefined : ownerOf(entry)
        if (owner === undefined || !live.has(owner)) withoutOwner.push(partition)
        else heldBy.set(owner, (heldBy.get(owner) ?? 0) + 1)
      })
      return { withoutOwner, heldBy }
    }

    function holds(partition: number): boolean {
      const lease = held.get(partition)
      return lease !== undefined && clock.currentTimeMillisUnsafe() < lease.validUntil
    }

    const isOurs = (entry: KvEntry | null): boolean =>
      entry !== null && entry.operation === "PUT" && entry.string() === value

    /** Holds the partition from a write sent at `sent` that produced `revision`. */
    const hold = (partition: number, revision: number, sent: number) => {
      const lease = held.get(partition)
      if (lease === undefined) held.set(partition, { revision, validUntil: sent + leaseTtlMs - period })
      else {
        lease.revision = revision
        lease.validUntil = sent + leaseTtlMs - period
      }
    }

    /**
     * Renews on the revision last written; when that is refused, the entry decides: still ours (a renewal
     * whose reply was lost), renewed on its revision; gone (expired while this replica stalled), created
     * again; another replica's, lost. When the bucket cannot be reached the lease stays suspended.
     */
    const renew = async (partition: number, lease: Held) => {
      const key = leaseKey(service, partition)
      const sent = clock.currentTimeMillisUnsafe()
      try {
        hold(partition, await kv.update(key, value, lease.revision), sent)
        return
      } catch {}
      const entry = await kv.get(key).catch(() => undefined)
      if (entry === undefined) return
      const again = clock.currentTimeMillisUnsafe()
      if (entry !== null && isOurs(entry)) {
        const revision = await kv.update(key, value, entry.revision).catch(() => null)
        if (revision !== null) hold(partition, revision, again)
      } else if (entry === null || entry.operation !== "PUT") {
        const revision = await kv.create(key, value).catch(() => null)
        if (revision !== null) hold(partition, revision, again)
        else if (!isOurs(await kv.get(key).catch(() => null))) drop(partition)
      } else drop(partition)
    }

    const take = async (partition: number): Promise<boolean> => {
      const key = leaseKey(service, partition)
      const current = await kv.get(key)
      const sent = clock.currentTimeMillisUnsafe()
      try {
        // An entry of this replica's own that it no longer counts as held (a release whose delete was lost).
        if (current !== null && isOurs(current)) hold(partition, await kv.update(key, value, current.revision), sent)
        else if (current !== null && current.operation === "PUT") return false
        else {
          hold(partition, await kv.create(key, value), sent)
          // A released or deleted entry was another replica's lease (an expired one leaves none).
          if (current !== null) metrics.leaseTakeovers.inc(label)
        }
      } catch {
        return false
      }
      callbacks.acquired(partition)
      return true
    }

    const release = async (partition: number) => {
      const lease = held.get(partition)
      if (lease === undefined) return
      drop(partition)
      await kv.delete(leaseKey(service, partition), { previousSeq: lease.revision }).catch(() => undefined)
    }

    const round = async () => {
      await kv.put(heartbeatKey(service, replicaId), value)
      const live = await liveReplicas()
      share = fairShare(partitions, live.size)
      await Promise.all([...held].map(([partition, lease]) => renew(partition, lease)))
      const atOnce = Math.min(share, firstTake(partitions, live.size))
      const mine = order.filter((p) => held.has(p))
      // Above the first take while another replica is below it and none is free (it joined after the others
      // had taken their shares): one partition goes back, for it to take (shares.ts).
      const keeps =
        anotherBelowFirstTake && unowned.length === 0 && mine.length > atOnce && mine.length <= share
          ? mine.length - 1
          : share
      anotherBelowFirstTake = false
      const keep = new Set(partitionsToKeep(mine, keeps, weight, { partitions, replicas: live.size }))
      for (const extra of mine.filter((p) => !keep.has(p)).reverse()) await release(extra)
      // As many takes at once as the first take still lacks, in preference order, until it is held or none is
      // free; then, up to the share, those that were free at the last round already (shares.ts).
      const candidates = order.filter((p) => !held.has(p))
      while (held.size < atOnce && candidates.length > 0 && !stopped)
        await Promise.all(candidates.splice(0, atOnce - held.size).map(take))
      const freeBefore = new Set(unowned)
      const late = order.filter((p) => !held.has(p) && freeBefore.has(p))
      while (held.size < share && late.length > 0 && !stopped)
        await Promise.all(late.splice(0, share - held.size).map(take))
      // Read every round while this replica lacks its share (readiness names what it should take) or some
      // partition had no owner (the metric clears as soon as it has one); otherwise every OWNERLESS_EVERY rounds.
      if (held.size < share || unowned.length > 0 || ++roundsSinceOwnerless >= OWNERLESS_EVERY) {
        roundsSinceOwnerless = 0
        const leases = await otherLeases(live)
        unowned = leases.withoutOwner
        anotherBelowFirstTake = [...live].some((r) => r !== replicaId && (leases.heldBy.get(r) ?? 0) < atOnce)
      }
    }

    /** The free partitions this replica would take first, from its share of the replicas it sees now. */
    const expectedPartitions = async (): Promise<number[]> => {
      const share = fairShare(partitions, (await liveReplicas()).size)
      const entries = await Promise.all(order.map((p) => kv.get(leaseKey(service, p))))
      return order.filter((_, i) => entries[i] === null || entries[i]!.operation !== "PUT").slice(0, share)
    }

    const loop = Effect.gen(function* () {
      // Announce first and wait: replicas started together see each other before taking,
      // so none catches up on partitions it would hand over a moment later.
      yield* Effect.tryPromise(() => kv.put(heartbeatKey(service, replicaId), value)).pipe(Effect.ignore)
      if (leaseSettleMs > 0) {
        // Late in the settle, when the replicas started with this one have most likely announced
        // themselves, so that it prepares only what its share will be.
        const lead = Math.min(leaseSettleMs, PREPARE_BEFORE_TAKING_MS)
        yield* Effect.sleep(leaseSettleMs - lead)
        const expected = yield* Effect.tryPromise(expectedPartitions).pipe(Effect.orElseSucceed(() => []))
        if (callbacks.settling !== undefined) yield* Effect.forkScoped(callbacks.settling(expected))
        yield* Effect.sleep(lead)
      }
      // A first round that fails (the server busy, a timeout) is tried again at once, not a period later:
      // until one passes the replica holds nothing and serves nothing. Start-up goes on after a lease's
      // lifetime of failures, with readiness saying why.
      const startedAt = yield* Clock.currentTimeMillis
      let first = true
      while (!stopped) {
        const passed = yield* Effect.tryPromise({ try: round, catch: (cause) => cause }).pipe(
          Effect.as(true),
          Effect.catch((cause) =>
            Effect.as(Effect.logWarning(`[${service}] lease round failed: ${String(cause)}`), false),
          ),
        )
        if (first && !passed && (yield* Clock.currentTimeMillis) - startedAt < leaseTtlMs) {
          yield* Effect.sleep(Math.min(period, FIRST_ROUND_RETRY_MS))
          continue
        }
        first = false
        yield* Deferred.succeed(firstRound, undefined)
        settled = true
        yield* Effect.sleep(period)
      }
    })
    yield* Effect.forkScoped(loop)

    yield* metrics.collect(() => {
      metrics.partitionsOwned.inc(label, [...held.keys()].filter(holds).length)
      metrics.partitionsWithoutOwner.set(label, unowned.length)
    })
    const readiness = yield* Readiness
    yield* readiness.register(() => {
      if (!settled) return [`${service}: leases settling`]
      const reasons = [...held.keys()].filter((p) => !holds(p)).map((p) => `${service}: lease on partition ${p} lapsed`)
      // It should take them: partitions whose lease no live replica holds, while it holds less than its share.
      if (held.size < share && unowned.length > 0)
        reasons.push(`${service}: leases settling, partitions without an owner: ${unowned.join(", ")}`)
      return reasons
    })

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        stopped = true
        for (const partition of [...held.keys()]) await release(partition)
        await kv.delete(heartbeatKey(service, replicaId)).catch(() => undefined)
        await Promise.all(unreporting)
      }),
    )

    return {
      replicaId,
      holds,
      held: () => [...held.keys()].sort((a, b) => a - b),
      firstRound: Deferred.await(firstRound),
      report,
      withoutOwner: () => unowned,
    } satisfies PartitionLeases
  })
