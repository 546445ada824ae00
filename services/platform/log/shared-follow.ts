/**
 * One consumer per part of the log a process reads. Every reader of the same filter in one process (the
 * services of the one-process system, replicas run side by side) is handed the records of one ordered
 * consumer, in stream order, instead of each having the server send it its own copy: the server delivers,
 * and the process parses, each record once, and one consumer's pulls and heartbeats stand for all of them.
 *
 * The shared consumer reads at the front. A reader that starts behind it reads on its own consumer until it
 * reaches the record the shared one had delivered when it joined (or the end of the log), the records the
 * shared one delivers meanwhile kept for it, then reads on from the shared one. A reader that starts ahead of
 * it takes the front: the shared consumer starts again from there, and the readers it leaves behind catch up
 * on their own the same way. No reader is handed a record twice or misses one, and none waits for another's
 * catch-up.
 *
 * The consumer runs on the connection of one of its readers (each service has its own): when that reader
 * stops while others read on, or the consumer ends without being stopped, it is opened again on a reader's
 * connection from the record after the last it delivered.
 */
import type { LogRecord, Subscription } from "./event-log.ts"

/** An ordered consumer opened on one reader's connection. */
export interface OpenedConsumer extends Subscription {
  /** Settles when the consumer ends, stopped or not. */
  readonly closed: Promise<unknown>
}

/** Opens an ordered consumer on one reader's connection, from `fromSeq`, handing each record to `onRecord`. */
export type OpenConsumer = (fromSeq: number, onRecord: (record: LogRecord) => void) => Promise<OpenedConsumer>

export interface SharedFollowOptions {
  /** A reader whose `onRecord` throws is told here; the others are handed the record all the same. */
  readonly onError?: (error: unknown) => void
  /** Aborted before the reader has joined: it leaves, and the follow fails. */
  readonly signal?: AbortSignal
}

interface CatchingUp {
  readonly own: Promise<OpenedConsumer>
  /** The shared consumer's records since the reader joined, not yet handed to it. */
  kept: LogRecord[]
  /** The reader reads on from the shared consumer once its own has delivered this record. */
  joinsAfter: number
}

interface Reader {
  readonly onRecord: (record: LogRecord) => void
  readonly onError: (error: unknown) => void
  readonly open: OpenConsumer
  /** The last record handed to it. */
  delivered: number
  catchingUp: CatchingUp | null
}

interface Shared {
  readonly key: string
  readonly readers: Set<Reader>
  /** The last record the shared consumer delivered (before its first: where it started, less one). */
  position: number
  owner: Reader
  consumer: Promise<OpenedConsumer | null>
  /** Which opening of the consumer is current: records from one replaced since are passed over. */
  generation: number
}

/**
 * Records kept for a reader catching up; past it they are let go and the reader joins later, after the
 * record the shared consumer delivers then.
 */
const KEPT_WHILE_CATCHING_UP = 10_000
const REOPEN_DELAY_MS = 500

const shared = new Map<string, Shared>()

const stopQuietly = async (subscription: Promise<Subscription | null>) => {
  try {
    await (await subscription)?.stop()
  } catch {
    // A consumer that did not open, or whose connection is gone, has nothing to stop.
  }
}

const handTo = (reader: Reader, record: LogRecord) => {
  if (record.seq <= reader.delivered) return
  reader.delivered = record.seq
  try {
    reader.onRecord(record)
  } catch (error) {
    // One reader failing neither keeps the record from the others nor stops the consumer they share.
    reader.onError(error)
  }
}

const dispatch = (consumer: Shared, record: LogRecord) => {
  if (record.seq <= consumer.position) return
  consumer.position = record.seq
  for (const reader of consumer.readers) {
    const catchingUp = reader.catchingUp
    if (catchingUp === null) {
      handTo(reader, record)
      continue
    }
    if (catchingUp.kept.length < KEPT_WHILE_CATCHING_UP) {
      // A copy: the record's bytes are a view of the connection's read buffer.
      catchingUp.kept.push({ ...record, data: record.data.slice() })
    } else {
      catchingUp.kept = []
      catchingUp.joinsAfter = record.seq
    }
  }
}

const join = (reader: Reader, catchingUp: CatchingUp) => {
  reader.catchingUp = null
  void stopQuietly(catchingUp.own)
  for (const record of catchingUp.kept) handTo(reader, record)
}

/** The reader reads on its own consumer until it reaches `joinsAfter`, then from the shared one. */
const catchUp = (reader: Reader, joinsAfter: number) => {
  const previous = reader.catchingUp
  const catchingUp: CatchingUp = {
    kept: [],
    joinsAfter,
    own: reader.open(reader.delivered + 1, (record) => {
      if (reader.catchingUp !== catchingUp) return
      handTo(reader, record)
      // Every record after this one is kept or still to come from the shared consumer.
      if (record.seq >= catchingUp.joinsAfter || record.pending === 0) join(reader, catchingUp)
    }),
  }
  reader.catchingUp = catchingUp
  if (previous !== null) void stopQuietly(previous.own)
  return catchingUp
}

/**
 * Opens the shared consumer after its last record on `owner`'s connection; it replaces the one open before,
 * whose records are passed over from now on. When it ends without being replaced, it is opened again.
 */
const openOn = async (consumer: Shared, owner: Reader): Promise<OpenedConsumer | null> => {
  const generation = ++consumer.generation
  const opened = await owner.open(consumer.position + 1, (record) => {
    if (consumer.generation === generation) dispatch(consumer, record)
  })
  if (consumer.generation !== generation) {
    // Replaced while it was being opened.
    void stopQuietly(Promise.resolve(opened))
    return null
  }
  void opened.closed.then(() => {
    if (consumer.generation === generation && consumer.readers.size > 0) consumer.consumer = reopen(consumer)
  })
  return opened
}

/**
 * Opens the shared consumer on the owner's connection, else on another reader's, trying again while any
 * reader reads and no other opening has replaced this one; null when it gives up.
 */
const reopen = async (consumer: Shared): Promise<OpenedConsumer | null> => {
  for (;;) {
    const owner = consumer.readers.has(consumer.owner) ? consumer.owner : [...consumer.readers][0]
    if (owner === undefined) return null
    consumer.owner = owner
    const generation = consumer.generation + 1
    try {
      return await openOn(consumer, owner)
    } catch {
      if (consumer.generation !== generation) return null
      // Its connection may be the one that is gone: the next reader's is tried.
      const readers = [...consumer.readers]
      if (readers.length > 1) consumer.owner = readers[(readers.indexOf(owner) + 1) % readers.length]!
      await new Promise((resolve) => setTimeout(resolve, REOPEN_DELAY_MS))
      if (consumer.generation !== generation) return null
    }
  }
}

/** Opens the shared consumer again from its position now; the one before is stopped. */
const restart = (consumer: Shared) => {
  const previous = consumer.consumer
  consumer.consumer = reopen(consumer)
  void stopQuietly(previous)
}

const leave = async (consumer: Shared, reader: Reader) => {
  if (!consumer.readers.delete(reader)) return
  const catchingUp = reader.catchingUp
  reader.catchingUp = null
  if (catchingUp !== null) await stopQuietly(catchingUp.own)
  if (consumer.readers.size === 0) {
    if (shared.get(consumer.key) === consumer) shared.delete(consumer.key)
    await stopQuietly(consumer.consumer)
    return
  }
  // Its connection may close once it has stopped: the consumer moves to another reader's.
  if (consumer.owner === reader) restart(consumer)
}

/** `reader` starts ahead of the shared consumer: the consumer starts again from there, the others catch up. */
const takeFront = (consumer: Shared, reader: Reader) => {
  consumer.position = reader.delivered
  for (const other of consumer.readers)
    if (other !== reader && other.delivered < consumer.position) catchUp(other, consumer.position)
  consumer.owner = reader
  restart(consumer)
}

/**
 * Follows `filter` of the log identified by `log` from `fromSeq`, on the process's one consumer of it,
 * opened with `open` when this reader is the first. Fails when the consumer cannot be opened.
 */
export const followShared = async (
  log: string,
  filter: string,
  fromSeq: number,
  onRecord: (record: LogRecord) => void,
  open: OpenConsumer,
  options: SharedFollowOptions = {},
): Promise<Subscription> => {
  const key = `${log}\u0000${filter}`
  const reader: Reader = {
    onRecord,
    onError:
      options.onError ??
      ((error) => {
        queueMicrotask(() => {
          throw error
        })
      }),
    open,
    delivered: Math.max(1, fromSeq) - 1,
    catchingUp: null,
  }
  let consumer = shared.get(key)
  if (consumer === undefined) {
    const created: Shared = {
      key,
      readers: new Set([reader]),
      position: reader.delivered,
      owner: reader,
      consumer: Promise.resolve(null),
      generation: 0,
    }
    shared.set(key, created)
    // The first opening is tried once: a log that cannot be read fails the follow, which its caller retries.
    created.consumer = openOn(created, reader)
    consumer = created
  } else {
    consumer.readers.add(reader)
    if (reader.delivered < consumer.position) catchUp(reader, consumer.position)
    else if (reader.delivered > consumer.position) takeFront(consumer, reader)
  }
  const joined = consumer
  const aborted = () => options.signal?.aborted === true
  try {
    // Whoever holds the consumer now, it serves this reader once it is open.
    for (let opened = joined.consumer; ; opened = joined.consumer) {
      await opened
      if (opened === joined.consumer) break
    }
    if (reader.catchingUp !== null) await reader.catchingUp.own
    if (aborted()) throw new Error("the follow was given up before it was read")
  } catch (error) {
    await leave(joined, reader)
    throw error
  }
  let stopped = false
  return {
    stop: async () => {
      if (stopped) return
      stopped = true
      await leave(joined, reader)
    },
  }
}

/** How many consumers the process shares now, and how many readers they serve (for tests and inspection). */
export const sharedConsumers = (): { readonly consumers: number; readonly readers: number } => {
  let readers = 0
  for (const consumer of shared.values()) readers += consumer.readers.size
  return { consumers: shared.size, readers }
}
