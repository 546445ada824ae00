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

const failed = (error: unknown) =>
  new LongTermStoreError({ reason: `content keys: ${error instanceof Error ? error.message : String(error)}` })

export const sealedLongTermStore = (inner: LongTermStoreShape, keys: ContentKeyStore): LongTermStoreShape => {
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
   * A record searched or looked up, its texts opened when first read: a search returns many more records than
   * its caller shows the text of. One its key does not open reads with an empty summary and no key points.
   */
  const openLazily = (payload: LongTermPayload) => {
    if (!isSealedText(payload.summary) && !isSealedText(payload.keyPoints)) return Effect.succeed(payload)
    return Effect.map(keyOf(payload, false), (key): LongTermPayload | null => {
      if (key === null) return null
      const opened = (field: "summary" | "keyPoints") => {
        const text = payload[field]
        return isSealedText(text) ? openText(key, payload, field, text) : text
      }
      let summary: string | undefined
      let keyPoints: { readonly text: string | null } | undefined
      return {
        ...payload,
        get summary() {
          summary ??= opened("summary") ?? ""
          return summary
        },
        get keyPoints() {
          keyPoints ??= { text: opened("keyPoints") }
          return keyPoints.text
        },
      }
    })
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
          Effect.forEach(hits, (hit) =>
            Effect.map(openLazily(hit.payload), (payload) => (payload === null ? null : { ...hit, payload })),
          ),
          (opened) => opened.filter((h) => h !== null),
        ),
      ),
    list: (query) => Effect.flatMap(inner.list(query), openAll),
    get: (agentId, entryIds) =>
      Effect.flatMap(inner.get(agentId, entryIds), (payloads) =>
        Effect.map(Effect.forEach(payloads, openLazily), (opened) => opened.filter((p) => p !== null)),
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
