/**
 * Back-pressure: an agent's new entries wait while the background work on its partition is far behind
 * the log, instead of piling up unseen behind it.
 *
 * The policy: `entry.record` and `entry.recordMany` of an agent are refused with `Overloaded` while any
 * background projection of the agent's partition — working's views, fade's decisions (scores, key points,
 * summaries, embeddings), memory's indexes and long-term records — is more than WM_MAX_PROJECTION_LAG
 * events of that partition behind. Nothing else is refused: registration, budgets, steps, focus,
 * references and context builds are how an agent finishes what it is doing (and a step that ends is what
 * lets fade relieve working), and reads never write. A retry of an entry already stored is answered as
 * ever. A refusal stores nothing and says when to try again (`retryAfterMs`).
 *
 * How far behind: each projection's replicas report, per partition, how many of its records their work
 * is behind (services/platform/partitions/progress.ts), when that changes, at most every half second.
 * Reports are read at most every FRESH_MS per partition, on a write. A projection with no live report
 * (no replica running it, or one that stopped reporting for a lease TTL) holds nothing back: nothing
 * works on that partition for now, and the log keeps every write for the next owner.
 */
import { type Clock, Effect, Option } from "effect"
import { Overloaded } from "../../contracts/errors.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { BACKGROUND_PROJECTIONS, type PartitionProgress, type ProgressReader } from "../platform/partitions/progress.ts"

/** How long the reports read for a partition answer its writes. */
const FRESH_MS = 250
/** How long a write waits for the reports before going on without them. */
const READ_TIMEOUT = "1 second"
/** `retryAfterMs` bounds, and what is said when the projection did not move lately. */
const MIN_RETRY_MS = 200
const MAX_RETRY_MS = 10_000
const STILL_RETRY_MS = 1_000
/** A projection whose lag has not changed for this long is not draining. */
const STILL_AFTER_MS = 2_000

interface Lag {
  readonly lag: number
  /** When this gateway first read it. */
  readonly at: number
}

export interface BackPressure {
  /** Null when the agent's new entries may be stored now; else the refusal that says why not. */
  readonly check: (agentId: string) => Effect.Effect<Overloaded | null>
}

export const makeBackPressure = (limit: number, readProgress: ProgressReader, clock: Clock.Clock): BackPressure => {
  const reads = new Map<number, { readonly at: number; readonly reports: Promise<Map<string, PartitionProgress>> }>()
  /** Per projection and partition, its latest lag read and the one before it: how fast it drains. */
  const lags = new Map<string, { previous: Lag | null; latest: Lag }>()
  const refusing = new Set<number>()

  const noted = (service: string, partition: number, lag: number, at: number) => {
    const key = `${service}.${partition}`
    const known = lags.get(key)
    if (known === undefined) lags.set(key, { previous: null, latest: { lag, at } })
    else if (known.latest.lag !== lag) lags.set(key, { previous: known.latest, latest: { lag, at } })
  }

  const read = async (partition: number) => {
    const reports = new Map<string, PartitionProgress>()
    await Promise.all(
      BACKGROUND_PROJECTIONS.map(async (service) => {
        const progress = await readProgress(service, partition).catch(() => null)
        if (progress !== null) reports.set(service, progress)
      }),
    )
    const now = clock.currentTimeMillisUnsafe()
    for (const [service, progress] of reports) noted(service, partition, progress.lag, now)
    return reports
  }

  const reportsOf = (partition: number) => {
    const now = clock.currentTimeMillisUnsafe()
    const cached = reads.get(partition)
    if (cached !== undefined && now - cached.at < FRESH_MS) return cached.reports
    const reports = read(partition)
    reads.set(partition, { at: now, reports })
    return reports
  }

  /** When the lag should be back to half the limit, at the pace it went down between the last two reports read. */
  const retryAfterMs = (service: string, partition: number, lag: number) => {
    const known = lags.get(`${service}.${partition}`)
    if (
      known === undefined ||
      known.previous === null ||
      clock.currentTimeMillisUnsafe() - known.latest.at > STILL_AFTER_MS
    )
      return STILL_RETRY_MS
    const perMs = (known.previous.lag - known.latest.lag) / Math.max(1, known.latest.at - known.previous.at)
    if (perMs <= 0) return STILL_RETRY_MS
    return Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, Math.ceil((lag - limit / 2) / perMs)))
  }

  const check = (agentId: string): Effect.Effect<Overloaded | null> =>
    Effect.gen(function* () {
      if (limit <= 0) return null
      const partition = partitionOf(agentId)
      const reports = yield* Effect.promise(() => reportsOf(partition)).pipe(Effect.timeoutOption(READ_TIMEOUT))
      if (Option.isNone(reports)) return null
      let worst: { readonly service: string; readonly lag: number } | null = null
      for (const [service, progress] of reports.value)
        if (progress.lag > limit && (worst === null || progress.lag > worst.lag)) worst = { service, lag: progress.lag }
      if (worst === null) {
        if (refusing.delete(partition))
          yield* Effect.logInfo(`[gateway] partition ${partition}: background work caught up; new entries accepted`)
        return null
      }
      if (!refusing.has(partition)) {
        refusing.add(partition)
        yield* Effect.logWarning(
          `[gateway] partition ${partition}: ${worst.service} is ${worst.lag} events behind (limit ${limit}); new entries are refused with Overloaded`,
        )
      }
      return new Overloaded({
        projection: worst.service,
        partition,
        lag: worst.lag,
        limit,
        retryAfterMs: retryAfterMs(worst.service, partition, worst.lag),
      })
    })

  return { check }
}
