/**
 * Reading a stream to its end while other clients erase from it. A consumer's delivery says how many
 * matching messages are still to come; a read that waits for the last one counted waits forever when that
 * one is erased before it is delivered — and erasures race: the operator's `wm forget` and the eraser both
 * finish the same forget, each erasing what the other is reading. So messages are pulled in batches, and the
 * read ends at the message the server says is the last, or at a batch that comes back short when the consumer
 * has nothing left to deliver and every message it delivered arrived.
 */
import type { Consumer, JsMsg } from "@nats-io/jetstream"

/** Messages asked for at once. */
const BATCH = 256
/** How long a batch waits for messages the server does not have (the least a pull may wait). */
const EMPTY_WAIT_MS = 1_000
/** Empty batches in a row, the consumer still counting messages to deliver, before the read gives up. */
const STALLED_BATCHES = 30

/** Messages the server delivered never arrived (a reconnect, a stalled pull): the read is short and says so. */
export class ReadCutShort extends Error {
  override readonly name = "ReadCutShort"
}

/** One batch, received whole before the reader sees any of it: a slow reader never outlives its pull. */
const fetchBatch = async (consumer: Consumer): Promise<{ readonly messages: JsMsg[]; readonly last: boolean }> => {
  const batch = await consumer.fetch({ max_messages: BATCH, expires: EMPTY_WAIT_MS })
  const messages: JsMsg[] = []
  try {
    for await (const m of batch) {
      messages.push(m)
      if (m.info.pending === 0) return { messages, last: true }
    }
  } finally {
    await batch.close().catch(() => undefined)
  }
  return { messages, last: false }
}

/** The consumer's messages in order, to the end of the stream; the reader may stop early (`break`). */
export async function* readToEnd(consumer: Consumer): AsyncGenerator<JsMsg> {
  let latest: { readonly consumer: string; readonly delivered: number } | null = null
  for (let empty = 0; ; ) {
    const { messages, last } = await fetchBatch(consumer)
    empty = messages.length === 0 ? empty + 1 : 0
    const newest = messages.at(-1)
    if (newest !== undefined) latest = { consumer: newest.info.consumer, delivered: newest.info.deliverySequence }
    yield* messages
    if (last) return
    if (messages.length < BATCH) {
      // Nothing more came before the batch expired: the end, or a server too busy to deliver in time.
      const info = await consumer.info()
      if (info.num_pending > 0) {
        if (empty < STALLED_BATCHES) continue
        throw new ReadCutShort(`${info.stream_name} counts ${info.num_pending} message(s) more and delivers none`)
      }
      const arrived = latest !== null && latest.consumer === info.name ? latest.delivered : 0
      if (info.delivered.consumer_seq !== arrived)
        throw new ReadCutShort(
          `${info.delivered.consumer_seq - arrived} message(s) of ${info.stream_name} were delivered and never arrived`,
        )
      return
    }
  }
}
