/**
 * The keys of snapshots: each snapshot's chunks are sealed under a key of its own, wrapped by the current
 * key-encryption key and kept in the key bucket (`snapshot.<service>.<partition>.<id>`) for as long as the
 * snapshot is the partition's latest. When a snapshot is replaced or dropped its key is erased in place,
 * so a copy of the snapshot bucket taken earlier (a backup) holds chunks nothing opens once the key-encryption
 * key it was wrapped under is retired (rotate-keys.ts re-wraps the live ones).
 */
import type { JetStreamManager } from "@nats-io/jetstream"
import { newKey, open, seal } from "./aead.ts"
import { type ContentKeyStore, KEY_STREAM, KeyStoreError, leaderGet } from "./key-store.ts"

export interface SnapshotKeys {
  /** A new key for a snapshot about to be written. */
  readonly make: (name: string) => Promise<Buffer>
  /** The key of a snapshot, or null when it has none (erased, or written before snapshots were sealed). */
  readonly get: (name: string) => Promise<Buffer | null>
  /** Erases the key in place (every revision): its snapshot's chunks no longer open. */
  readonly destroy: (name: string) => Promise<void>
}

export interface WrappedSnapshotKey {
  readonly kek: string
  readonly sealed: string
}

export const snapshotKeyName = (service: string, partition: number, snapshotId: string) =>
  `snapshot.${service}.${partition}.${snapshotId}`

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export const makeSnapshotKeys = (store: ContentKeyStore, jsm: JetStreamManager): SnapshotKeys => ({
  make: async (name) => {
    const key = newKey()
    const { current } = store.keks
    const wrapped: WrappedSnapshotKey = { kek: current.id, sealed: seal(current.key, key, name) }
    await store.kv.put(name, encoder.encode(JSON.stringify(wrapped)))
    return key
  },
  get: async (name) => {
    // A replica behind may not have it yet: what it says is absent is asked of the leader.
    const entry = (await store.kv.get(name)) ?? (await leaderGet(jsm, name))
    if (entry === null || entry.operation !== "PUT") return null
    const wrapped = JSON.parse(decoder.decode(entry.value)) as WrappedSnapshotKey
    const kek = store.keks.byId.get(wrapped.kek)
    if (kek === undefined)
      throw new KeyStoreError(`${name} is wrapped by key-encryption key '${wrapped.kek}', which is not held`)
    return open(kek, wrapped.sealed, name)
  },
  destroy: async (name) => {
    // The bucket keeps two revisions of a key: erase the newest, then what is left under it.
    for (let revisions = 0; revisions < 4; revisions++) {
      const entry = await leaderGet(jsm, name)
      if (entry === null || entry.operation !== "PUT") return
      await jsm.streams.deleteMessage(KEY_STREAM, entry.revision, true)
    }
  },
})
