/**
 * AES-256-GCM, as every key and every piece of content is sealed: a fresh
 * 96-bit nonce per seal, the 128-bit tag checked on open, and a label as
 * authenticated data, so a sealed value opens only where it was sealed.
 * Layout: nonce (12 bytes) · tag (16) · ciphertext, in base64.
 */
import { createCipheriv, createDecipheriv, randomFillSync } from "node:crypto"

const NONCE = 12
const TAG = 16
export const KEY_BYTES = 32

/**
 * Random bytes drawn from the system's generator a pool at a time: one call per ~100 nonces and keys
 * instead of one each (a call costs about what sealing a short field does). Each byte is handed out once.
 */
const pool = Buffer.alloc(4_096)
let drawn = pool.length
const randomBytes = (n: number): Buffer => {
  if (drawn + n > pool.length) {
    randomFillSync(pool)
    drawn = 0
  }
  const out = Buffer.allocUnsafe(n)
  pool.copy(out, 0, drawn, drawn + n)
  // What is handed out is not left in the pool.
  pool.fill(0, drawn, drawn + n)
  drawn += n
  return out
}

export const newKey = (): Buffer => randomBytes(KEY_BYTES)

export const seal = (key: Uint8Array, plaintext: Uint8Array, label: string): string => {
  const nonce = randomBytes(NONCE)
  const cipher = createCipheriv("aes-256-gcm", key, nonce)
  cipher.setAAD(Buffer.from(label, "utf8"))
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return Buffer.concat([nonce, cipher.getAuthTag(), body]).toString("base64")
}

/** The plaintext, or null when the value was not sealed with this key and label (or was altered). */
export const open = (key: Uint8Array, sealed: string, label: string): Buffer | null => {
  const bytes = Buffer.from(sealed, "base64")
  if (bytes.length < NONCE + TAG) return null
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, NONCE))
    decipher.setAAD(Buffer.from(label, "utf8"))
    decipher.setAuthTag(bytes.subarray(NONCE, NONCE + TAG))
    return Buffer.concat([decipher.update(bytes.subarray(NONCE + TAG)), decipher.final()])
  } catch {
    return null
  }
}

/** `seal` without the base64: nonce · tag · ciphertext as bytes (28 bytes more than the plaintext). */
export const sealBytes = (key: Uint8Array, plaintext: Uint8Array, label: string): Uint8Array => {
  const nonce = randomBytes(NONCE)
  const cipher = createCipheriv("aes-256-gcm", key, nonce)
  cipher.setAAD(Buffer.from(label, "utf8"))
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return Buffer.concat([nonce, cipher.getAuthTag(), body])
}

/** `open` of what `sealBytes` made. */
export const openBytes = (key: Uint8Array, sealed: Uint8Array, label: string): Buffer | null =>
  open(key, Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength).toString("base64"), label)
