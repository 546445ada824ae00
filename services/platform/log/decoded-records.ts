/**
 * The records this process decoded last: every projection of one process (gateway, working, fade,
 * retrieval, long-term) reads the same records of the log, and each is parsed, opened and checked once,
 * not once per projection. A record is found by its stream sequence and used only when its bytes are
 * the same (a process may read more than one log), and one with sealed content only while the reader's
 * keys hold the very key it was opened with, byte for byte (not one made since under the same name, after a
 * forget); a key loaded again after the key cache let it go, or unwrapped by another key store, is another
 * Buffer with the same bytes.
 * Decoded events are shared between readers, as the opened fields they hold already are
 * (keys/sealing.ts): never changed.
 */
import type { Decoded } from "../../../contracts/decode.ts"
import { Recent } from "../keys/recent.ts"

/** The key a record's sealed content opens with, or each of its items' keys (null: none sealed). */
type Keys = Buffer | ReadonlyArray<Buffer> | null

interface Kept {
  readonly bytes: Buffer
  /** The key (or keys) its sealed content was opened with. */
  readonly key: Keys
  readonly decoded: Decoded
}

// By their bytes: the same key may be held in more than one Buffer (loaded again, another key store).
const sameKey = (a: Buffer, b: Buffer) => a === b || a.equals(b)

const sameKeys = (a: Keys, b: Keys): boolean => {
  if (a === b) return true
  if (a === null || b === null) return false
  if (!Array.isArray(a) || !Array.isArray(b))
    return !Array.isArray(a) && !Array.isArray(b) && sameKey(a as Buffer, b as Buffer)
  return a.length === b.length && a.every((key, i) => sameKey(key, b[i]!))
}

/** Enough for the projections of one process, which follow the log close behind each other. */
const KEPT_RECORDS = 2_048

const recent = new Recent<Kept>(KEPT_RECORDS)

const sameBytes = (kept: Buffer, data: Uint8Array) =>
  kept.length === data.byteLength && kept.equals(Buffer.from(data.buffer, data.byteOffset, data.byteLength))

/**
 * The record at `seq` decoded: as this process last decoded the same bytes while `heldKeyOf` gives the key
 * it was opened with (null: nothing sealed; undefined: its key is not in memory; a record of items sealed each
 * under its own entry's key: each of them), else by `decode` (kept
 * when it succeeds with a key in memory, or with nothing sealed).
 */
export const decodedRecord = (
  seq: number,
  data: Uint8Array,
  heldKeyOf: (data: Uint8Array) => Keys | undefined,
  decode: (data: Uint8Array) => Decoded,
): Decoded => {
  const id = String(seq)
  const key = heldKeyOf(data)
  const kept = recent.get(id)
  if (kept !== undefined && key !== undefined && sameKeys(kept.key, key) && sameBytes(kept.bytes, data))
    return kept.decoded
  const decoded = decode(data)
  if (decoded.ok && key !== undefined) recent.set(id, { bytes: Buffer.from(data), key, decoded })
  return decoded
}
