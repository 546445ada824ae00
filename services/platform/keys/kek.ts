/**
 * Key-encryption keys: what wraps each agent's key in the key store. They
 * come from the environment (WM_KEY_ENCRYPTION_KEYS), never from NATS, so a
 * copy of the NATS store alone opens nothing:
 *
 *   WM_KEY_ENCRYPTION_KEYS="2025-12:<base64 of 32 bytes>,2025-06:<base64>"
 *
 * The first wraps new keys; the others still unwrap keys wrapped before a
 * rotation (`wm keys rotate` re-wraps them all under the first), after
 * which they can be removed. Unset, a development key built into the code
 * is used: it keeps forgets destroying keys, but anyone with a copy of the
 * store and this code can unwrap what the copy holds.
 */
import { createHash } from "node:crypto"
import { KEY_BYTES } from "./aead.ts"

export interface KeyEncryptionKey {
  readonly id: string
  readonly key: Buffer
}

export interface KeyEncryptionKeys {
  /** Wraps every key stored from now on. */
  readonly current: KeyEncryptionKey
  readonly byId: ReadonlyMap<string, Buffer>
  /** True when no key was configured and the development key is in use. */
  readonly development: boolean
}

export const DEVELOPMENT_KEK_ID = "development"

const developmentKey = (): KeyEncryptionKeys => {
  const key = createHash("sha256").update("working-memory development key-encryption key").digest()
  return { current: { id: DEVELOPMENT_KEK_ID, key }, byId: new Map([[DEVELOPMENT_KEK_ID, key]]), development: true }
}

/** Parses the setting's value (unset or blank: the development key); throws naming the part that is wrong. */
export const parseKeyEncryptionKeys = (value: string | undefined): KeyEncryptionKeys => {
  if (value === undefined || value.trim() === "") return developmentKey()
  const keys = value
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part.length > 0)
    .map((part): KeyEncryptionKey => {
      const colon = part.indexOf(":")
      const id = part.slice(0, colon)
      if (colon <= 0 || !/^[A-Za-z0-9_.-]{1,64}$/u.test(id))
        throw new Error(
          `WM_KEY_ENCRYPTION_KEYS: '${part.slice(0, 16)}…' is not <id>:<base64 key> (id: 1-64 of A-Z a-z 0-9 _ . -)`,
        )
      const key = Buffer.from(part.slice(colon + 1), "base64")
      if (key.length !== KEY_BYTES)
        throw new Error(
          `WM_KEY_ENCRYPTION_KEYS: key '${id}' is ${key.length} bytes; a key is ${KEY_BYTES} bytes in base64`,
        )
      return { id, key }
    })
  const [current] = keys
  if (current === undefined) return developmentKey()
  const byId = new Map<string, Buffer>()
  for (const k of keys) {
    if (byId.has(k.id)) throw new Error(`WM_KEY_ENCRYPTION_KEYS: key id '${k.id}' appears twice`)
    byId.set(k.id, k.key)
  }
  return { current, byId, development: false }
}
