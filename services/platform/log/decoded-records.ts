/**
 * The records this process decoded last: every projection of one process (gateway, working, fade,
 * retrieval, long-term) reads the same records of the log, and each is parsed, opened and checked once,
 * not once per projection. A record is found by its stream sequence and used only when its bytes are
 * the same (a process may read more than one log), and one with sealed content only while the reader's
 * keys hold the very key it was opened with (not one made since under the same name, after a forget).
 * Decoded events are shared between readers, as the opened fields they hold already are
 * (keys/sealing.ts): never changed.
 */
import type { Decoded } from "../../../contracts/decode.ts"
import { Recent } from "../keys/recent.ts"

interface Kept {
  readonly bytes: Buffer
  /** The key its sealed content was opened with (null: none sealed). */
  readonly key: Buffer | null
  readonly decoded: Decoded
}

/** Enough for the projections of one process, which follow the log close behind each other. */
const KEPT_RECORDS = 2_048

const recent = new Recent<Kept>(KEPT_RECORDS)

const sameBytes = (kept: Buffer, data: Uint8Array) =>
  kept.length === data.byteLength && kept.equals(Buffer.from(data.buffer, data.byteOffset, data.byteLength))

/**
 * The record at `seq` decoded: as this process last decoded the same bytes while `heldKeyOf` gives the key
 * it was opened with (null: nothing sealed; undefined: its key is not in memory), else by `decode` (kept
 * when it succeeds with a key in memory, or with nothing sealed).
 */
export const decodedRecord = (
  seq: number,
  data: Uint8Array,
  heldKeyOf: (data: Uint8Array) => Buffer | null | undefined,
  decode: (data: Uint8Array) => Decoded,
): Decoded => {
  const id = String(seq)
  const key = heldKeyOf(data)
  const kept = recent.get(id)
  if (kept !== undefined && key !== undefined && kept.key === key && sameBytes(kept.bytes, data)) return kept.decoded
  const decoded = decode(data)
  if (decoded.ok && key !== undefined) recent.set(id, { bytes: Buffer.from(data), key, decoded })
  return decoded
}
