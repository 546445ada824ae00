/**
 * The content keys of one service: the key store (key-store.ts) over the `wm_keys` bucket, what seals
 * an event before it is appended, and what opens the events it reads. Reads decode synchronously, so a
 * reader first loads the key a record needs (`load`), then decodes it with `unseal`.
 */
import { type JetStreamClient, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { type KV, Kvm } from "@nats-io/kv"
import type { NatsConnection } from "@nats-io/transport-node"
import { Clock, Context, Effect, Layer, Option, Schedule } from "effect"
import { KEY_BUCKET } from "../../../contracts/buckets.ts"
import type { Unseal } from "../../../contracts/decode.ts"
import type { MemoryEvent } from "../../../contracts/events.ts"
import {
  type ContentKeyRef,
  contentItems,
  contentKeyRefOfSubject,
  ITEM_CONTENT_MARKS,
  sealedKeysOf,
} from "../../../contracts/sealed.ts"
import { settings } from "../../../contracts/settings.ts"
import type { StoredJson } from "../../../contracts/upcasters.ts"
import { Nats } from "../nats/connection.ts"
import { NatsSettings } from "../nats/settings.ts"
import { parseKeyEncryptionKeys } from "./kek.ts"
import { ContentKeyStore } from "./key-store.ts"
import { Recent } from "./recent.ts"
import { contentKeyOf, hasItemContent, sealEvent, sealItems, unsealOrRedact, unsealWith } from "./sealing.ts"

/** Two revisions per key: a destroyed key's mark is stored before the key is erased (destroy-keys.ts). */
export const KEY_BUCKET_HISTORY = 2

/** The event concerns a forgotten entry or agent: its key is destroyed, so its content is not written. */
export class ContentForgotten extends Error {
  override readonly name = "ContentForgotten"
}

const textDecoder = new TextDecoder()
const MISSING_KEYS = 100_000
const SEALED_MARK = Buffer.from('"$sealed"')
/** A record whose items are sealed each under its own entry's key says so by its tag (contracts/sealed.ts). */
const ITEM_MARKS = ITEM_CONTENT_MARKS.map((mark) => Buffer.from(mark))
const isItemRecord = (data: Uint8Array) => {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  return ITEM_MARKS.some((mark) => bytes.indexOf(mark) >= 0)
}

const ENTRY_ID_KEY = Buffer.from('"entryId":"')
const QUOTE = 0x22

/**
 * The keys of a record's items, read off its bytes: each item names its entry as `"entryId":"<id>"`, and
 * nothing else in such a record can hold those bytes (its content is sealed, and a quote inside a string is
 * escaped). Every item's key counts, sealed or not: one more key loaded is harmless.
 */
const itemRefsOf = (bytes: Buffer, agentId: string): ReadonlyArray<ContentKeyRef> | null => {
  const refs: ContentKeyRef[] = []
  for (let at = bytes.indexOf(ENTRY_ID_KEY); at >= 0; at = bytes.indexOf(ENTRY_ID_KEY, at)) {
    const start = at + ENTRY_ID_KEY.length
    const end = bytes.indexOf(QUOTE, start)
    if (end < 0) break
    refs.push({ agentId, entryId: bytes.toString("utf8", start, end) })
    at = end
  }
  return refs.length === 0 ? null : refs
}

const refName = (ref: ContentKeyRef) => `${ref.agentId}/${ref.entryId ?? ""}`

/** What a reader of stored events needs: load a record's key, then decode it with `unseal`. */
export type ContentKeyReader = Pick<ContentKeysShape, "load" | "unseal">

export interface ContentKeysShape {
  readonly store: ContentKeyStore
  /** The event's JSON as it is stored: its content sealed (a registration starts a new agent key after a forget). */
  readonly seal: (event: MemoryEvent) => Promise<StoredJson>
  /** Opens sealed fields with keys already loaded; a destroyed key fails the decode ("forgotten"). */
  readonly unseal: Unseal
  /** For the audit: what cannot be opened reads "(forgotten)". */
  readonly unsealOrRedact: Unseal
  /** True when a stored record (on `subject`, when known) has sealed content whose key is not loaded yet. */
  readonly needsLoad: (data: Uint8Array, subject?: string) => boolean
  /**
   * The key in memory a stored record's (on `subject`, when known) sealed content opens with: null when it has
   * none sealed, undefined when its key is not in memory; a record whose items have several keys of their own
   * gives each of them, in its order, or undefined when one is not in memory.
   */
  readonly heldKeyOf: (data: Uint8Array, subject?: string) => Buffer | ReadonlyArray<Buffer> | null | undefined
  /** Loads the key a stored record (on `subject`, when known) needs, whether it exists or was destroyed. */
  readonly load: (data: Uint8Array, subject?: string) => Promise<void>
  /** Drops what is in memory of a forgotten agent's or entry's keys. */
  readonly evict: (agentId: string, entryId: string | null) => void
}

export const makeContentKeys = (store: ContentKeyStore): ContentKeysShape => {
  /** Keys looked up and found destroyed or never made (bounded: one forgotten is looked up again). */
  const missing = new Recent<true>(MISSING_KEYS)
  const keyOf = (ref: ContentKeyRef): Buffer | null | undefined =>
    store.cached(ref) ?? (missing.peek(refName(ref)) === true ? null : undefined)
  const refsOf = (data: Uint8Array, subject?: string): ReadonlyArray<ContentKeyRef> | null => {
    const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
    if (bytes.indexOf(SEALED_MARK) < 0) return null
    // Read off the subject when it is known: the record is not parsed twice (its reader parses it). A record
    // of items sealed each under its own entry's key is on its agent's step subject, and is parsed for them.
    const fromSubject = subject === undefined ? null : contentKeyRefOfSubject(subject)
    if (fromSubject !== null && fromSubject.entryId !== null) return [fromSubject]
    if (fromSubject !== null) return isItemRecord(data) ? itemRefsOf(bytes, fromSubject.agentId) : [fromSubject]
    try {
      const refs = sealedKeysOf(JSON.parse(textDecoder.decode(data)) as StoredJson)
      return refs.length === 0 ? null : refs
    } catch {
      return null
    }
  }
  const load = async (data: Uint8Array, subject?: string) => {
    const refs = refsOf(data, subject)
    if (refs === null) return
    await Promise.all(
      refs.map(async (ref) => {
        if (keyOf(ref) !== undefined) return
        const key = await store.forRead(ref)
        if (key === null) missing.set(refName(ref), true)
      }),
    )
  }
  const unseal = unsealWith(keyOf)
  /** The keys an event of items sealed each under its own entry's key is sealed with (null: the entry is forgotten). */
  const itemKeys = async (event: MemoryEvent) => {
    const refs = (contentItems(event as unknown as StoredJson) ?? []).map(({ ref }) => ref)
    const keys = new Map<string, Buffer | null>()
    await Promise.all(
      refs.map(async (ref) => {
        const key = await store.forWrite(ref, false)
        if (key !== null) missing.delete(refName(ref))
        keys.set(refName(ref), key)
      }),
    )
    return (ref: ContentKeyRef) => keys.get(refName(ref)) ?? null
  }
  return {
    store,
    seal: async (event) => {
      if (event._tag === "AgentRegistered") await store.agentKey(event.agentId, true, true)
      if (hasItemContent(event)) return sealItems(event, await itemKeys(event))
      const ref = contentKeyOf(event)
      if (ref === null) return event as unknown as StoredJson
      const key = await store.forWrite(ref, event._tag === "EntryRecorded")
      if (key === null)
        throw new ContentForgotten(
          `${ref.entryId === null ? `agent ${ref.agentId}` : `entry ${ref.entryId}`} is forgotten: its key is destroyed`,
        )
      missing.delete(refName(ref))
      return sealEvent(event, ref, key)
    },
    unseal,
    unsealOrRedact: unsealOrRedact(keyOf),
    needsLoad: (data, subject) => refsOf(data, subject)?.some((ref) => keyOf(ref) === undefined) ?? false,
    heldKeyOf: (data, subject) => {
      const refs = refsOf(data, subject)
      if (refs === null) return null
      if (refs.length === 1) return store.cached(refs[0]!)
      const keys: Buffer[] = []
      for (const ref of refs) {
        const key = store.cached(ref)
        if (key === undefined) return undefined
        keys.push(key)
      }
      return keys
    },
    load,
    evict: (agentId, entryId) => {
      store.evict(agentId, entryId)
      if (entryId !== null) missing.delete(`${agentId}/${entryId}`)
      else missing.deleteWhere((name) => name.startsWith(`${agentId}/`))
    },
  }
}

/** Opens the key bucket (made when absent) with the key-encryption keys of `WM_KEY_ENCRYPTION_KEYS`. */
export const openKeyBucket = (js: JetStreamClient, replicas: number): Promise<KV> =>
  new Kvm(js).create(KEY_BUCKET, { replicas, history: KEY_BUCKET_HISTORY, storage: "file" as never })

/** The content keys for a command-line tool: its key-encryption keys from this process's environment. */
export const openContentKeys = async (nc: NatsConnection, now: () => number): Promise<ContentKeysShape> => {
  const js = jetstream(nc)
  const existing = await new Kvm(js).open(KEY_BUCKET)
  const kv = await existing.status().then(
    () => existing,
    () => openKeyBucket(js, 1),
  )
  return makeContentKeys(
    new ContentKeyStore(
      kv,
      await jetstreamManager(nc),
      parseKeyEncryptionKeys(process.env.WM_KEY_ENCRYPTION_KEYS),
      now,
    ),
  )
}

/** Said once per process, not once per service. */
let developmentKeyWarned = false

export class ContentKeys extends Context.Service<ContentKeys, ContentKeysShape>()("wm/ContentKeys") {
  static readonly make = Effect.gen(function* () {
    const { js, jsm } = yield* Nats
    const natsSettings = yield* NatsSettings
    const configured = yield* settings.WM_KEY_ENCRYPTION_KEYS.config
    const keks = yield* Effect.try({
      try: () => parseKeyEncryptionKeys(Option.getOrUndefined(configured)),
      catch: (error) => (error instanceof Error ? error : new Error(String(error))),
    }).pipe(Effect.orDie)
    if (keks.development && !developmentKeyWarned) {
      developmentKeyWarned = true
      yield* Effect.logWarning(
        "content keys are wrapped by the development key-encryption key: set WM_KEY_ENCRYPTION_KEYS so a copy of the store cannot be read",
      )
    }
    const kv = yield* Effect.tryPromise({
      try: () => openKeyBucket(js, natsSettings.replicas),
      catch: (cause) => new Error(`cannot open KV bucket ${KEY_BUCKET}: ${String(cause)}`, { cause }),
    }).pipe(Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))), Effect.orDie)
    const clock = yield* Clock.Clock
    const cachedKeys = yield* settings.WM_KEY_CACHE_SIZE.config.pipe(Effect.orDie)
    const store = new ContentKeyStore(kv, jsm, keks, () => clock.currentTimeMillisUnsafe(), cachedKeys)
    // Warm-up replays the log: its keys are read in one pass, not one record at a time, then followed.
    yield* Effect.acquireRelease(
      Effect.tryPromise(() => store.follow()).pipe(
        Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))),
        Effect.orDie,
      ),
      () => Effect.promise(() => store.stop()),
    )
    return makeContentKeys(store)
  })

  static readonly layer = Layer.effect(ContentKeys, ContentKeys.make)
}
