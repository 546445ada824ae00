/**
 * `wm migrate`: rewrites a log of the layout before partitions
 * (`wm.evt.<agent>.…`) into today's (`wm.evt.<p>.<agent>.…`, see
 * contracts/subjects.ts), or one written with another WM_PARTITIONS or
 * WM_PARTITION_PINS into this environment's placement (each record in its
 * agent's partition by `partitionOf` now), with every service stopped:
 *
 *   1. copies every record of WM_EVENTS, in order, into WM_EVENTS_MIGRATION
 *      (its subject in a header), then a marker holding the count;
 *   2. deletes WM_EVENTS and creates it again with the same configuration;
 *   3. appends every copied record in order, subjects of another layout rewritten;
 *   4. deletes the copy, and the state that holds positions in the old
 *      stream: projection checkpoints, snapshots and the request ledger
 *      (the projections rebuild from the new log; a request retried across a
 *      migration is answered anew).
 *
 * A log written before content was sealed is migrated too: in step 3 each
 * event's content is sealed under its entry's key (contracts/sealed.ts),
 * as the services seal what they append now; the old stream and the copy
 * are deleted whole at the end.
 *
 * Interrupted in step 1, a rerun starts over (WM_EVENTS is untouched); in
 * steps 2–4, a rerun finds the complete copy and resumes from step 2. The
 * events keep their bytes but for the content sealed; subjects and
 * sequences change.
 */
import {
  DeliverPolicy,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  type StreamConfig,
} from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { headers, type NatsConnection } from "@nats-io/transport-node"
import { CHECKPOINT_BUCKET, REQUEST_BUCKET, SNAPSHOT_BUCKET } from "../../contracts/buckets.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import { isSealed, mapContent } from "../../contracts/sealed.ts"
import { ALL_EVENTS, EVENTS_STREAM, relocatedSubject } from "../../contracts/subjects.ts"
import type { StoredJson } from "../../contracts/upcasters.ts"
import { readToEnd } from "../../services/platform/log/read-to-end.ts"
import { contentKeysOf } from "./log.ts"

export const MIGRATION_STREAM = "WM_EVENTS_MIGRATION"
const COPY_ROOT = "wm.migrate"
const COPY_RECORD = `${COPY_ROOT}.record`
const COPY_DONE = `${COPY_ROOT}.done`
const SUBJECT_HEADER = "Wm-Subject"

export interface Migrated {
  readonly records: number
  readonly upgraded: number
  /** Records whose content was in clear and is sealed now. */
  readonly sealed: number
  /** True when every record was of this deployment's layout already (nothing was changed). */
  readonly alreadyCurrent: boolean
}

const streamExists = (jsm: JetStreamManager, name: string) =>
  jsm.streams.info(name).then(
    () => true,
    () => false,
  )

/** Every record of a stream from the start, in order. */
const readAll = async (
  nc: NatsConnection,
  stream: string,
  filter: string,
  onRecord: (m: { subject: string; data: Uint8Array; header: (name: string) => string }) => Promise<void>,
) => {
  const jsm = await jetstreamManager(nc)
  const last = (await jsm.streams.info(stream)).state.last_seq
  if (last === 0) return
  const consumer = await jetstream(nc).consumers.get(stream, {
    filter_subjects: filter,
    deliver_policy: DeliverPolicy.All,
  })
  for await (const m of readToEnd(consumer)) {
    await onRecord({ subject: m.subject, data: m.data, header: (name) => m.headers?.get(name) ?? "" })
    if (m.seq >= last) break
  }
}

/** The event, when it carries content in clear (written before sealing); null otherwise. */
const inClear = (data: Uint8Array): StoredJson | null => {
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder().decode(data))
  } catch {
    return null
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return null
  let clear = false
  mapContent(json as StoredJson, (value) => {
    if (!isSealed(value)) clear = true
    return { value }
  })
  return clear ? (json as StoredJson) : null
}

const copyComplete = async (jsm: JetStreamManager): Promise<number | null> => {
  const marker = await jsm.streams.getMessage(MIGRATION_STREAM, { last_by_subj: COPY_DONE }).catch(() => null)
  return marker === null ? null : Number(new TextDecoder().decode(marker.data))
}

export const migrateLog = async (nc: NatsConnection): Promise<Migrated> => {
  const jsm = await jetstreamManager(nc)
  const js = jetstream(nc)
  let copied = (await streamExists(jsm, MIGRATION_STREAM)) ? await copyComplete(jsm) : null
  if (copied === null) {
    if (await streamExists(jsm, MIGRATION_STREAM)) await jsm.streams.delete(MIGRATION_STREAM)
    let misplaced = 0
    await readAll(nc, EVENTS_STREAM, ALL_EVENTS, async (m) => {
      if (relocatedSubject(m.subject) !== null || inClear(m.data) !== null) misplaced++
    })
    if (misplaced === 0) return { records: 0, upgraded: 0, sealed: 0, alreadyCurrent: true }
    const events = await jsm.streams.info(EVENTS_STREAM)
    await jsm.streams.add({
      name: MIGRATION_STREAM,
      subjects: [`${COPY_ROOT}.>`],
      storage: events.config.storage,
      num_replicas: events.config.num_replicas,
      // The stream's configuration travels with the copy, so step 2 can recreate it after a crash.
      description: JSON.stringify(events.config),
    })
    let count = 0
    await readAll(nc, EVENTS_STREAM, ALL_EVENTS, async (m) => {
      const h = headers()
      h.set(SUBJECT_HEADER, m.subject)
      await js.publish(COPY_RECORD, m.data, { headers: h })
      count++
    })
    await js.publish(COPY_DONE, String(count))
    copied = count
  }

  const copy = await jsm.streams.info(MIGRATION_STREAM)
  const config = JSON.parse(copy.config.description ?? "{}") as StreamConfig
  if (await streamExists(jsm, EVENTS_STREAM)) await jsm.streams.delete(EVENTS_STREAM)
  await jsm.streams.add({ ...config, name: EVENTS_STREAM })
  let records = 0
  let upgraded = 0
  let sealed = 0
  const keys = await contentKeysOf(nc)
  await readAll(nc, MIGRATION_STREAM, COPY_RECORD, async (m) => {
    const old = m.header(SUBJECT_HEADER)
    const subject = relocatedSubject(old)
    if (subject !== null) upgraded++
    const clear = inClear(m.data)
    if (clear !== null) sealed++
    await js.publish(subject ?? old, clear === null ? m.data : JSON.stringify(await keys.seal(clear as MemoryEvent)))
    records++
  })
  if (records !== copied) throw new Error(`copied ${copied} records but appended ${records}: run wm migrate again`)

  const kvm = new Kvm(nc)
  for (const bucket of [CHECKPOINT_BUCKET, SNAPSHOT_BUCKET, REQUEST_BUCKET])
    if (await streamExists(jsm, `KV_${bucket}`)) await kvm.open(bucket).then((kv) => kv.destroy())
  await jsm.streams.delete(MIGRATION_STREAM)
  return { records, upgraded, sealed, alreadyCurrent: false }
}
