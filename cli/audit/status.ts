/**
 * `wm status`: where each partitioned service's work on each partition has got, and how many records of
 * the partition it is behind, as every replica reports it in the lease bucket
 * (services/platform/partitions/progress.ts): the lag the gateways hold new entries back on. Nothing
 * here writes.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { type KV, Kvm } from "@nats-io/kv"
import type { NatsConnection } from "@nats-io/transport-node"
import { ALL_PROGRESS, LEASE_BUCKET } from "../../contracts/buckets.ts"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { BACKGROUND_PROJECTIONS, decodeProgress } from "../../services/platform/partitions/progress.ts"

export interface PartitionStatus {
  readonly service: string
  readonly partition: number
  readonly replica: string
  /** Every record of the partition up to this stream sequence is done with. */
  readonly seq: number
  /** The projection's own applied position. */
  readonly applied: number
  /** Records of the partition the service's work is behind, when reported. */
  readonly lag: number
  /** A projection whose lag holds back new entries (working, fade, memory), and whether it is over the limit. */
  readonly background: boolean
  readonly overLimit: boolean
  /** When the replica reported it, by its clock. */
  readonly reportedAt: number
}

export interface Status {
  readonly lastSeq: number
  /** WM_MAX_PROJECTION_LAG as set where the CLI runs (the gateways' own setting decides). */
  readonly limit: number
  readonly partitions: ReadonlyArray<PartitionStatus>
}

const openLeases = async (nc: NatsConnection): Promise<KV | null> => {
  try {
    return await new Kvm(nc).open(LEASE_BUCKET)
  } catch {
    return null
  }
}

export const readStatus = async (nc: NatsConnection, limit: number): Promise<Status> => {
  const jsm = await jetstreamManager(nc)
  const lastSeq = (await jsm.streams.info(EVENTS_STREAM)).state.last_seq
  const kv = await openLeases(nc)
  if (kv === null) return { lastSeq, limit, partitions: [] }
  const keys: string[] = []
  for await (const key of await kv.keys(ALL_PROGRESS)) keys.push(key)
  const partitions = await Promise.all(
    keys.map(async (key): Promise<PartitionStatus | null> => {
      const [service, , partitionText] = key.split(".")
      const entry = await kv.get(key)
      const progress = entry === null || entry.operation !== "PUT" ? null : decodeProgress(entry.string())
      if (service === undefined || progress === null) return null
      const partition = Number(partitionText)
      const lag = progress.lag
      const background = (BACKGROUND_PROJECTIONS as ReadonlyArray<string>).includes(service)
      return {
        service,
        partition,
        replica: progress.replica,
        seq: progress.seq,
        applied: progress.applied,
        lag,
        background,
        overLimit: background && limit > 0 && lag > limit,
        reportedAt: progress.at,
      }
    }),
  )
  return {
    lastSeq,
    limit,
    partitions: partitions
      .filter((p): p is PartitionStatus => p !== null)
      .sort((a, b) => a.service.localeCompare(b.service) || a.partition - b.partition),
  }
}

export const formatStatus = (status: Status, now = Date.now()): string => {
  const lines = [`log at sequence ${status.lastSeq}`]
  if (status.partitions.length === 0) return `${lines[0]}\nno service reports its progress (none is running)\n`
  const rows = status.partitions.map((p) => [
    p.service,
    String(p.partition),
    p.replica,
    String(p.seq),
    `${p.lag}${p.overLimit ? " (over the limit)" : ""}`,
    `${Math.max(0, (now - p.reportedAt) / 1000).toFixed(1)} s ago`,
  ])
  const header = ["service", "partition", "replica", "done to", "lag (events)", "reported"]
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd()
  lines.push(line(header), ...rows.map(line))
  const over = status.partitions.filter((p) => p.overLimit)
  lines.push(
    over.length === 0
      ? `every background projection is within ${status.limit > 0 ? `${status.limit} events (WM_MAX_PROJECTION_LAG)` : "reach: no limit is set"}`
      : `over WM_MAX_PROJECTION_LAG (${status.limit}): ${over.map((p) => `${p.service} on partition ${p.partition}`).join(", ")}; the gateways refuse those partitions' new entries with Overloaded`,
  )
  return `${lines.join("\n")}\n`
}
