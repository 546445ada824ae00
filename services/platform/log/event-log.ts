/**
 * The event log: appends events to the WM_EVENTS stream and reads them back.
 *
 * Appends carry the event id as Nats-Msg-Id, so a retried append is stored
 * once, and may carry Nats-Expected-Last-Subject-Sequence, so a decision
 * about one entry is refused when another event touched the entry first.
 * Transient failures (timeouts, a broker restart, a cluster election) are
 * retried with the same id until the deadline. An event appended within a
 * sampled span keeps the span's `traceparent` as a header of its message,
 * beside the event (which is unchanged): an audit joins it to its trace.
 */
import {
  type ConsumerMessages,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JsMsg,
  type MsgRequest,
} from "@nats-io/jetstream"
import { errors } from "@nats-io/transport-node"
import { Context, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { type Decoded, decodeEvent } from "../../../contracts/decode.ts"
import { StorageFull, Unavailable } from "../../../contracts/errors.ts"
import type { MemoryEvent } from "../../../contracts/events.ts"
import { ALL_EVENTS, EVENTS_STREAM, eventSubject } from "../../../contracts/subjects.ts"
import { ContentForgotten, ContentKeys, type ContentKeysShape } from "../keys/content-keys.ts"
import { Nats } from "../nats/connection.ts"
import { NatsSettings } from "../nats/settings.ts"
import { ensureTopology } from "../nats/topology.ts"
import { eventTraceparent, headersOf, TRACEPARENT } from "../tracing/trace-context.ts"
import { decodedRecord } from "./decoded-records.ts"
import { followShared, type OpenedConsumer } from "./shared-follow.ts"

/** Another event reached the subject first: re-read and re-decide. */
export class SequenceConflict extends Schema.TaggedError<SequenceConflict>()("SequenceConflict", {
  subject: Schema.String,
  expected: Schema.Int,
  /** The subject's actual last sequence, as the server reported it (null when it did not say). */
  actual: Schema.NullOr(Schema.Int),
  reason: Schema.String,
}) {}

/** The server says "wrong last sequence: <n>". */
const actualLastSequence = (message: string): number | null => {
  const match = /wrong last sequence:?\s*(\d+)/i.exec(message)
  return match ? Number(match[1]) : null
}

export interface Appended {
  readonly seq: number
  readonly duplicate: boolean
}

export interface AppendOptions {
  /** The stream sequence of the last event on the event's subject (0: the subject must be empty). */
  readonly expectLastSubjectSeq?: number
}

/** One stored message, not yet decoded. */
export interface LogRecord {
  readonly seq: number
  readonly subject: string
  readonly data: Uint8Array
  /** Messages still to be delivered after this one, when the server says. */
  readonly pending: number
  /** The trace context the event was appended in, when it was (its message's `traceparent` header). */
  readonly traceparent?: string | undefined
}

export interface Subscription {
  readonly stop: () => Promise<void>
}

export interface FollowOptions {
  readonly filter?: string
  readonly fromSeq?: number
  /** Called synchronously for each record, in stream order. */
  readonly onRecord: (record: LogRecord) => void
}

export interface EventLogShape {
  readonly append: (
    event: MemoryEvent,
    options?: AppendOptions,
  ) => Effect.Effect<Appended, Unavailable | SequenceConflict | StorageFull>
  /** Reads from `fromSeq` (default 1) in order, then keeps following live appends until stopped. */
  readonly follow: (options: FollowOptions) => Effect.Effect<Subscription, Unavailable>
  /** The sequence of the last stored event (0 when empty). */
  readonly lastSeq: Effect.Effect<number, Unavailable>
  /** The last message stored on one subject (from the stream's leader), null when the subject holds none. */
  readonly lastOnSubject: (subject: string) => Effect.Effect<StoredOnSubject | null, Unavailable>
  /** The first message on one subject at or after `fromSeq` (from the stream's leader), null when there is none. */
  readonly nextOnSubject: (subject: string, fromSeq: number) => Effect.Effect<StoredOnSubject | null, Unavailable>
  /**
   * Decodes a record this log delivered or returned, its sealed content opened (keys/content-keys.ts);
   * content whose key is destroyed does not decode ("forgotten").
   */
  readonly decode: (data: Uint8Array) => Decoded
  /** Decodes a record this log delivered, as this process last decoded it when it did (decoded-records.ts). */
  readonly decodeRecord: (record: LogRecord) => Decoded
}

/** The last message on a subject, not yet decoded. */
export interface StoredOnSubject {
  readonly seq: number
  readonly data: Uint8Array
}

/**
 * JetStream error codes @nats-io/jetstream does not name, by the server's names for them
 * (nats-server's errors.json).
 */
const ServerErrorCodes = {
  /** JSClusterNotAvailErr: no JetStream leader for the stream yet (an election). */
  ClusterNotAvailable: 10008,
  /** JSInsufficientResourcesErr: the server's JetStream store (max_file_store, the disk) is full. */
  InsufficientResources: 10023,
  /** JSStreamStoreFailedF: the stream refused to store; with discard "new", its max_bytes or max_msgs is reached. */
  StreamStoreFailed: 10077,
} as const

/** A storage limit the write ran into, or null: permanent for this write, whatever the retries. */
const storageLimitOf = (error: unknown): string | null => {
  if (!(error instanceof JetStreamApiError)) return null
  if (error.code === ServerErrorCodes.InsufficientResources)
    return `the server's JetStream store is full (${error.message})`
  // The same code also reports other store failures; only the limits are storage exhaustion.
  if (error.code === ServerErrorCodes.StreamStoreFailed && /^maximum .* exceeded$/.test(error.message)) {
    return `the event stream's limit is reached (${error.message})`
  }
  return null
}

const textEncoder = new TextEncoder()

/** A failed publish attempt, before the retries are exhausted. */
class PublishFailed {
  readonly _tag = "PublishFailed"
  readonly reason: string
  readonly transient: boolean
  constructor(reason: string, transient: boolean) {
    this.reason = reason
    this.transient = transient
  }
}

const isTransient = (error: unknown): boolean => {
  // Refused by the broker's permissions: retrying cannot help.
  if (error instanceof errors.PermissionViolationError) return false
  // Refused by the client before sending, such as an event above the server's max_payload: the same again fails the same.
  if (error instanceof errors.InvalidArgumentError) return false
  if (error instanceof JetStreamApiError) {
    // 503 (no JetStream leader yet), 408 (timeout): an election or a restart; anything else is final.
    return error.status === 503 || error.status === 408 || error.code === ServerErrorCodes.ClusterNotAvailable
  }
  return true
}

export const appendRetryDeadline = Duration.seconds(30)
/** How long an append waits for the key store before it is answered Unavailable: under one SDK attempt (5 s). */
const SEAL_RETRY = Duration.seconds(3)

/**
 * A stream byte limit is refused on nats-server before 2.10: with discard new, 2.9 checks a write's
 * payload and headers against the limit but stores it with its subject and record overhead, and when
 * that passes the limit it deletes the oldest messages — the agents' registrations first.
 */
export const streamByteLimitProblem = (maxBytes: number | undefined, serverVersion: string | undefined) => {
  if (maxBytes === undefined || maxBytes <= 0 || serverVersion === undefined) return null
  const [major = 0, minor = 0] = serverVersion.split(".").map((n) => Number.parseInt(n, 10))
  if (major > 2 || (major === 2 && minor >= 10)) return null
  return (
    `WM_STREAM_MAX_BYTES needs nats-server 2.10 or later (this one is ${serverVersion}): 2.9 deletes the oldest ` +
    "events when a write lands just under the limit; unset it or upgrade the server"
  )
}

/**
 * Reads the log from `fromSeq` (default 1) in order with an ordered consumer, then keeps following live
 * appends until stopped; fails when the stream cannot be read (it may not exist yet). `EventLog.follow`
 * retries it; a reader without the EventLog (which creates the streams) calls it directly.
 */
export const followEvents = async (js: JetStreamClient, options: FollowOptions): Promise<OpenedConsumer> => {
  const consumer = await js.consumers.get(EVENTS_STREAM, {
    filter_subjects: options.filter ?? ALL_EVENTS,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: Math.max(1, options.fromSeq ?? 1),
  })
  const messages: ConsumerMessages = await consumer.consume({
    // After a broker restart the client re-checks the consumer, and on failure waits up to
    // `expires` (30 s by default) before trying again: keep that wait, and heartbeats, short.
    expires: 2_000,
    callback: (m: JsMsg) =>
      options.onRecord({
        seq: m.seq,
        subject: m.subject,
        data: m.data,
        pending: m.info.pending,
        traceparent: m.headers?.get(TRACEPARENT) || undefined,
      }),
  })
  return { stop: async () => void (await messages.close().catch(() => undefined)), closed: messages.closed() }
}

/**
 * Delivers records in stream order, each once the key its sealed content needs is loaded: a record that
 * needs one holds back the records after it until the key store has answered (retried while it cannot).
 */
export const deliverWithKeys = (
  keys: ContentKeysShape,
  deliver: (record: LogRecord) => void,
  onKeyStoreError: (error: unknown) => void,
): { readonly onRecord: (record: LogRecord) => void; readonly stop: () => void } => {
  const waiting: LogRecord[] = []
  let stopped = false
  // Each waiting record's key is asked for as it arrives, all at once; they are delivered in order.
  const loads = new Map<LogRecord, Promise<void>>()
  const loadOf = (record: LogRecord) => {
    let load = loads.get(record)
    if (load === undefined) {
      load = keys.load(record.data, record.subject)
      load.catch(() => undefined)
      loads.set(record, load)
    }
    return load
  }
  const drain = async () => {
    while (waiting.length > 0 && !stopped) {
      const next = waiting[0] as LogRecord
      try {
        await loadOf(next)
      } catch (error) {
        loads.delete(next)
        if (stopped) return
        onKeyStoreError(error)
        await new Promise((resolve) => setTimeout(resolve, 500))
        continue
      }
      if (stopped) return
      waiting.shift()
      loads.delete(next)
      deliver(next)
    }
  }
  return {
    onRecord: (record) => {
      if (stopped) return
      if (waiting.length === 0 && !keys.needsLoad(record.data, record.subject)) return deliver(record)
      waiting.push(record)
      void loadOf(record)
      if (waiting.length === 1) void drain()
    },
    // Once the reader stops, nothing more is delivered and no key is asked for again.
    stop: () => {
      stopped = true
      waiting.length = 0
      loads.clear()
    },
  }
}

export class EventLog extends Context.Service<EventLog, EventLogShape>()("wm/EventLog") {
  static readonly make = Effect.gen(function* () {
    const { nc, js, jsm } = yield* Nats
    const keys = yield* ContentKeys
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    const settings = yield* NatsSettings
    const byteLimitProblem = streamByteLimitProblem(settings.streamMaxBytes, nc.info?.version)
    if (byteLimitProblem !== null) return yield* Effect.die(new Error(byteLimitProblem))
    const created = yield* ensureTopology(jsm, settings).pipe(Effect.orDie)
    // The services of one process read one log through shared consumers (shared-follow.ts): a log is the
    // stream of one server (or cluster) created at one moment.
    const logIdentity = `${nc.info?.cluster ?? nc.info?.server_id ?? settings.servers.join(",")}/${created}`

    /** The event as it is stored: its content sealed under its key, once, before any attempt. */
    const sealed = (event: MemoryEvent, options: AppendOptions | undefined) =>
      Effect.tryPromise({
        try: () => keys.seal(event),
        catch: (error): Unavailable | SequenceConflict | StorageFull => {
          if (error instanceof ContentForgotten)
            return new SequenceConflict({
              subject: eventSubject(event),
              expected: options?.expectLastSubjectSeq ?? -1,
              actual: null,
              reason: error.message,
            })
          // The key is stored before the event: a full store refuses it first.
          const limit = error instanceof Error ? storageLimitOf(error.cause) : null
          if (limit !== null) return new StorageFull({ limit })
          return new Unavailable({ reason: String(error instanceof Error ? error.message : error) })
        },
      }).pipe(
        // A key store that stays out of reach is answered as Unavailable within one of the caller's attempts.
        Effect.retry({
          schedule: Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: SEAL_RETRY })),
          while: (error) => error._tag === "Unavailable",
        }),
      )

    const publish = (
      event: MemoryEvent,
      stored: unknown,
      options: AppendOptions | undefined,
      traceparent: string | undefined,
      onSent: () => void,
    ): Effect.Effect<Appended, Unavailable | SequenceConflict | StorageFull> => {
      const subject = eventSubject(event)
      const payload = textEncoder.encode(JSON.stringify(stored))
      return Effect.tryPromise({
        try: () => {
          const acknowledged = js.publish(subject, payload, {
            msgID: event.eventId,
            timeout: 5_000,
            ...(traceparent !== undefined ? { headers: headersOf(traceparent) } : {}),
            ...(options?.expectLastSubjectSeq !== undefined
              ? { expect: { lastSubjectSequence: options.expectLastSubjectSeq } }
              : {}),
          })
          onSent()
          return acknowledged
        },
        catch: (error) => {
          if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence) {
            return new SequenceConflict({
              subject,
              expected: options?.expectLastSubjectSeq ?? -1,
              actual: actualLastSequence(error.message),
              reason: error.message,
            })
          }
          // Reported with status 503 like an election, but no retry frees space: refuse at once.
          const limit = storageLimitOf(error)
          if (limit !== null) return new StorageFull({ limit })
          return new PublishFailed(error instanceof Error ? error.message : String(error), isTransient(error))
        },
      }).pipe(
        Effect.retry({
          // Back off from 50 ms to at most 1 s between attempts, for up to 30 s.
          schedule: Schedule.min([Schedule.exponential("50 millis", 1.5), Schedule.spaced("1 second")]).pipe(
            Schedule.upTo({ duration: appendRetryDeadline }),
          ),
          while: (error: PublishFailed | SequenceConflict | StorageFull) =>
            error instanceof PublishFailed && error.transient,
        }),
        Effect.mapError((error) =>
          error instanceof PublishFailed ? new Unavailable({ reason: error.reason }) : error,
        ),
        Effect.map((ack): Appended => ({ seq: ack.seq, duplicate: ack.duplicate })),
      )
    }

    /**
     * An agent's appends are sent in the order they were asked for, as they were before sealing made each
     * wait for its key: a pipelined batch stays in its order in the log. Agents do not wait on each other.
     */
    const turns = new Map<string, Promise<void>>()
    const takeTurn = (agentId: string) => {
      const before = turns.get(agentId) ?? Promise.resolve()
      let done: () => void = () => undefined
      const mine = new Promise<void>((resolve) => {
        done = resolve
      })
      turns.set(agentId, mine)
      const release = () => {
        done()
        if (turns.get(agentId) === mine) turns.delete(agentId)
      }
      return { before, release }
    }

    const append = (event: MemoryEvent, options?: AppendOptions) =>
      Effect.suspend(() => {
        const turn = takeTurn(event.agentId)
        return Effect.flatMap(eventTraceparent, (traceparent) =>
          Effect.flatMap(sealed(event, options), (stored) =>
            Effect.flatMap(
              Effect.promise(() => turn.before),
              () => publish(event, stored, options, traceparent, turn.release),
            ),
          ),
        ).pipe(Effect.ensuring(Effect.sync(turn.release)))
      })

    const follow = (options: FollowOptions) =>
      Effect.tryPromise({
        try: async (signal) => {
          const delivery = deliverWithKeys(keys, options.onRecord, (error) =>
            runFork(Effect.logWarning("cannot load a content key; trying again:", error)),
          )
          const filter = options.filter ?? ALL_EVENTS
          const subscription = await followShared(
            logIdentity,
            filter,
            options.fromSeq ?? 1,
            delivery.onRecord,
            (fromSeq, onRecord) => followEvents(js, { filter, fromSeq, onRecord }),
            {
              // Given up while it was being opened (its reader interrupted): it leaves, and nothing is left reading.
              signal,
              onError: (error) => runFork(Effect.logError(`a reader of ${filter} failed on a record:`, error)),
            },
          ).catch((error: unknown) => {
            delivery.stop()
            throw error
          })
          return {
            stop: async () => {
              delivery.stop()
              await subscription.stop()
            },
          }
        },
        catch: (error) => new Unavailable({ reason: `cannot read the event log: ${String(error)}` }),
      }).pipe(
        // Creating a consumer right after a failover can time out: try again.
        Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo({ duration: "60 seconds" }))),
      )

    const lastSeq = Effect.tryPromise({
      try: async () => (await jsm.streams.info(EVENTS_STREAM)).state.last_seq,
      catch: (error) => new Unavailable({ reason: String(error) }),
    }).pipe(Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))))

    const getOnSubject = (subject: string, query: MsgRequest) =>
      Effect.tryPromise({
        try: async () => {
          const stored = await jsm.streams.getMessage(EVENTS_STREAM, query)
          if (stored === null) return null
          await keys.load(stored.data, stored.subject)
          return { seq: stored.seq, data: stored.data }
        },
        catch: (error) => new Unavailable({ reason: `cannot read '${subject}': ${String(error)}` }),
      }).pipe(Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "10 seconds" }))))
    const lastOnSubject = (subject: string) => getOnSubject(subject, { last_by_subj: subject })
    // The server's message get takes `next_by_subj` with `seq` (nats-server 2.9+); the client's type omits it.
    const nextOnSubject = (subject: string, fromSeq: number) =>
      getOnSubject(subject, { seq: fromSeq, next_by_subj: subject } as unknown as MsgRequest)

    const decode = (data: Uint8Array) => decodeEvent(data, keys.unseal)
    const decodeRecord = (record: LogRecord) =>
      decodedRecord(record.seq, record.data, (data) => keys.heldKeyOf(data, record.subject), decode)

    return { append, follow, lastSeq, lastOnSubject, nextOnSubject, decode, decodeRecord } satisfies EventLogShape
  })

  /** The log and the content keys it seals and opens with (ContentKeys, for readers beside it). */
  static readonly layer = Layer.effect(EventLog, EventLog.make).pipe(Layer.provideMerge(ContentKeys.layer))
}
