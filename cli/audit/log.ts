/**
 * Reading the event log for an audit: a plain NATS connection, an ordered
 * consumer over a subject filter, and the same decoder the projections use.
 * Nothing here writes.
 */
import { DeliverPolicy, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Option } from "effect"
import { decodeEvent } from "../../contracts/decode.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import { settings } from "../../contracts/settings.ts"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { type ContentKeysShape, openContentKeys } from "../../services/platform/keys/content-keys.ts"
import { readToEnd } from "../../services/platform/log/read-to-end.ts"
import { natsSettingsFromConfig, serverList } from "../../services/platform/nats/settings.ts"
import { noProgress, type Progress } from "./progress.ts"

export interface ConnectionOptions {
  readonly servers?: string | undefined
  readonly user?: string | undefined
  readonly pass?: string | undefined
  readonly inboxPrefix?: string | undefined
}

/**
 * `--server` or NATS_URL (default nats://127.0.0.1:4222); NATS_USER / NATS_PASS; NATS_INBOX_PREFIX — read
 * with the same Effect Config as the services (services/platform/nats/settings.ts).
 */
export const openConnection = async (options: ConnectionOptions = {}): Promise<NatsConnection> => {
  const configured = await Effect.runPromise(natsSettingsFromConfig("wm-audit"))
  const inbox = await Effect.runPromise(settings.NATS_INBOX_PREFIX.config)
  const servers = options.servers !== undefined ? serverList(options.servers) : configured.servers
  const user = options.user ?? configured.user
  const pass = options.pass ?? configured.pass
  const inboxPrefix = options.inboxPrefix ?? Option.getOrUndefined(inbox)
  return connect({
    servers,
    name: "wm-audit",
    timeout: 5_000,
    reconnect: false,
    ...(user ? { user } : {}),
    ...(pass ? { pass } : {}),
    ...(inboxPrefix ? { inboxPrefix } : {}),
  })
}

export interface AuditRecord {
  readonly seq: number
  readonly subject: string
  /** null when the record does not decode (it would be dead-lettered by a projection). */
  readonly event: MemoryEvent | null
  readonly reason: string | null
}

export interface ScanOptions {
  readonly filter: string
  readonly fromSeq?: number
  /** The last stream sequence to read (default: the stream's last sequence when the scan starts). */
  readonly untilSeq?: number
  readonly progress?: Progress
}

export interface ScanResult {
  readonly records: number
  /** The stream's last sequence when the scan started. */
  readonly streamLastSeq: number
}

const openedKeys = new WeakMap<NatsConnection, Promise<ContentKeysShape>>()
/** The content keys read through this connection, opened once. */
export const contentKeysOf = (nc: NatsConnection): Promise<ContentKeysShape> => {
  let keys = openedKeys.get(nc)
  if (keys === undefined) {
    keys = openContentKeys(nc, Date.now)
    openedKeys.set(nc, keys)
  }
  return keys
}

export const manager = (nc: NatsConnection): Promise<JetStreamManager> => jetstreamManager(nc)

/**
 * Calls `onRecord` for each stored record matching `filter`, in stream order,
 * from `fromSeq` to `untilSeq`.
 */
export const scanLog = async (
  nc: NatsConnection,
  options: ScanOptions,
  onRecord: (record: AuditRecord) => void,
): Promise<ScanResult> => {
  const jsm = await manager(nc)
  const streamLastSeq = (await jsm.streams.info(EVENTS_STREAM)).state.last_seq
  const fromSeq = Math.max(1, options.fromSeq ?? 1)
  const end = Math.min(options.untilSeq ?? streamLastSeq, streamLastSeq)
  const progress = options.progress ?? noProgress
  if (end < fromSeq) return { records: 0, streamLastSeq }

  const consumer = await jetstream(nc).consumers.get(EVENTS_STREAM, {
    filter_subjects: options.filter,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: fromSeq,
  })
  // The creation reply counts what matches; an empty filter would otherwise wait forever.
  if ((await consumer.info(true)).num_pending === 0) return { records: 0, streamLastSeq }

  let records = 0
  const keys = await contentKeysOf(nc)
  try {
    for await (const m of readToEnd(consumer)) {
      if (m.seq > end) break
      // A key it cannot have (destroyed, or wrapped by a key-encryption key no longer held) is no reason
      // to stop: the audit shows what it cannot open as "(forgotten)", beside the event's metadata.
      await keys.load(m.data).catch(() => undefined)
      const decoded = decodeEvent(m.data, keys.unsealOrRedact)
      onRecord({
        seq: m.seq,
        subject: m.subject,
        event: decoded.ok ? decoded.event : null,
        reason: decoded.ok ? null : decoded.reason,
      })
      records++
      progress.update(records, m.seq, end)
      if (m.seq >= end) break
    }
  } finally {
    progress.finish()
  }
  return { records, streamLastSeq }
}

/** Subjects of the event stream matching a filter, with their message counts. */
export const subjectsMatching = async (nc: NatsConnection, filter: string): Promise<Record<string, number>> => {
  const jsm = await manager(nc)
  const info = await jsm.streams.info(EVENTS_STREAM, { subjects_filter: filter })
  return info.state.subjects ?? {}
}
