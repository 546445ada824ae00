/**
 * The long-term store seen through the content keys: a record's summary and key points are stored sealed
 * under its entry's key (the vector stays in clear: it is what a search compares), and opened as they are
 * read. A record whose key is destroyed (its entry or agent forgotten, the store not yet erased) is not
 * written, and is not returned. Records stored in clear before read as they are.
 */
import { Effect, Layer } from "effect"
import type { LongTermPayload } from "../../../contracts/longterm.ts"
import { open, seal } from "../../platform/keys/aead.ts"
import { ContentKeys } from "../../platform/keys/content-keys.ts"
import type { ContentKeyStore } from "../../platform/keys/key-store.ts"
import {
  type Hit,
  type LongTermRecord,
  LongTermStore,
  LongTermStoreError,
  type LongTermStoreShape,
  type StoreWrite,
} from "./store.ts"

/** What a sealed text starts with: no summary or key points written in clear does. */
export const SEALED_TEXT = "\u0000sealed\u0000"

const label = (payload: LongTermPayload, field: string) => `${payload.agentId}/${payload.entryId}/longterm.${field}`
const isSealedText = (text: string | null): text is string => text?.startsWith(SEALED_TEXT) === true

const sealText = (key: Buffer, payload: LongTermPayload, field: string, text: string) =>
  `${SEALED_TEXT}${seal(key, Buffer.from(text, "utf8"), label(payload, field))}`

const openText = (key: Buffer, payload: LongTermPayload, field: string, text: string): string | null => {
  const plain = open(key, text.slice(SEALED_TEXT.length), label(payload, field))
  return plain === null ? null : plain.toString("utf8")
}

/**
 * A stored payload whose sealed texts open when first read, and stay open. Its texts are getters of its class:
 * read them by name (or through `toJSON`), not by copying the object's own fields.
 */
class LazilyOpened implements LongTermPayload {
  readonly agentId: string
  readonly entryId: string
  readonly origin: LongTermPayload["origin"]
  readonly tags: LongTermPayload["tags"]
  readonly correlationId: string | null
  readonly moodSnapshot: LongTermPayload["moodSnapshot"]
  readonly emotionalWeight: number
  readonly timestamp: number
  readonly demotedAt: number
  readonly summaryForm: LongTermPayload["summaryForm"]
  readonly summaryTokens: number
  readonly keyPointsTokens: number | null
  readonly rawTokens: number
  readonly citationCount: number
  readonly model: string
  readonly #stored: LongTermPayload
  readonly #key: Buffer
  #summary: string | undefined
  #keyPoints: { readonly text: string | null } | undefined

  constructor(stored: LongTermPayload, key: Buffer) {
    this.#stored = stored
    this.#key = key
    this.agentId = stored.agentId
    this.entryId = stored.entryId
    this.origin = stored.origin
    this.tags = stored.tags
    this.correlationId = stored.correlationId
    this.moodSnapshot = stored.moodSnapshot
    this.emotionalWeight = stored.emotionalWeight
    this.timestamp = stored.timestamp
    this.demotedAt = stored.demotedAt
    this.summaryForm = stored.summaryForm
    this.summaryTokens = stored.summaryTokens
    this.keyPointsTokens = stored.keyPointsTokens
    this.rawTokens = stored.rawTokens
    this.citationCount = stored.citationCount
    this.model = stored.model
  }

  #opened(field: "summary" | "keyPoints") {
    const text = this.#stored[field]
    return isSealedText(text) ? openText(this.#key, this.#stored, field, text) : text
  }

  get summary(): string {
    this.#summary ??= this.#opened("summary") ?? ""
    return this.#summary
  }

  get keyPoints(): string | null {
    this.#keyPoints ??= { text: this.#opened("keyPoints") }
    return this.#keyPoints.text
  }

  toJSON(): LongTermPayload {
    return { ...this, summary: this.summary, keyPoints: this.keyPoints }
  }
}

const failed = (error: unknown) =>
  new LongTermStoreError({ reason: `content keys: ${error instanceof Error ? error.message : String(error)}` })

/**
 * The data keys of the records a store has opened, by agent and entry, read from the key store's memory and
 * kept while it lets go of none: a recall looks up the keys of hundreds of records, mostly the same agent's,
 * and one small map an agent is read faster than the process's map of every key by a name made for each
 * record. All of it is let go as soon as the key store lets go of or replaces any key (a forget, an eviction,
 * keys let go for room), so it only ever holds keys the key store holds, and a destroy reaches it.
 */
class KeysInMemory {
  readonly #keys: ContentKeyStore
  #version: number
  #byAgent = new Map<string, Map<string, Buffer>>()

  constructor(keys: ContentKeyStore) {
    this.#keys = keys
    this.#version = keys.cachedKeysVersion()
  }

  get(agentId: string, entryId: string): Buffer | undefined {
    const version = this.#keys.cachedKeysVersion()
    if (version !== this.#version) {
      this.#byAgent = new Map()
      this.#version = version
    }
    let byEntry = this.#byAgent.get(agentId)
    const known = byEntry?.get(entryId)
    if (known !== undefined) return known
    const key = this.#keys.cached({ agentId, entryId })
    if (key === undefined) return undefined
    if (byEntry === undefined) {
      byEntry = new Map()
      this.#byAgent.set(agentId, byEntry)
    }
    byEntry.set(entryId, key)
    return key
  }
}

export const sealedLongTermStore = (inner: LongTermStoreShape, keys: ContentKeyStore): LongTermStoreShape => {
  const inMemory = new KeysInMemory(keys)
  const keyOf = (payload: LongTermPayload, forWrite: boolean) => {
    const ref = { agentId: payload.agentId, entryId: payload.entryId }
    // A key in memory is used as the log's reader uses it (keys/content-keys.ts): no round trip to the key store.
    const cached = forWrite ? undefined : keys.cached(ref)
    if (cached !== undefined) return Effect.succeed<Buffer | null>(cached)
    return Effect.tryPromise({
      try: () => (forWrite ? keys.forWrite(ref, false) : keys.forRead(ref)),
      catch: failed,
    })
  }

  const sealRecord = (record: LongTermRecord) =>
    Effect.map(keyOf(record.payload, true), (key): LongTermRecord | null => {
      if (key === null) return null
      const { payload } = record
      return {
        vector: record.vector,
        payload: {
          ...payload,
          summary: sealText(key, payload, "summary", payload.summary),
          keyPoints: payload.keyPoints === null ? null : sealText(key, payload, "keyPoints", payload.keyPoints),
        },
      }
    })

  /** The payload as written, opened; null when its key is destroyed or does not open it. */
  const openPayload = (payload: LongTermPayload) => {
    if (!isSealedText(payload.summary) && !isSealedText(payload.keyPoints)) return Effect.succeed(payload)
    return Effect.map(keyOf(payload, false), (key): LongTermPayload | null => {
      if (key === null) return null
      const summary = isSealedText(payload.summary)
        ? openText(key, payload, "summary", payload.summary)
        : payload.summary
      const keyPoints = isSealedText(payload.keyPoints)
        ? openText(key, payload, "keyPoints", payload.keyPoints)
        : payload.keyPoints
      if (summary === null || (payload.keyPoints !== null && keyPoints === null)) return null
      return { ...payload, summary, keyPoints }
    })
  }
  /**
   * Records searched or looked up, each with its texts opened when first read: a search returns many more
   * records than its caller shows the text of. One its key does not open reads with an empty summary and no
   * key points; one whose key is destroyed is null. Keys in memory are used without an effect per record (a
   * recall looks up hundreds): only the records whose key must be loaded wait for it.
   */
  const openManyLazily = (payloads: ReadonlyArray<LongTermPayload>) => {
    const opened: Array<LongTermPayload | null> = new Array(payloads.length)
    const loading: number[] = []
    for (let i = 0; i < payloads.length; i++) {
      const payload = payloads[i]!
      if (!isSealedText(payload.summary) && !isSealedText(payload.keyPoints)) {
        opened[i] = payload
        continue
      }
      const key = inMemory.get(payload.agentId, payload.entryId)
      if (key === undefined) loading.push(i)
      else opened[i] = new LazilyOpened(payload, key)
    }
    if (loading.length === 0) return Effect.succeed(opened)
    return Effect.as(
      Effect.forEach(
        loading,
        (i) =>
          Effect.map(keyOf(payloads[i]!, false), (key) => {
            opened[i] = key === null ? null : new LazilyOpened(payloads[i]!, key)
          }),
        { discard: true },
      ),
      opened,
    )
  }
  const openAll = (payloads: ReadonlyArray<LongTermPayload>) =>
    Effect.map(Effect.forEach(payloads, openPayload), (opened) => opened.filter((p) => p !== null))

  return {
    ...inner,
    upsert: (records) =>
      Effect.flatMap(Effect.forEach(records, sealRecord), (sealed) => {
        const kept = sealed.filter((r) => r !== null)
        return kept.length === 0 ? Effect.void : inner.upsert(kept)
      }),
    ...(inner.checkpointed === undefined
      ? {}
      : {
          checkpointed: {
            ...inner.checkpointed,
            commit: (writes, log, partition, seq) =>
              Effect.flatMap(
                Effect.forEach(
                  writes,
                  (write): Effect.Effect<StoreWrite, LongTermStoreError> =>
                    "upsert" in write
                      ? Effect.map(Effect.forEach(write.upsert, sealRecord), (sealed) => ({
                          upsert: sealed.filter((r) => r !== null),
                        }))
                      : Effect.succeed(write),
                ),
                (sealedWrites) => inner.checkpointed!.commit(sealedWrites, log, partition, seq),
              ),
          },
        }),
    searchDense: (agentId, model, vector, limit, filter) =>
      Effect.flatMap(inner.searchDense(agentId, model, vector, limit, filter), (hits) =>
        Effect.map(
          openManyLazily(hits.map((hit) => hit.payload)),
          (opened): ReadonlyArray<Hit> =>
            hits.flatMap((hit, i) => {
              const payload = opened[i]
              return payload === null || payload === undefined ? [] : [{ payload, score: hit.score }]
            }),
        ),
      ),
    list: (query) => Effect.flatMap(inner.list(query), openAll),
    get: (agentId, entryIds) =>
      Effect.flatMap(inner.get(agentId, entryIds), (payloads) =>
        Effect.map(openManyLazily(payloads), (opened) => opened.filter((p) => p !== null && p !== undefined)),
      ),
  }
}

/** Seals what the given store keeps; the store and the content keys are the service's own. */
export const sealedStoreLayer = Layer.effect(
  LongTermStore,
  Effect.gen(function* () {
    const inner = yield* LongTermStore
    const keys = yield* ContentKeys
    return sealedLongTermStore(inner, keys.store)
  }),
)
