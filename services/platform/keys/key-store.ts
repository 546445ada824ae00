/**
 * The key store: each agent's key, wrapped by a key-encryption key (kek.ts), and each entry's key,
 * wrapped by its agent's key, in the `wm_keys` bucket. An entry's content is sealed with the entry's
 * key and an agent's focus with a key derived from the agent's, so destroying an entry's key makes
 * that entry's content unreadable wherever a copy of it lies, and destroying an agent's key all of
 * the agent's (destroy-keys.ts).
 *
 * An agent's record lists the generations of its key, newest first: one, or two while a rotation
 * (rotate-keys.ts) re-wraps the agent's entry keys under a new one. An entry's record names the
 * generation that wraps it. A destroyed key leaves a mark in its place ({ destroyed }): a write for
 * a forgotten entry is refused rather than sealed under a new key; only a new registration of the
 * agent, or a new recording of the entry, starts a new key.
 *
 * Unwrapped keys are kept in memory (bounded); a key store that cannot be read is an error, never
 * plaintext. A service follows the bucket (key-watch.ts): the keys other processes make reach it
 * without a read each, and a new entry's key is wrapped under the agent's key as the watch last saw
 * it, then confirmed unchanged once the watch has read past the entry key's own write — no read of
 * the agent's key from the stream's leader per recorded entry.
 */
import { hkdfSync } from "node:crypto"
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream"
import type { KV } from "@nats-io/kv"
import { agentKeyName, entryKeyName, KEY_BUCKET } from "../../../contracts/buckets.ts"
import type { ContentKeyRef } from "../../../contracts/sealed.ts"
import { newKey, open, seal } from "./aead.ts"
import type { KeyEncryptionKeys } from "./kek.ts"
import { KeyWatch } from "./key-watch.ts"
import { Recent } from "./recent.ts"

export interface AgentKeyGeneration {
  readonly gen: string
  readonly kek: string
  readonly sealed: string
}
export type AgentKeyRecord =
  | { readonly created: number; readonly generations: ReadonlyArray<AgentKeyGeneration> }
  | { readonly destroyed: number }
export type EntryKeyRecord =
  | { readonly created: number; readonly gen: string; readonly sealed: string }
  | { readonly destroyed: number }

/** The key store could not be read, or holds a key no configured key-encryption key opens. */
export class KeyStoreError extends Error {
  override readonly name = "KeyStoreError"
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()
/**
 * Unwrapped keys a process keeps when not told (WM_KEY_CACHE_SIZE). A key that drops out is asked of the key
 * store again (a round trip, a parse and an unwrap) the next time a recall or a read needs it: kept at 100k, a
 * fleet of 100 agents with a thousand long-term entries each stepped at about half the rate (BENCHMARKS.md).
 */
export const DEFAULT_CACHED_KEYS = 400_000
/** The stream behind the key bucket. */
export const KEY_STREAM = `KV_${KEY_BUCKET}`

const parse = <T>(value: Uint8Array): T => JSON.parse(decoder.decode(value)) as T
/** The authenticated data a key is wrapped with: its name and the generation that wraps it. */
export const wrapLabel = (name: string, gen: string) => `${name}#${gen}`
/** A new generation of an agent's key: 12 hex digits. */
export const newGenerationId = () => newKey().subarray(0, 6).toString("hex")

/** A key's newest revision from the key stream's leader (a direct get may come from a replica behind). */
export const leaderGet = async (
  jsm: JetStreamManager,
  name: string,
): Promise<{ readonly value: Uint8Array; readonly revision: number; readonly operation: "PUT" | "DEL" } | null> => {
  const stored = await jsm.streams
    .getMessage(KEY_STREAM, { last_by_subj: `$KV.${KEY_BUCKET}.${name}` })
    .catch((error: unknown) => {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.NoMessageFound) return null
      throw error
    })
  if (stored === null) return null
  const operation = stored.header?.get("KV-Operation")
  return {
    value: stored.data,
    revision: stored.seq,
    operation: operation === "DEL" || operation === "PURGE" ? "DEL" : "PUT",
  }
}

/** One watch of the bucket for the services of a process, stopped when the last of them stops. */
interface SharedWatch {
  readonly watch: KeyWatch
  readonly started: Promise<number>
  users: number
}
interface ProcessCaches {
  readonly agentKeys: Recent<Buffer>
  readonly dataKeys: Recent<Buffer>
  watch?: SharedWatch | undefined
}
const processCaches = new Map<string, ProcessCaches>()
const sharedCaches = (namespace: string, size: number): ProcessCaches => {
  let caches = processCaches.get(namespace)
  if (caches === undefined) {
    caches = { agentKeys: new Recent<Buffer>(size), dataKeys: new Recent<Buffer>(size) }
    processCaches.set(namespace, caches)
  }
  return caches
}

const DESTROYED = "destroyed"

interface Read<R> {
  readonly record: R | null
  readonly revision: number
}

/** An agent's newest key, at the revision of its record it was read from. */
interface AgentKey {
  readonly gen: string
  readonly key: Buffer
  readonly revision: number
}

/** An entry's data key wrapped under a generation of its agent's key, as the bucket stores it. */
const wrappedEntryKey = (
  name: string,
  agent: Pick<AgentKey, "gen" | "key">,
  key: Buffer,
  created: number,
): EntryKeyRecord => ({ created, gen: agent.gen, sealed: seal(agent.key, key, wrapLabel(name, agent.gen)) })

/** How long a write waits for the watch to read past it before asking the leader instead. */
const CONFIRM_WAIT_MS = 1_000

/** Who seals with which key: an entry's content with the entry's key, an agent's focus with a key derived from the agent's. */
const cacheName = (ref: ContentKeyRef) =>
  ref.entryId === null ? `focus.${ref.agentId}` : entryKeyName(ref.agentId, ref.entryId)

export class ContentKeyStore {
  /** Unwrapped agent keys by agent and generation. */
  private agentKeys: Recent<Buffer>
  /** Unwrapped data keys (entries' and focus keys) by their cache name. */
  private dataKeys: Recent<Buffer>
  /** The data keys' cache was replaced by the process's shared one this many times. */
  private cacheSwaps = 0
  private readonly loading = new Map<string, Promise<Buffer | null>>()

  readonly kv: KV
  readonly keks: KeyEncryptionKeys
  readonly jsm: JetStreamManager
  private readonly now: () => number

  /** How many unwrapped keys of each kind are kept (the first store of a process to follow the bucket sets it for all). */
  private readonly cachedKeys: number

  constructor(
    kv: KV,
    jsm: JetStreamManager,
    keks: KeyEncryptionKeys,
    now: () => number,
    cachedKeys: number = DEFAULT_CACHED_KEYS,
  ) {
    this.kv = kv
    this.jsm = jsm
    this.keks = keks
    this.now = now
    this.cachedKeys = cachedKeys
    this.agentKeys = new Recent<Buffer>(cachedKeys)
    this.dataKeys = new Recent<Buffer>(cachedKeys)
  }

  /** The bucket as this service follows it; none for a command-line tool, which asks the store. */
  private watch: KeyWatch | undefined
  private stopWatch: () => Promise<void> = async () => undefined

  /**
   * Reads every key of the bucket in one pass (the newest revision of each), so replaying a log does not
   * ask for its keys one record at a time, and then follows the keys made, rotated and destroyed.
   * Returns how many keys the first pass read.
   */
  async follow(own?: KeyWatch): Promise<number> {
    // The services of one process share what they unwrapped of one key store (one bucket, the same
    // key-encryption keys): a key one of them made or loaded is not asked for again by the others. They
    // share one watch too, so each key made reaches the process once.
    const created = (await this.jsm.streams.info(KEY_STREAM)).created
    const shared = sharedCaches(`${created}|${[...this.keks.byId.keys()].join(",")}`, this.cachedKeys)
    this.agentKeys = shared.agentKeys
    this.dataKeys = shared.dataKeys
    this.cacheSwaps++
    // An agent or an entry forgotten elsewhere: none of its keys is kept here, so nothing left of its content in
    // the log (a recall's cue of the entry, sealed under its key) opens in this process either.
    const dropAgentKeys = (agentId: string) => {
      shared.agentKeys.deleteWhere((k) => k.startsWith(`${agentId}#`))
      shared.dataKeys.deleteWhere((k) => k === `focus.${agentId}` || k.startsWith(entryKeyName(agentId, "")))
    }
    const dropEntryKey = (name: string) => shared.dataKeys.delete(name)
    if (own !== undefined) {
      own.onAgentDestroyed = dropAgentKeys
      own.onEntryDestroyed = dropEntryKey
      const read = await own.start(this.jsm)
      this.watch = own
      this.stopWatch = () => own.stop()
      return read
    }
    let joined = shared.watch
    if (joined === undefined || joined.watch.ended) {
      const watch = new KeyWatch(KEY_STREAM)
      watch.onAgentDestroyed = dropAgentKeys
      watch.onEntryDestroyed = dropEntryKey
      joined = { watch, started: watch.start(this.jsm), users: 0 }
      shared.watch = joined
    }
    const sharing = joined
    sharing.users++
    const leave = async () => {
      if (--sharing.users > 0) return
      if (shared.watch === sharing) shared.watch = undefined
      await sharing.watch.stop()
    }
    try {
      const read = await sharing.started
      this.watch = sharing.watch
      this.stopWatch = leave
      return read
    } catch (error) {
      await leave()
      throw error
    }
  }

  /** Stops following the bucket (the process's watch stops with the last of its services). */
  async stop() {
    const stop = this.stopWatch
    this.stopWatch = async () => undefined
    await stop()
  }

  /** The data key of `ref` if it is in memory. */
  cached(ref: ContentKeyRef): Buffer | undefined {
    return this.dataKeys.get(cacheName(ref))
  }

  /**
   * Changes whenever a data key in memory is let go (destroyed, evicted, or for room) or replaced: while this is
   * the same, every key `cached` gave before is still in memory and still the one to use, and a destroy of any
   * of them changes it.
   */
  cachedKeysVersion(): number {
    return this.cacheSwaps * 2 ** 32 + this.dataKeys.changes
  }

  /** Drops what is in memory of an agent's keys, or of one entry's. */
  evict(agentId: string, entryId: string | null) {
    if (entryId !== null) {
      this.watch?.drop(entryKeyName(agentId, entryId))
      return this.dataKeys.delete(entryKeyName(agentId, entryId))
    }
    this.watch?.dropWhere((name) => name === agentKeyName(agentId) || name.startsWith(`entry.${agentId}.`))
    this.dataKeys.deleteWhere((k) => k === `focus.${agentId}` || k.startsWith(`entry.${agentId}.`))
    this.agentKeys.deleteWhere((k) => k.startsWith(`${agentId}#`))
  }

  /** The data key to read `ref`'s sealed content with; null when it is destroyed or was never made. */
  forRead(ref: ContentKeyRef): Promise<Buffer | null> {
    const name = cacheName(ref)
    const cached = this.dataKeys.get(name)
    if (cached !== undefined) return Promise.resolve(cached)
    let pending = this.loading.get(name)
    if (pending === undefined) {
      pending = this.load(ref, false).finally(() => this.loading.delete(name))
      this.loading.set(name, pending)
    }
    return pending
  }

  /**
   * The data key to seal `ref`'s content with, made when there is none. Null when it was destroyed (the
   * entry or the agent is forgotten) and `renews` is false; `renews` (a new recording of the entry, a new
   * registration of the agent) starts a new key in place of a destroyed one.
   */
  async forWrite(ref: ContentKeyRef, renews: boolean): Promise<Buffer | null> {
    // A new recording may follow a forget this process has not seen yet: it asks the store, not its memory.
    const cached = renews ? undefined : this.dataKeys.get(cacheName(ref))
    if (cached !== undefined) return cached
    return this.load(ref, true, renews)
  }

  private async load(ref: ContentKeyRef, create: boolean, renews = false): Promise<Buffer | null> {
    const key = await this.loadUncached(ref, create, renews)
    if (key !== null) this.dataKeys.set(cacheName(ref), key)
    // In memory now as a key: what the watch read of it is not needed again.
    if (ref.entryId !== null) this.watch?.drop(entryKeyName(ref.agentId, ref.entryId))
    return key
  }

  private async loadUncached(ref: ContentKeyRef, create: boolean, renews: boolean): Promise<Buffer | null> {
    if (ref.entryId !== null && create && renews) {
      const made = await this.newEntryKeyFromWatch(ref.agentId, ref.entryId)
      if (made !== undefined) return made
    }
    const agent = await this.agentKey(ref.agentId, create, renews && ref.entryId === null)
    if (agent === null) return null
    if (ref.entryId === null) return Buffer.from(hkdfSync("sha256", agent.key, Buffer.alloc(0), "focus", 32))
    return this.entryKey(ref.agentId, ref.entryId, agent, create, renews)
  }

  /**
   * A new recording's key, wrapped under the agent's key as the watch last read it and then confirmed
   * (confirmWrap): no read of the agent's key from the leader per recorded entry. Undefined when the
   * watch does not hold the agent's live key or the entry already has a key: then the leader is asked.
   */
  private async newEntryKeyFromWatch(agentId: string, entryId: string): Promise<Buffer | null | undefined> {
    if (this.watch?.current !== true) return undefined
    const watched = this.watch.get(agentKeyName(agentId))
    if (watched === undefined || watched.value === null) return undefined
    const record = parse<AgentKeyRecord>(watched.value)
    const newest = "generations" in record ? record.generations[0] : undefined
    if (newest === undefined) return undefined
    const agent: AgentKey = {
      gen: newest.gen,
      key: this.unwrapAgentGeneration(agentId, newest),
      revision: watched.revision,
    }
    const name = entryKeyName(agentId, entryId)
    const key = newKey()
    const written = await this.write(name, wrappedEntryKey(name, agent, key, this.now()), 0)
    return written === null ? undefined : this.confirmWrap(agentId, name, agent, key, written)
  }

  /**
   * A key as the bucket holds it. A direct get may be answered by a replica that is behind, so what it
   * says is absent is asked of the stream's leader; a write (`fromLeader`) asks the leader only, as its
   * compare-and-set must start from the newest revision.
   */
  private async read<R>(name: string, fromLeader = false): Promise<Read<R>> {
    try {
      if (!fromLeader) {
        // A deletion or a destroyed mark the watch read may since be followed by a new key it has not read
        // yet: only a live key is taken from it.
        const watched = this.watch?.get(name)
        const record = watched?.value == null ? null : parse<R>(watched.value)
        if (watched !== undefined && record !== null && !(DESTROYED in (record as object)))
          return { record, revision: watched.revision }
        const entry = await this.kv.get(name)
        if (entry !== null && entry.operation === "PUT")
          return { record: parse<R>(entry.value), revision: entry.revision }
      }
      const stored = await leaderGet(this.jsm, name)
      if (stored === null) return { record: null, revision: 0 }
      if (stored.operation !== "PUT") return { record: null, revision: stored.revision }
      return { record: parse<R>(stored.value), revision: stored.revision }
    } catch (error) {
      throw new KeyStoreError(`cannot read the key store (${name}): ${String(error)}`, { cause: error })
    }
  }

  /**
   * Stores `record` at `name` if it still stands at `revision` (0: absent): the new revision, or null when
   * another write came first.
   */
  private async write(name: string, record: unknown, revision: number): Promise<number | null> {
    const value = encoder.encode(JSON.stringify(record))
    try {
      if (revision === 0) return await this.kv.create(name, value)
      return await this.kv.update(name, value, revision)
    } catch (error) {
      if (/wrong last sequence|key exists/i.test(String(error))) return null
      throw new KeyStoreError(`cannot write the key store (${name}): ${String(error)}`, { cause: error })
    }
  }

  /** The agent's newest key; null when destroyed and not renewed. */
  async agentKey(agentId: string, create: boolean, renews: boolean): Promise<AgentKey | null> {
    const name = agentKeyName(agentId)
    for (;;) {
      // A read that may lead to a write (or seal under the key) asks the leader: a replica behind, or what was
      // preloaded before a forget, would seal under a destroyed key.
      const { record, revision } = await this.read<AgentKeyRecord>(name, create)
      if (record !== null && "generations" in record) {
        const [newest] = record.generations
        if (newest === undefined) throw new KeyStoreError(`${name} lists no key`)
        return { gen: newest.gen, key: this.unwrapAgentGeneration(agentId, newest), revision }
      }
      if (!create || (record !== null && !renews)) return null
      const gen = newGenerationId()
      const key = newKey()
      const fresh: AgentKeyRecord = {
        created: this.now(),
        generations: [
          { gen, kek: this.keks.current.id, sealed: seal(this.keks.current.key, key, wrapLabel(name, gen)) },
        ],
      }
      const written = await this.write(name, fresh, revision)
      if (written !== null) {
        this.agentKeys.set(`${agentId}#${gen}`, key)
        return { gen, key, revision: written }
      }
    }
  }

  /** Unwraps one generation of an agent's key with the key-encryption key that wrapped it. */
  unwrapAgentGeneration(agentId: string, generation: AgentKeyGeneration): Buffer {
    const cacheKey = `${agentId}#${generation.gen}`
    const cached = this.agentKeys.get(cacheKey)
    if (cached !== undefined) return cached
    const kek = this.keks.byId.get(generation.kek)
    if (kek === undefined)
      throw new KeyStoreError(
        `the key of agent ${agentId} is wrapped by key-encryption key '${generation.kek}', which WM_KEY_ENCRYPTION_KEYS does not hold`,
      )
    const key = open(kek, generation.sealed, wrapLabel(agentKeyName(agentId), generation.gen))
    if (key === null)
      throw new KeyStoreError(`key-encryption key '${generation.kek}' does not open the key of agent ${agentId}`)
    this.agentKeys.set(cacheKey, key)
    return key
  }

  private async entryKey(
    agentId: string,
    entryId: string,
    agent: AgentKey,
    create: boolean,
    renews: boolean,
  ): Promise<Buffer | null> {
    const name = entryKeyName(agentId, entryId)
    // A new recording: most often the entry has no key yet, so try to make it first (one round trip).
    if (renews) {
      const key = newKey()
      if ((await this.write(name, wrappedEntryKey(name, agent, key, this.now()), 0)) !== null) return key
    }
    for (;;) {
      const { record, revision } = await this.read<EntryKeyRecord>(name, create)
      if (record !== null && "sealed" in record) return this.unwrapEntry(agentId, name, record)
      if (!create || (record !== null && !renews)) return null
      const key = newKey()
      if ((await this.write(name, wrappedEntryKey(name, agent, key, this.now()), revision)) !== null) return key
    }
  }

  /**
   * An entry key just written (at `written`) under an agent key read from the watch stands if the agent's
   * record had not changed when it landed: a rotation or a forget stored after it finds the entry key in
   * its own pass. That is known once the watch has read the entry key's own write (so it reads the stream
   * the write went to, not one deleted since) with the agent's record unchanged; else the leader is asked.
   * If the agent's key changed first, the entry key is wrapped again under the newest generation (a key
   * bucket made anew gets a new agent key), or, when the agent's key was destroyed, marked destroyed
   * itself and the write refused (null).
   */
  private async confirmWrap(
    agentId: string,
    name: string,
    agent: AgentKey,
    key: Buffer,
    written: number,
  ): Promise<Buffer | null> {
    const watch = this.watch
    if (
      watch !== undefined &&
      (await watch.reached(written, CONFIRM_WAIT_MS)) &&
      watch.get(name)?.revision === written &&
      watch.get(agentKeyName(agentId))?.revision === agent.revision
    )
      return key
    let wrappedGen = agent.gen
    let revision = written
    for (;;) {
      const current = await this.agentKey(agentId, true, false)
      if (current !== null && current.gen === wrappedGen) return key
      const rewrapped: EntryKeyRecord =
        current === null ? { destroyed: this.now() } : wrappedEntryKey(name, current, key, this.now())
      if ((await this.write(name, rewrapped, revision)) !== null) return current === null ? null : key
      // Another write came first (a rotation's pass, a forget): the entry key as it stands now.
      const entry = await this.read<EntryKeyRecord>(name, true)
      if (entry.record === null || !("sealed" in entry.record)) return null
      wrappedGen = entry.record.gen
      revision = entry.revision
    }
  }

  private async unwrapEntry(
    agentId: string,
    name: string,
    record: Extract<EntryKeyRecord, { sealed: string }>,
  ): Promise<Buffer> {
    let agentKey = this.agentKeys.get(`${agentId}#${record.gen}`)
    if (agentKey === undefined) {
      const generationIn = (agent: AgentKeyRecord | null) =>
        agent !== null && "generations" in agent ? agent.generations.find((g) => g.gen === record.gen) : undefined
      // What was read earlier may predate a rotation: a generation it does not list is asked of the leader.
      const generation =
        generationIn((await this.read<AgentKeyRecord>(agentKeyName(agentId))).record) ??
        generationIn((await this.read<AgentKeyRecord>(agentKeyName(agentId), true)).record)
      if (generation === undefined) throw new KeyStoreError(`${name} is wrapped by a key its agent no longer lists`)
      agentKey = this.unwrapAgentGeneration(agentId, generation)
    }
    const key = open(agentKey, record.sealed, wrapLabel(name, record.gen))
    if (key === null) throw new KeyStoreError(`the key of agent ${agentId} does not open ${name}`)
    return key
  }
}
