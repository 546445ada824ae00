/**
 * How far each partitioned service's work on each partition has got, for back-pressure and the operator.
 *
 * Every replica of a partitioned service (working, gateway, fade, memory) reports, for each partition it
 * answers for, the stream sequence up to which its work on the partition is done — the projection's
 * applied position, or less where the service still has work behind it (fade's evaluations, memory's
 * long-term writes) — and its lag: how many records of the partition its work is behind, those its
 * projection has applied but the work behind it has not done yet, plus those the log still held for the
 * projection after the last one delivered (its consumer's pending count). Reports go to the lease bucket
 * (`<service>.progress.<p>`) within half a second of a change (a position that moved with nothing behind
 * waits for the next keep-alive), and at least every third of the lease TTL; an entry expires with the
 * bucket's TTL, so a replica that stops reporting stops being counted, as its lease lapses with it.
 */
import type { KV } from "@nats-io/kv"
import { progressKey } from "../../../contracts/buckets.ts"

/** The services whose lag holds back new entries: the projections that do work behind the log. */
export const BACKGROUND_PROJECTIONS = ["working", "fade", "memory"] as const

export interface PartitionProgress {
  readonly replica: string
  /** Every record of the partition up to this stream sequence is done with. */
  readonly seq: number
  /** The projection's own applied position (at least `seq`). */
  readonly applied: number
  /** Records of the partition the work is behind, when reported. */
  readonly lag: number
  /** When it was reported, by the reporting replica's clock (epoch ms). */
  readonly at: number
}

export const encodeProgress = (progress: PartitionProgress): string => JSON.stringify(progress)

export const decodeProgress = (text: string): PartitionProgress | null => {
  try {
    const value = JSON.parse(text) as Partial<PartitionProgress>
    if (typeof value.seq !== "number" || typeof value.replica !== "string") return null
    return {
      replica: value.replica,
      seq: value.seq,
      applied: typeof value.applied === "number" ? value.applied : value.seq,
      lag: typeof value.lag === "number" ? value.lag : 0,
      at: typeof value.at === "number" ? value.at : 0,
    }
  } catch {
    return null
  }
}

/** The service's latest report on the partition, null when none is live. */
export const readProgress = async (kv: KV, service: string, partition: number): Promise<PartitionProgress | null> => {
  const entry = await kv.get(progressKey(service, partition))
  return entry === null || entry.operation !== "PUT" ? null : decodeProgress(entry.string())
}

/** Reads a service's latest report on a partition, null when none is live. */
export type ProgressReader = (service: string, partition: number) => Promise<PartitionProgress | null>

/** The reports of the lease bucket `kv` (openLeaseBucket), as a ProgressReader. */
export const progressReader =
  (kv: KV): ProgressReader =>
  (service, partition) =>
    readProgress(kv, service, partition)
