/**
 * Physical erasure of forgotten content from the JetStream streams.
 *
 * A purge, or the removal of a KV revision by a newer one, only drops a
 * message from the stream's index: its bytes stay in the stream's block
 * files until the block is compacted. An erasing delete
 * (`STREAM.MSG.DELETE` with `no_erase: false`) overwrites the message in
 * place — checked on nats-server 2.9.10 and 2.12.3 by
 * test/forget/forget-erasure.test.ts, which searches every store file. So every
 * message that carries forgotten content is found (subjects and sequences
 * only, from a headers-only consumer: the content is never read back) and
 * erased one by one.
 *
 * These functions are shared by the operator's `wm forget` and the eraser
 * service that resumes unfinished forgets; every step is idempotent (a
 * message already erased counts as erased), so both may run at once.
 */
import {
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import type { NatsConnection } from "@nats-io/transport-node"
import {
  CHECKPOINT_BUCKET,
  checkpointKey,
  LEGACY_SUBSTRATE_BUCKET,
  SNAPSHOT_BUCKET,
  substrateKey,
} from "../../../contracts/buckets.ts"
import { RETAINED_AFTER_DELETE } from "../../../contracts/longterm.ts"
import {
  DEAD_LETTER_STREAM,
  EVENTS_STREAM,
  eventSubject,
  partitionOfEventSubject,
} from "../../../contracts/subjects.ts"
import {
  coversSubject,
  erasedSequences,
  erasureFilter,
  type StoredRecord,
  type Tombstone,
} from "../../../domain/forget.ts"
import { destroyContentKeys, remainingKeys } from "../keys/destroy-keys.ts"
import { readToEnd } from "./read-to-end.ts"
import { eraseMessages, storedRecords } from "./stored-messages.ts"

export { eraseMessages, storedRecords }

/** Erases the tombstone's records from the event log; returns how many this call erased. */
export const eraseFromLog = async (nc: NatsConnection, tombstone: Tombstone, tombstoneSeq: number): Promise<number> => {
  const records = await storedRecords(nc, EVENTS_STREAM, erasureFilter(tombstone))
  return eraseMessages(await jetstreamManager(nc), EVENTS_STREAM, erasedSequences(tombstone, tombstoneSeq, records))
}

/** What is still to erase from the log for this tombstone (none once the erasure is done). */
export const remainingInLog = async (nc: NatsConnection, tombstone: Tombstone, tombstoneSeq: number): Promise<number> =>
  erasedSequences(tombstone, tombstoneSeq, await storedRecords(nc, EVENTS_STREAM, erasureFilter(tombstone))).length

/** The record a dead letter was made of: where it sat in the event log. */
interface DeadLetterOrigin {
  readonly seq: number
  readonly subject: string
}

const originOf = (data: Uint8Array): DeadLetterOrigin | null => {
  try {
    const letter = JSON.parse(new TextDecoder().decode(data)) as { seq?: unknown; subject?: unknown }
    return typeof letter.seq === "number" && typeof letter.subject === "string"
      ? { seq: letter.seq, subject: letter.subject }
      : null
  } catch {
    return null
  }
}

/**
 * Whether a dead letter's record is gone from the event log. Only a forget
 * removes records from the log, so a letter whose record is gone carries
 * forgotten content (and could not be replayed anyway).
 */
const recordErased = async (jsm: JetStreamManager, origin: DeadLetterOrigin) =>
  (await jsm.streams.getMessage(EVENTS_STREAM, { seq: origin.seq }).catch(() => undefined)) === null

/** Erases one dead letter if its record is gone from the log; returns 1 if it erased it. */
export const eraseDeadLetterIfOrphaned = async (
  jsm: JetStreamManager,
  seq: number,
  data: Uint8Array,
): Promise<number> => {
  const origin = originOf(data)
  if (origin === null || !(await recordErased(jsm, origin))) return 0
  return eraseMessages(jsm, DEAD_LETTER_STREAM, [seq])
}

/**
 * Erases each dead letter stored from now on whose record is gone from the log (a projection still
 * catching up on a forgotten record dead-letters it after the forget's sweep); `onError` hears a letter
 * that could not be checked. Stop it with `stop()`.
 */
export const guardDeadLetters = async (
  js: JetStreamClient,
  jsm: JetStreamManager,
  onError: (seq: number, error: unknown) => void,
): Promise<{ readonly stop: () => Promise<void> }> => {
  const consumer = await js.consumers.get(DEAD_LETTER_STREAM, { deliver_policy: DeliverPolicy.New })
  const messages = await consumer.consume({
    callback: (m) =>
      void eraseDeadLetterIfOrphaned(jsm, m.seq, m.data).catch((error: unknown) => onError(m.seq, error)),
  })
  return { stop: async () => void (await messages.close().catch(() => undefined)) }
}

/**
 * Erases the dead letters whose record is gone from the log; with a
 * tombstone, only those of the subjects it covers are looked at.
 */
export const sweepDeadLetters = async (nc: NatsConnection, tombstone?: Tombstone): Promise<number> => {
  const jsm = await jetstreamManager(nc)
  const consumer = await jetstream(nc).consumers.get(DEAD_LETTER_STREAM, { deliver_policy: DeliverPolicy.All })
  if ((await consumer.info(true)).num_pending === 0) return 0
  const candidates: Array<{ seq: number; data: Uint8Array }> = []
  for await (const m of readToEnd(consumer)) {
    const origin = originOf(m.data)
    if (origin !== null && (tombstone === undefined || coversSubject(tombstone, origin.subject)))
      candidates.push({ seq: m.seq, data: m.data })
  }
  let erased = 0
  for (const c of candidates) erased += await eraseDeadLetterIfOrphaned(jsm, c.seq, c.data)
  return erased
}

/**
 * The stream of the `wm_substrate` bucket, where versions before the
 * substrate read the log kept a copy of every entry's raw text. It is no
 * longer written; a deployment upgraded from such a version may still have
 * it, so every forget erases the forgotten records from it while it exists.
 */
const LEGACY_SUBSTRATE_STREAM = `KV_${LEGACY_SUBSTRATE_BUCKET}`

const legacySubstrateFilter = (tombstone: Tombstone) =>
  tombstone._tag === "EntryForgotten"
    ? `$KV.${LEGACY_SUBSTRATE_BUCKET}.${substrateKey(tombstone.agentId, tombstone.entryId)}`
    : `$KV.${LEGACY_SUBSTRATE_BUCKET}.${tombstone.agentId}.>`

/** The stored records of the tombstone in the legacy substrate bucket; none when the bucket does not exist (it is never created). */
const legacySubstrateRecords = async (nc: NatsConnection, tombstone: Tombstone): Promise<StoredRecord[]> => {
  const jsm = await jetstreamManager(nc)
  const exists = await jsm.streams.info(LEGACY_SUBSTRATE_STREAM).then(
    () => true,
    (error: unknown) => {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return false
      throw error
    },
  )
  return exists ? storedRecords(nc, LEGACY_SUBSTRATE_STREAM, legacySubstrateFilter(tombstone)) : []
}

/** Erases every revision of the forgotten keys from the legacy `wm_substrate` bucket, if it exists; returns how many this call erased. */
export const eraseFromLegacySubstrate = async (nc: NatsConnection, tombstone: Tombstone): Promise<number> => {
  const records = await legacySubstrateRecords(nc, tombstone)
  if (records.length === 0) return 0
  return eraseMessages(
    await jetstreamManager(nc),
    LEGACY_SUBSTRATE_STREAM,
    records.map((r) => r.seq),
  )
}

export interface Confirmations {
  /** Durable projections whose checkpoint is at or past the tombstone, and snapshots that cannot hold the content. */
  readonly confirmed: string[]
  /** Durable projections that have not applied the tombstone yet, and snapshots taken before it (`snapshot <key>`). */
  readonly pending: string[]
}

const CHECKPOINT_PREFIX = "projection."
/**
 * Checkpoints of projections that no longer exist, left in the bucket of an
 * upgraded deployment: they never move again, so no forget waits for them.
 * The substrate kept one while it copied the log into `wm_substrate`; it now
 * reads the log, and every forget erases that bucket itself.
 */
const RETIRED_CHECKPOINTS = new Set<string>([checkpointKey("substrate")])

const openIfExists = (nc: NatsConnection, bucket: string) =>
  new Kvm(nc).open(bucket).catch((error: unknown) => {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null
    throw error
  })

/** A checkpoint of one partition's projection: `projection.<name>.p<partition>`. */
const PARTITION_CHECKPOINT = /^(.*)\.p(\d+)$/

/**
 * Durable projections' checkpoints: each confirms once it is at or past the tombstone. A projection
 * checkpointed per partition is asked for the tombstone's partition only (the others never see it), and
 * its whole-log checkpoint from before partitions no longer moves.
 */
const checkpointConfirmations = async (
  nc: NatsConnection,
  tombstone: Tombstone,
  tombstoneSeq: number,
  into: Confirmations,
) => {
  const kv = await openIfExists(nc, CHECKPOINT_BUCKET)
  if (kv === null) return
  const keys: string[] = []
  for await (const key of await kv.keys(`${CHECKPOINT_PREFIX}>`)) keys.push(key)
  const partition = partitionOfEventSubject(eventSubject(tombstone))
  const partitioned = new Set(keys.flatMap((key) => PARTITION_CHECKPOINT.exec(key)?.[1] ?? []))
  for (const key of keys.sort()) {
    if (RETIRED_CHECKPOINTS.has(key) || partitioned.has(key)) continue
    const ofPartition = PARTITION_CHECKPOINT.exec(key)
    if (ofPartition !== null && Number(ofPartition[2]) !== partition) continue
    const entry = await kv.get(key)
    if (entry === null || entry.operation !== "PUT") continue
    const name = key.slice(CHECKPOINT_PREFIX.length)
    ;(Number(entry.string()) >= tombstoneSeq ? into.confirmed : into.pending).push(name)
  }
}

/**
 * The partition snapshots of the tombstone's partition (`<service>.<p>`
 * manifests): one taken before the tombstone may hold the forgotten content
 * until the replica owning the partition applies the tombstone and erases
 * it; one at or past the tombstone was rebuilt from the erased log.
 */
const snapshotConfirmations = async (
  nc: NatsConnection,
  tombstone: Tombstone,
  tombstoneSeq: number,
  into: Confirmations,
) => {
  const partition = partitionOfEventSubject(eventSubject(tombstone))
  const kv = partition === null ? null : await openIfExists(nc, SNAPSHOT_BUCKET)
  if (kv === null) return
  const keys: string[] = []
  for await (const key of await kv.keys(`*.${partition}`)) keys.push(key)
  for (const key of keys.sort()) {
    const entry = await kv.get(key)
    if (entry === null || entry.operation !== "PUT" || entry.value.length === 0) continue
    let seq = 0
    try {
      seq = Number((entry.json() as { seq?: unknown }).seq) || 0
    } catch {
      // A manifest that does not decode is still a stored snapshot: it waits like one taken before the tombstone.
    }
    ;(seq >= tombstoneSeq ? into.confirmed : into.pending).push(`snapshot ${key}`)
  }
}

/**
 * What confirms a forget: a durable projection by moving its checkpoint
 * past the tombstone (a checkpoint says every event up to it is applied in
 * the projection's store, and applying a tombstone erases what the store
 * held) — every projection that keeps a checkpoint in `wm_checkpoints` is
 * asked — and a partition snapshot of the tombstone's partition by being
 * erased, or taken after the tombstone.
 */
export const confirmations = async (
  nc: NatsConnection,
  tombstone: Tombstone,
  tombstoneSeq: number,
): Promise<Confirmations> => {
  const result = { confirmed: [] as string[], pending: [] as string[] }
  await checkpointConfirmations(nc, tombstone, tombstoneSeq, result)
  await snapshotConfirmations(nc, tombstone, tombstoneSeq, result)
  return result
}

/** What the stores behind these projections still keep below their APIs after the forget, one line each. */
export const retainedBelowApi = (projections: ReadonlyArray<string>): string[] => {
  const lines = new Set<string>()
  for (const name of projections) {
    const retained = RETAINED_AFTER_DELETE.find(({ projectionPrefix }) => name.startsWith(projectionPrefix))
    if (retained !== undefined) lines.add(`${name.replace(/\.p\d+$/, "")}: ${retained.keeps}`)
  }
  return [...lines]
}

export interface ErasureReport {
  readonly tombstoneSeq: number
  /** Stored key revisions this run erased: the forgotten content keys, destroyed first. */
  readonly erasedKeys: number
  /** Log records this run erased (zero when an earlier run erased them). */
  readonly erasedEvents: number
  readonly erasedDeadLetters: number
  /** Records this run erased from the legacy `wm_substrate` bucket of an upgraded deployment (zero without it). */
  readonly erasedSubstrateRecords: number
  readonly confirmed: ReadonlyArray<string>
  readonly pending: ReadonlyArray<string>
  /** Every projection confirmed, the content keys destroyed, and neither the log, the dead letters nor a legacy substrate bucket hold anything the tombstone covers. */
  readonly complete: boolean
  /** What a store still keeps below its API (Qdrant's soft deletes), one line per store; empty when nothing. */
  readonly retained: ReadonlyArray<string>
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Completes a forget whose tombstone is stored: destroys the forgotten
 * content keys first (keys/destroy-keys.ts: every copy of the content,
 * a backup's included, is unreadable from then on), erases the log, waits (up to
 * `waitMs`) for every durable projection to confirm, then erases the dead
 * letters and the legacy substrate bucket (if any), and checks the log
 * again — a projection that was still catching up may have dead-lettered a
 * record, or a racing decision reached an erased entry's subject, in the
 * meantime; a substrate replica of the version before may still have been
 * copying the log into its bucket.
 */
export const completeErasure = async (
  nc: NatsConnection,
  tombstone: Tombstone,
  tombstoneSeq: number,
  options: { readonly waitMs: number },
): Promise<ErasureReport> => {
  const erasedKeys = await destroyContentKeys(nc, tombstone)
  let erasedEvents = await eraseFromLog(nc, tombstone, tombstoneSeq)
  // The wait is of real time, paced by real timers, and this also runs outside any Effect (`wm forget`):
  // measured on the monotonic timer.
  const deadline = performance.now() + options.waitMs
  let confirmation = await confirmations(nc, tombstone, tombstoneSeq)
  while (confirmation.pending.length > 0 && performance.now() < deadline) {
    await sleep(200)
    confirmation = await confirmations(nc, tombstone, tombstoneSeq)
  }
  erasedEvents += await eraseFromLog(nc, tombstone, tombstoneSeq)
  const erasedDeadLetters = await sweepDeadLetters(nc, tombstone)
  const erasedSubstrateRecords = await eraseFromLegacySubstrate(nc, tombstone)
  const complete =
    confirmation.pending.length === 0 &&
    (await remainingKeys(nc, tombstone)) === 0 &&
    (await remainingInLog(nc, tombstone, tombstoneSeq)) === 0 &&
    (await legacySubstrateRecords(nc, tombstone)).length === 0
  const retained = retainedBelowApi([...confirmation.confirmed, ...confirmation.pending])
  return {
    tombstoneSeq,
    erasedKeys,
    erasedEvents,
    erasedDeadLetters,
    erasedSubstrateRecords,
    ...confirmation,
    complete,
    retained,
  }
}
