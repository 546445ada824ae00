/**
 * The records this process decoded last: every projection of one process (gateway, working, fade,
 * retrieval, long-term) reads the same records of the log, and each is parsed, opened and checked once,
 * not once per projection. A record is found by its stream sequence and used only when its bytes are
 * the same (a process may read more than one log), and one with sealed content only by a reader whose
 * keys still hold its key: a forgotten entry's content is not served from here. Decoded events are
 * shared between readers, as the opened fields they hold already are (keys/sealing.ts): never changed.
 */
import type { Decoded } from "../../../contracts/decode.ts"
import { Recent } from "../keys/recent.ts"

interface Kept {
  readonly bytes: Buffer
  readonly decoded: Decoded
}

/** Enough for the projections of one process, which follow the log close behind each other. */
const KEPT_RECORDS = 2_048

const recent = new Recent<Kept>(KEPT_RECORDS)

const sameBytes = (kept: Buffer, data: Uint8Array) =>
  kept.length === data.byteLength && kept.equals(Buffer.from(data.buffer, data.byteOffset, data.byteLength))

/**
 * The record at `seq` decoded: as this process last decoded the same bytes, when `opens` says its keys
 * hold what its sealed content needs, else by `decode` (kept when it succeeds).
 */
export const decodedRecord = (
  seq: number,
  data: Uint8Array,
  opens: (data: Uint8Array) => boolean,
  decode: (data: Uint8Array) => Decoded,
): Decoded => {
  const id = String(seq)
  const kept = recent.get(id)
  if (kept !== undefined && sameBytes(kept.bytes, data) && opens(data)) return kept.decoded
  const decoded = decode(data)
  if (decoded.ok) recent.set(id, { bytes: Buffer.from(data), decoded })
  return decoded
}
