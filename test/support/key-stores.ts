/**
 * Content key stores as separate processes have them, on one nats-server's key bucket. A process shares what
 * it unwrapped between the stores of one bucket and the same key-encryption keys, so each store here is told
 * of a key-encryption key id of its own besides the writer's: stores of different processes never share,
 * and every one of them opens what the writer's store made.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import type { KV } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { openKeyBucket } from "../../services/platform/keys/content-keys.ts"
import { parseKeyEncryptionKeys } from "../../services/platform/keys/kek.ts"
import { ContentKeyStore } from "../../services/platform/keys/key-store.ts"

export const WRITER = "writer"
const KEK = Buffer.alloc(32, 9).toString("base64")

export interface ProcessKeyStoreOptions {
  /** Keys it keeps in memory (the store's default when absent). */
  readonly cachedKeys?: number
  /** Stands between the store and its bucket (to count its reads). */
  readonly bucket?: (kv: KV) => KV
}

/** A store of `process`'s own, on its own connection (the caller closes it), following the key bucket. */
export const processKeyStore = async (
  url: string,
  process: string,
  options: ProcessKeyStoreOptions = {},
): Promise<{ readonly nc: NatsConnection; readonly store: ContentKeyStore }> => {
  const nc = await connect({ servers: url })
  const bucket = await openKeyBucket(jetstream(nc), 1)
  const store = new ContentKeyStore(
    options.bucket ? options.bucket(bucket) : bucket,
    await jetstreamManager(nc),
    parseKeyEncryptionKeys([...new Set([process, WRITER])].map((id) => `${id}:${KEK}`).join(",")),
    Date.now,
    options.cachedKeys,
  )
  await store.follow()
  return { nc, store }
}
