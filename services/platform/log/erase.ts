/**
 * Physical erasure of forgotten content from the JetStream streams.
 *
 * A purge, or the removal of a KV revision by a newer one, only drops a
 * message from the stream's index: its bytes stay in the stream's block
 * files until the block is compacted. An erasing delete
 * (`STREAM.MSG.DELETE` with `no_erase: false`) overwrites the message in
 * place — checked on nats-server 2.9.10 and 2.12.3 by
 * test/forget-erasure.test.ts, which searches every store file. So every
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
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import type { NatsConnection } from "@nats-io/transport-node"
import { CHECKPOINT_BUCKET } from "../../../contracts/buckets.ts"
import { DEAD_LETTER_STREAM, EVENTS_STREAM } from "../../../contracts/subjects.ts"
import {
  coversSubject,
  erasedSequences,
  erasureFilter,
  type StoredRecord,
  type Tombstone,
} from "../../../domain/forget.ts"

/**
 * An erasing delete of a message already gone — erased a moment ago by the
 * eraser or another `wm forget`: "no message found", "sequence … not found"
 * (JSSequenceNotFoundErrF), or the deletion failure that wraps the latter.
 */
const SEQUENCE_NOT_FOUND = 10043
const MESSAGE_DELETE_FAILED = 10057
const ALREADY_GONE = new Set<number>([JetStreamApiCodes.NoMessageFound, SEQUENCE_NOT_FOUND, MESSAGE_DELETE_FAILED])
/** Erasing deletes sent at once. */
const PARALLEL = 32

/** Subjects and sequences of the stored messages matching `filter`, in stream order; payloads are not fetched. */
export const storedRecords = async (nc: NatsConnection, stream: string, filter: string): Promise<StoredRecord[]> => {
  const consumer = await jetstream(nc).consumers.get(stream, {
    filter_subjects: filter,
    deliver_policy: DeliverPolicy.All,
    headers_only: true,
  })
  const records: StoredRecord[] = []
  // The creation reply counts what matches; an empty filter would otherwise wait forever.
  if ((await consumer.info(true)).num_pending === 0) return records
  const messages = await consumer.consume()
  try {
    for await (const m of messages) {
      records.push({ seq: m.seq, subject: m.subject })
      if (m.info.pending === 0) break
    }
  } finally {
    await messages.close().catch(() => undefined)
  }
  return records
}

/** Erases each message (overwriting its bytes); one already gone counts as erased. Returns how many this call erased. */
export const eraseMessages = async (
  jsm: JetStreamManager,
  stream: string,
  seqs: ReadonlyArray<number>,
): Promise<number> => {
  let erased = 0
  for (let i = 0; i < seqs.length; i += PARALLEL) {
    const done = await Promise.all(
      seqs.slice(i, i + PARALLEL).map((seq) =>
        jsm.streams.deleteMessage(stream, seq, true).then(
          () => 1,
          (error: unknown) => {
            if (error instanceof JetStreamApiError && ALREADY_GONE.has(error.code)) return 0
            throw error
          },
        ),
      ),
    )
    erased += done.reduce((a, b) => a + b, 0)
  }
  return erased
}

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
 * Erases the dead letters whose record is gone from the log; with a
 * tombstone, only those of the subjects it covers are looked at.
 */
export const sweepDeadLetters = async (nc: NatsConnection, tombstone?: Tombstone): Promise<number> => {
  const jsm = await jetstreamManager(nc)
  const consumer = await jetstream(nc).consumers.get(DEAD_LETTER_STREAM, { deliver_policy: DeliverPolicy.All })
  if ((await consumer.info(true)).num_pending === 0) return 0
  const candidates: Array<{ seq: number; data: Uint8Array }> = []
  const messages = await consumer.consume()
  try {
    for await (const m of messages) {
      const origin = originOf(m.data)
      if (origin !== null && (tombstone === undefined || coversSubject(tombstone, origin.subject)))
        candidates.push({ seq: m.seq, data: m.data })
      if (m.info.pending === 0) break
    }
  } finally {
    await messages.close().catch(() => undefined)
  }
  let erased = 0
  for (const c of candidates) erased += await eraseDeadLetterIfOrphaned(jsm, c.seq, c.data)
  return erased
}

export interface Confirmations {
  /** Durable projections whose checkpoint is at or past the tombstone: their stores no longer hold the content. */
  readonly confirmed: ReadonlyArray<string>
  /** Durable projections that have not applied the tombstone yet. */
  readonly pending: ReadonlyArray<string>
}

const CHECKPOINT_PREFIX = "projection."

/**
 * A durable projection confirms a forget by moving its checkpoint past the
 * tombstone: a checkpoint says every event up to it is applied in the
 * projection's store, and applying a tombstone erases what the store held.
 * Every projection that keeps a checkpoint in `wm_checkpoints` is asked.
 */
export const confirmations = async (nc: NatsConnection, tombstoneSeq: number): Promise<Confirmations> => {
  const kv = await new Kvm(nc).open(CHECKPOINT_BUCKET).catch((error: unknown) => {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null
    throw error
  })
  const confirmed: string[] = []
  const pending: string[] = []
  if (kv === null) return { confirmed, pending }
  const keys: string[] = []
  for await (const key of await kv.keys(`${CHECKPOINT_PREFIX}>`)) keys.push(key)
  for (const key of keys.sort()) {
    const entry = await kv.get(key)
    if (entry === null || entry.operation !== "PUT") continue
    const name = key.slice(CHECKPOINT_PREFIX.length)
    if (Number(entry.string()) >= tombstoneSeq) confirmed.push(name)
    else pending.push(name)
  }
  return { confirmed, pending }
}

export interface ErasureReport {
  readonly tombstoneSeq: number
  /** Log records this run erased (zero when an earlier run erased them). */
  readonly erasedEvents: number
  readonly erasedDeadLetters: number
  readonly confirmed: ReadonlyArray<string>
  readonly pending: ReadonlyArray<string>
  /** Every projection confirmed, and neither the log nor the dead letters hold anything the tombstone covers. */
  readonly complete: boolean
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Completes a forget whose tombstone is stored: erases the log, waits (up to
 * `waitMs`) for every durable projection to confirm, then erases the dead
 * letters and checks the log again — a projection that was still catching up
 * may have dead-lettered a record, or a racing decision reached an erased
 * entry's subject, in the meantime.
 */
export const completeErasure = async (
  nc: NatsConnection,
  tombstone: Tombstone,
  tombstoneSeq: number,
  options: { readonly waitMs: number },
): Promise<ErasureReport> => {
  let erasedEvents = await eraseFromLog(nc, tombstone, tombstoneSeq)
  const deadline = Date.now() + options.waitMs
  let confirmation = await confirmations(nc, tombstoneSeq)
  while (confirmation.pending.length > 0 && Date.now() < deadline) {
    await sleep(200)
    confirmation = await confirmations(nc, tombstoneSeq)
  }
  erasedEvents += await eraseFromLog(nc, tombstone, tombstoneSeq)
  const erasedDeadLetters = await sweepDeadLetters(nc, tombstone)
  const complete = confirmation.pending.length === 0 && (await remainingInLog(nc, tombstone, tombstoneSeq)) === 0
  return { tombstoneSeq, erasedEvents, erasedDeadLetters, ...confirmation, complete }
}
