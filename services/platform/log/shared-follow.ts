/**
 * One consumer per part of the log a process reads. Every reader of the same filter in one process (the
 * services of the one-process system, replicas run side by side) is handed the records of one ordered
 * consumer, in stream order, instead of each having the server send it its own copy: the server delivers,
 * and the process parses, each record once, and one consumer's pulls and heartbeats stand for all of them.
 *
 * A reader that starts behind the shared consumer reads on its own consumer until it reaches the record the
 * shared one had delivered when it joined (or the end of the log), the records the shared one delivers
 * meanwhile kept for it, then reads on from the shared one; a reader that starts ahead skips what it does
 * not need. No reader is handed a record twice or misses one.
 *
 * The consumer runs on the connection of one of its readers (each service has its own): when that reader
 * stops while others read on, it is opened again on another's, from the record after the last it delivered.
 */
import type { LogRecord, Subscription } from "./event-log.ts"

/** Opens an ordered consumer on one reader's connection, from `fromSeq`, handing each record to `onRecord`. */
export type OpenConsumer = (fromSeq: number, onRecord: (record: LogRecord) => void) => Promise<Subscription>

interface CatchingUp {
  readonly own: Promise<Subscription>
  /** The shared consumer's records since the reader joined, not yet handed to it. */
  kept: LogRecord[]
  /** The reader reads on from the shared consumer once its own has delivered this record. */
  joinsAfter: number
}

interface Reader {
  readonly onRecord: (record: LogRecord) => void
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
  consumer: Promise<Subscription>
}

/**
 * Records kept for a reader catching up; past it they are let go and the reader joins later, after the
 * record the shared consumer delivers then.
 */
const KEPT_WHILE_CATCHING_UP = 10_000
const REOPEN_DELAY_MS = 500

const shared = new Map<string, Shared>()

const stopQuietly = async (subscription: Promise<Subscription>) => {
  try {
    await (await subscription).stop()
  } catch {
    // A consumer that did not open, or whose connection is gone, has nothing to stop.
  }
}

const handTo = (reader: Reader, record: LogRecord) => {
  if (record.seq <= reader.delivered) return
  reader.delivered = record.seq
  reader.onRecord(record)
}

const dispatch = (consumer: Shared, record: LogRecord) => {
  if (record.seq <= consumer.position) return
  consumer.position = record.seq
  let failure: { readonly error: unknown } | undefined
  for (const reader of consumer.readers) {
    const catchingUp = reader.catchingUp
    if (catchingUp !== null) {
      if (catchingUp.kept.length < KEPT_WHILE_CATCHING_UP) catchingUp.kept.push(record)
      else {
        catchingUp.kept = []
        catchingUp.joinsAfter = record.seq
      }
      continue
    }
    // One reader failing does not keep the record from the others.
    try {
      handTo(reader, record)
    } catch (error) {
      failure ??= { error }
    }
  }
  if (failure !== undefined) throw failure.error
}

const join = (reader: Reader, catchingUp: CatchingUp) => {
  reader.catchingUp = null
  void stopQuietly(catchingUp.own)
  for (const record of catchingUp.kept) handTo(reader, record)
}

const catchUp = (consumer: Shared, reader: Reader) => {
  const catchingUp: CatchingUp = {
    kept: [],
    joinsAfter: consumer.position,
    own: reader.open(reader.delivered + 1, (record) => {
      if (reader.catchingUp !== catchingUp) return
      handTo(reader, record)
      // Every record after this one is kept or still to come from the shared consumer.
      if (record.seq >= catchingUp.joinsAfter || record.pending === 0) join(reader, catchingUp)
    }),
  }
  reader.catchingUp = catchingUp
  return catchingUp
}

/** Opens the shared consumer on `owner`'s connection after its last record, trying again while it stays owner. */
const openOn = async (consumer: Shared, owner: Reader): Promise<Subscription> => {
  for (;;) {
    if (consumer.owner !== owner || !consumer.readers.has(owner)) return { stop: async () => undefined }
    try {
      return await owner.open(consumer.position + 1, (record) => dispatch(consumer, record))
    } catch {
      await new Promise((resolve) => setTimeout(resolve, REOPEN_DELAY_MS))
    }
  }
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
  if (consumer.owner !== reader) return
  // Its connection may close once it has stopped: the consumer moves to another reader's.
  const [next] = consumer.readers as Set<Reader>
  const previous = consumer.consumer
  consumer.owner = next!
  consumer.consumer = stopQuietly(previous).then(() => openOn(consumer, next!))
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
): Promise<Subscription> => {
  const key = `${log}\u0000${filter}`
  const reader: Reader = { onRecord, open, delivered: Math.max(1, fromSeq) - 1, catchingUp: null }
  let consumer = shared.get(key)
  if (consumer === undefined) {
    const created: Shared = {
      key,
      readers: new Set([reader]),
      position: reader.delivered,
      owner: reader,
      consumer: open(reader.delivered + 1, (record) => dispatch(created, record)),
    }
    shared.set(key, created)
    consumer = created
  } else {
    consumer.readers.add(reader)
    if (reader.delivered < consumer.position) catchUp(consumer, reader)
  }
  try {
    await consumer.consumer
    if (reader.catchingUp !== null) await reader.catchingUp.own
  } catch (error) {
    await leave(consumer, reader)
    throw error
  }
  const joined = consumer
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
