/**
 * Reading a stream to its end while other clients erase from it. A consumer's delivery says how many
 * matching messages are still to come; a read that waits for the last one counted waits forever when that
 * one is erased before it is delivered — and erasures race: the operator's `wm forget` and the eraser both
 * finish the same forget, each erasing what the other is reading. So messages are pulled in batches, and the
 * read ends at the message the server says is the last, or at a batch that comes back short when the consumer
 * has nothing left to deliver.
 */
import type { Consumer, JsMsg } from "@nats-io/jetstream"

/** Messages asked for at once. */
const BATCH = 256
/** How long a batch waits for messages the server does not have (the least a pull may wait). */
const EMPTY_WAIT_MS = 1_000

/** The consumer's messages in order, to the end of the stream; the reader may stop early (`break`). */
export async function* readToEnd(consumer: Consumer): AsyncGenerator<JsMsg> {
  for (;;) {
    const batch = await consumer.fetch({ max_messages: BATCH, expires: EMPTY_WAIT_MS })
    let received = 0
    try {
      for await (const m of batch) {
        received++
        yield m
        if (m.info.pending === 0) return
      }
    } finally {
      await batch.close().catch(() => undefined)
    }
    // A short batch: nothing more came before it expired. The consumer says whether that was the end, or a
    // server too busy to deliver in time (then it reads on).
    if (received < BATCH && (await consumer.info()).num_pending === 0) return
  }
}
