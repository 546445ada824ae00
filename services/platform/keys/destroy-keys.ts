/**
 * Destroying content keys, the first step of every forget: an entry's forget destroys the entry's key,
 * an agent's forget the agent's key and every entry key of the agent. A destroyed key's mark
 * ({ destroyed }) is stored first — from then on no write seals under it — and then every stored
 * revision of the key is erased in place, so no file of the store keeps it. Keys made after the
 * tombstone (a new registration, a new recording of the entry) are left alone, so a forget resumed
 * late does not destroy them. Nothing here needs a key-encryption key.
 */
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream"
import { type KV, Kvm } from "@nats-io/kv"
import type { NatsConnection } from "@nats-io/transport-node"
import { agentEntryKeys, agentKeyName, entryKeyName, KEY_BUCKET } from "../../../contracts/buckets.ts"
import type { Tombstone } from "../../../domain/forget.ts"
import { eraseMessages, storedRecords } from "../log/stored-messages.ts"
import { KEY_STREAM, leaderGet } from "./key-store.ts"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

const openKeys = async (nc: NatsConnection): Promise<KV | null> => {
  const jsm = await jetstreamManager(nc)
  const exists = await jsm.streams.info(KEY_STREAM).then(
    () => true,
    () => false,
  )
  return exists ? new Kvm(nc).open(KEY_BUCKET) : null
}

/** Marks the key destroyed unless it was made after `before`; true when it is (now or already) destroyed. */
const markDestroyed = async (
  kv: KV,
  jsm: JetStreamManager,
  name: string,
  before: number,
  at: number,
): Promise<boolean> => {
  for (;;) {
    const entry = await leaderGet(jsm, name)
    if (entry === null || entry.operation !== "PUT") return true
    const record = JSON.parse(decoder.decode(entry.value)) as { destroyed?: number; created?: number }
    if (record.destroyed !== undefined) return true
    if ((record.created ?? 0) > before) return false
    try {
      await kv.update(name, encoder.encode(JSON.stringify({ destroyed: at })), entry.revision)
      return true
    } catch (error) {
      if (!/wrong last sequence/i.test(String(error))) throw error
    }
  }
}

/** Erases every stored revision of `name` but the newest (its mark). */
const eraseOlderRevisions = async (nc: NatsConnection, name: string): Promise<number> => {
  const records = await storedRecords(nc, KEY_STREAM, `$KV.${KEY_BUCKET}.${name}`)
  const older = records.slice(0, -1).map((r) => r.seq)
  return older.length === 0 ? 0 : eraseMessages(await jetstreamManager(nc), KEY_STREAM, older)
}

/** Destroys the keys the tombstone forgets; returns how many stored key revisions this call erased. */
export const destroyContentKeys = async (nc: NatsConnection, tombstone: Tombstone): Promise<number> => {
  const kv = await openKeys(nc)
  if (kv === null) return 0
  const before = tombstone.at
  if (tombstone._tag === "EntryForgotten") {
    const name = entryKeyName(tombstone.agentId, tombstone.entryId)
    return (await markDestroyed(kv, await jetstreamManager(nc), name, before, tombstone.at))
      ? eraseOlderRevisions(nc, name)
      : 0
  }
  const name = agentKeyName(tombstone.agentId)
  if (!(await markDestroyed(kv, await jetstreamManager(nc), name, before, tombstone.at))) return 0
  let erased = await eraseOlderRevisions(nc, name)
  // The agent's mark refuses every write for its entries; their keys go whole.
  const entryKeys = await storedRecords(nc, KEY_STREAM, `$KV.${KEY_BUCKET}.${agentEntryKeys(tombstone.agentId)}`)
  erased += await eraseMessages(
    await jetstreamManager(nc),
    KEY_STREAM,
    entryKeys.map((r) => r.seq),
  )
  return erased
}

/** Key revisions the tombstone still has to erase (none once its keys are destroyed, or made anew after it). */
export const remainingKeys = async (nc: NatsConnection, tombstone: Tombstone): Promise<number> => {
  const kv = await openKeys(nc)
  if (kv === null) return 0
  const name =
    tombstone._tag === "EntryForgotten"
      ? entryKeyName(tombstone.agentId, tombstone.entryId)
      : agentKeyName(tombstone.agentId)
  const entry = await leaderGet(await jetstreamManager(nc), name)
  const record =
    entry !== null && entry.operation === "PUT"
      ? (JSON.parse(decoder.decode(entry.value)) as { destroyed?: number; created?: number })
      : null
  if (record !== null && record.destroyed === undefined && (record.created ?? 0) > tombstone.at) return 0
  const revisions = await storedRecords(nc, KEY_STREAM, `$KV.${KEY_BUCKET}.${name}`)
  const live = record !== null && record.destroyed === undefined ? 1 : 0
  const stale = Math.max(0, revisions.length - 1) + live
  if (tombstone._tag === "EntryForgotten") return stale
  return stale + (await storedRecords(nc, KEY_STREAM, `$KV.${KEY_BUCKET}.${agentEntryKeys(tombstone.agentId)}`)).length
}
