/**
 * Finding stored messages by subject without reading their content, and
 * erasing them in place (`STREAM.MSG.DELETE` with `no_erase: false`): what
 * every erasure of forgotten content is made of (erase.ts, the key store).
 */
import {
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  jetstream,
} from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import type { StoredRecord } from "../../../domain/forget.ts"
import { readToEnd } from "./read-to-end.ts"

/**
 * An erasing delete of a message already gone — erased a moment ago by the
 * eraser or another `wm forget`: "no message found", "sequence … not found"
 * (JSSequenceNotFoundErrF), or the deletion failure that wraps the latter.
 */
const SEQUENCE_NOT_FOUND = 10043
const MESSAGE_DELETE_FAILED = 10057
const ALREADY_GONE = new Set<number>([JetStreamApiCodes.NoMessageFound, SEQUENCE_NOT_FOUND, MESSAGE_DELETE_FAILED])
/** Erasing deletes sent at once. */
const PARALLEL = 32

/** Subjects and sequences of the stored messages matching `filter`, in stream order; payloads are not fetched. */
export const storedRecords = async (nc: NatsConnection, stream: string, filter: string): Promise<StoredRecord[]> => {
  const consumer = await jetstream(nc).consumers.get(stream, {
    filter_subjects: filter,
    deliver_policy: DeliverPolicy.All,
    headers_only: true,
  })
  const records: StoredRecord[] = []
  // The creation reply counts what matches; an empty filter would otherwise wait forever.
  if ((await consumer.info(true)).num_pending === 0) return records
  for await (const m of readToEnd(consumer)) records.push({ seq: m.seq, subject: m.subject })
  return records
}

/** Erases each message (overwriting its bytes); one already gone counts as erased. Returns how many this call erased. */
export const eraseMessages = async (
  jsm: JetStreamManager,
  stream: string,
  seqs: ReadonlyArray<number>,
): Promise<number> => {
  let erased = 0
  for (let i = 0; i < seqs.length; i += PARALLEL) {
    const done = await Promise.all(
      seqs.slice(i, i + PARALLEL).map((seq) =>
        jsm.streams.deleteMessage(stream, seq, true).then(
          () => 1,
          (error: unknown) => {
            if (error instanceof JetStreamApiError && ALREADY_GONE.has(error.code)) return 0
            throw error
          },
        ),
      ),
    )
    erased += done.reduce((a, b) => a + b, 0)
  }
  return erased
}
