/**
 * Key rotation: every live agent key is replaced by a new one, wrapped by the current key-encryption
 * key, and every live entry key of the agent is re-wrapped under it; then every older revision is
 * erased in place. A copy of the key store taken before (a backup, a Raft log not yet compacted) then
 * holds only agent keys wrapped by the retired key-encryption keys and entry keys wrapped by agent keys
 * no longer kept anywhere: once the retired key-encryption keys are removed from
 * WM_KEY_ENCRYPTION_KEYS, nothing in such a copy opens, a forgotten entry's content included.
 *
 * During an agent's rotation its record lists both generations (newest first), so readers and writers
 * go on; entry keys are re-wrapped one by one, each with a compare-and-set on its revision.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { agentEntryKeys, KEY_BUCKET } from "../../../contracts/buckets.ts"
import { eraseMessages, storedRecords } from "../log/stored-messages.ts"
import { newKey, open, seal } from "./aead.ts"
import {
  type AgentKeyRecord,
  type ContentKeyStore,
  type EntryKeyRecord,
  KEY_STREAM,
  leaderGet,
  newGenerationId,
  wrapLabel,
} from "./key-store.ts"
import type { WrappedSnapshotKey } from "./snapshot-keys.ts"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export interface Rotation {
  readonly agents: number
  readonly entryKeys: number
  readonly snapshotKeys: number
  /** Older revisions of keys erased in place. */
  readonly erased: number
}

/** Rotates every live agent key (and re-wraps its entry keys) under the store's current key-encryption key. */
export const rotateKeys = async (nc: NatsConnection, store: ContentKeyStore): Promise<Rotation> => {
  const { kv, keks } = store
  const agents: string[] = []
  for await (const name of await kv.keys("agent.*")) agents.push(name)
  let rotatedAgents = 0
  let entryKeys = 0
  for (const name of agents) {
    const agentId = name.slice("agent.".length)
    const entry = await leaderGet(store.jsm, name)
    if (entry === null || entry.operation !== "PUT") continue
    const record = JSON.parse(decoder.decode(entry.value)) as AgentKeyRecord
    if (!("generations" in record)) continue
    const gen = newGenerationId()
    const key = newKey()
    const fresh = { gen, kek: keks.current.id, sealed: seal(keks.current.key, key, wrapLabel(name, gen)) }
    // Both generations while the entry keys move; writers wrap new entry keys under the newest.
    const both: AgentKeyRecord = { created: record.created, generations: [fresh, ...record.generations] }
    const bothRevision = await kv.update(name, encoder.encode(JSON.stringify(both)), entry.revision)
    // A writer that read the record before it listed both generations may have wrapped a new entry key
    // under the old one a moment later: passes go on until one finds nothing left under an old generation.
    for (let moved = -1; moved !== 0; ) {
      moved = 0
      const entryNames: string[] = []
      for await (const e of await kv.keys(`${agentEntryKeys(agentId).slice(0, -1)}*`)) entryNames.push(e)
      for (const entryName of entryNames) {
        for (;;) {
          const stored = await leaderGet(store.jsm, entryName)
          if (stored === null || stored.operation !== "PUT") break
          const entryRecord = JSON.parse(decoder.decode(stored.value)) as EntryKeyRecord
          if (!("sealed" in entryRecord) || entryRecord.gen === gen) break
          const generation = record.generations.find((g) => g.gen === entryRecord.gen)
          if (generation === undefined) break
          const agentKey = store.unwrapAgentGeneration(agentId, generation)
          const dataKey = open(agentKey, entryRecord.sealed, wrapLabel(entryName, entryRecord.gen))
          if (dataKey === null) throw new Error(`the key of agent ${agentId} does not open ${entryName}`)
          const rewrapped: EntryKeyRecord = {
            created: entryRecord.created,
            gen,
            sealed: seal(key, dataKey, wrapLabel(entryName, gen)),
          }
          try {
            await kv.update(entryName, encoder.encode(JSON.stringify(rewrapped)), stored.revision)
            entryKeys++
            moved++
            break
          } catch (error) {
            if (!/wrong last sequence/i.test(String(error))) throw error
          }
        }
      }
    }
    const only: AgentKeyRecord = { created: record.created, generations: [fresh] }
    await kv.update(name, encoder.encode(JSON.stringify(only)), bothRevision)
    store.evict(agentId, null)
    rotatedAgents++
  }
  // Snapshot keys are wrapped by the key-encryption key itself: wrapped again under the current one.
  let snapshotKeys = 0
  const snapshots: string[] = []
  for await (const name of await kv.keys("snapshot.>")) snapshots.push(name)
  for (const name of snapshots) {
    const entry = await leaderGet(store.jsm, name)
    if (entry === null || entry.operation !== "PUT") continue
    const wrapped = JSON.parse(decoder.decode(entry.value)) as WrappedSnapshotKey
    if (wrapped.kek === keks.current.id) continue
    const kek = keks.byId.get(wrapped.kek)
    const key = kek === undefined ? null : open(kek, wrapped.sealed, name)
    if (key === null) throw new Error(`${name}: key-encryption key '${wrapped.kek}' is not held or does not open it`)
    const rewrapped: WrappedSnapshotKey = { kek: keks.current.id, sealed: seal(keks.current.key, key, name) }
    // A snapshot replaced meanwhile has had its key erased: nothing to wrap again.
    await kv.update(name, encoder.encode(JSON.stringify(rewrapped)), entry.revision).then(
      () => snapshotKeys++,
      () => undefined,
    )
  }
  // Every revision but each key's newest: the old generations, the old wrappings, marks replaced.
  const all = await storedRecords(nc, KEY_STREAM, `$KV.${KEY_BUCKET}.>`)
  const newest = new Map<string, number>()
  for (const r of all) newest.set(r.subject, r.seq)
  const older = all.filter((r) => newest.get(r.subject) !== r.seq).map((r) => r.seq)
  const erased = older.length === 0 ? 0 : await eraseMessages(await jetstreamManager(nc), KEY_STREAM, older)
  return { agents: rotatedAgents, entryKeys, snapshotKeys, erased }
}
