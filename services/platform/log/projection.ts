/**
 * Runs a projection: follows the event log from a position, decodes each
 * record, hands decoded events to `apply` in stream order, and sends records
 * it cannot decode to the dead-letter subject `wm.dlq.<name>` with the
 * reason, then keeps going.
 *
 * A record of a schema version newer than this code reads is not skipped:
 * the projection stops just before it (`FutureEventVersion`, logged), its
 * position (and so any checkpoint taken from it) never passes the record,
 * and every read that needs a later position is refused with NotCaughtUp.
 * Met during warm-up, the service does not start. An upgraded replica
 * reads on from the same position.
 *
 * `apply` is synchronous and deterministic; the runner tracks the last
 * applied sequence so readers can wait to see their own writes. An event
 * appended in a trace is applied, once warmed up, in a consumer span
 * (`wm.apply.<name>`) that is a child of the span that appended it.
 */
import type { JetStreamClient } from "@nats-io/jetstream"
import { Clock, Deferred, type Duration, Effect } from "effect"
import type { FutureEventVersion } from "../../../contracts/decode.ts"
import type { NotCaughtUp } from "../../../contracts/errors.ts"
import type { MemoryEvent } from "../../../contracts/events.ts"
import { deadLetterSubject } from "../../../contracts/subjects.ts"
import { Nats } from "../nats/connection.ts"
import { parentOfTraceparent } from "../tracing/trace-context.ts"
import { EventLog, type LogRecord } from "./event-log.ts"
import { makeSequenceGate } from "./sequence-gate.ts"

export interface DeadLetter {
  readonly projection: string
  readonly seq: number
  readonly subject: string
  readonly reason: string
  readonly payload: string
}

export interface WarmUp {
  /** Events in the log when the projection started. */
  readonly events: number
  readonly millis: number
}

/**
 * How long a read waits for its `afterSeq` before answering NotCaughtUp. Shorter than one
 * attempt of the SDK (5 s by default), so the caller gets the typed answer, not a timeout.
 */
export const READ_WAIT: Duration.Input = "3 seconds"

export interface ProjectionOptions {
  readonly name: string
  /** Must cover every sequence a reader may wait for; the whole log by default. */
  readonly filter?: string
  readonly fromSeq?: number
  /** The sequence warm-up must reach (default: the log's last); a filtered projection passes its filter's last. */
  readonly target?: number
  readonly apply: (event: MemoryEvent, record: LogRecord) => void
  /** Called after a record is dead-lettered (the sequence still counts as applied). */
  readonly onDeadLetter?: (letter: DeadLetter) => void
}

export interface Projection {
  readonly appliedSeq: () => number
  /** Waits until `seq` has been applied; fails with NotCaughtUp after the timeout (READ_WAIT by default). */
  readonly waitFor: (seq: number, timeout?: Duration.Input) => Effect.Effect<void, NotCaughtUp>
  /** Completes once the log as it stood at start has been applied. */
  readonly warmedUp: Effect.Effect<WarmUp>
  /** Why the projection stopped, when it met an event newer than it reads. */
  readonly halted: () => Halt | null
  /**
   * Records of its filter it has not applied: those the server held after the last one delivered, as it
   * said then, and after a halt every record since the one it stopped at.
   */
  readonly behind: () => number
}

export interface Halt {
  readonly seq: number
  readonly subject: string
  readonly error: FutureEventVersion
}

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder("utf-8", { fatal: false })

/**
 * Stores a dead letter (once per projection and sequence: the message id dedupes a retry). Anything a
 * projection gives up on goes here, so an operator sees it and a forget of its agent erases it.
 */
export const publishDeadLetter = (js: JetStreamClient, letter: DeadLetter): Promise<unknown> =>
  js.publish(deadLetterSubject(letter.projection), textEncoder.encode(JSON.stringify(letter)), {
    msgID: `${letter.projection}:${letter.seq}`,
  })

export const runProjection = (options: ProjectionOptions) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const { js } = yield* Nats
    // Records arrive in callbacks: what they log goes through this service's logger.
    const runSync = Effect.runSyncWith(yield* Effect.context<never>())
    const clock = yield* Clock.Clock
    const startedAt = clock.currentTimeMillisUnsafe()
    const target = options.target ?? (yield* log.lastSeq)
    const warm = yield* Deferred.make<WarmUp>()
    let halt: Halt | null = null
    let pendingAfterLast = 0
    let passedOver = 0
    const applied = makeSequenceGate(Math.max(0, (options.fromSeq ?? 1) - 1))

    const markWarm = () =>
      Deferred.doneUnsafe(warm, Effect.succeed({ events: target, millis: clock.currentTimeMillisUnsafe() - startedAt }))
    if (applied.current() >= target) markWarm()

    const deadLetter = (record: LogRecord, reason: string) => {
      const letter: DeadLetter = {
        projection: options.name,
        seq: record.seq,
        subject: record.subject,
        reason,
        payload: textDecoder.decode(record.data),
      }
      publishDeadLetter(js, letter).catch((error: unknown) =>
        runSync(Effect.logError(`[${options.name}] dead letter ${record.seq} not stored:`, error)),
      )
      options.onDeadLetter?.(letter)
    }

    const stopAt = (record: LogRecord, error: FutureEventVersion) => {
      halt = { seq: record.seq, subject: record.subject, error }
      runSync(
        Effect.logError(`[${options.name}] stopped before seq ${record.seq} (${record.subject}): ${error.message}`),
      )
      applied.close()
      // Met during warm-up: the service must not start on a log it cannot read to the end.
      Deferred.doneUnsafe(warm, Effect.die(error))
    }

    const applyRecord = (event: MemoryEvent, record: LogRecord) => {
      try {
        options.apply(event, record)
      } catch (error) {
        deadLetter(record, `apply failed: ${error instanceof Error ? error.message : String(error)}`)
      }
    }

    const onRecord = (record: LogRecord) => {
      if (record.seq <= applied.current()) return
      pendingAfterLast = record.pending
      if (halt !== null) {
        if (record.seq > halt.seq) passedOver++
        return
      }
      const decoded = log.decodeRecord(record)
      if (!decoded.ok && decoded.future !== undefined) return stopAt(record, decoded.future)
      if (decoded.ok) {
        const event = decoded.event
        // Replaying the log at start is no part of the requests that appended it: no span then.
        const parent = record.seq > target ? parentOfTraceparent(record.traceparent) : undefined
        if (parent === undefined) applyRecord(event, record)
        else
          runSync(
            Effect.withSpan(
              Effect.sync(() => applyRecord(event, record)),
              `wm.apply.${options.name}`,
              {
                parent,
                sampled: parent.sampled,
                kind: "consumer",
                attributes: { "wm.event": event._tag, "wm.seq": record.seq, "wm.agent_id": event.agentId },
              },
            ),
          )
      } else {
        deadLetter(record, decoded.reason)
      }
      applied.advanceTo(record.seq)
      if (record.seq >= target) markWarm()
    }

    const subscription = yield* log.follow({
      ...(options.filter !== undefined ? { filter: options.filter } : {}),
      fromSeq: applied.current() + 1,
      onRecord,
    })
    yield* Effect.addFinalizer(() => Effect.promise(() => subscription.stop()))

    return {
      appliedSeq: applied.current,
      waitFor: (seq: number, timeout: Duration.Input = READ_WAIT): Effect.Effect<void, NotCaughtUp> =>
        applied.awaitSeq(seq, timeout),
      warmedUp: Deferred.await(warm),
      halted: () => halt,
      behind: () => pendingAfterLast + (halt === null ? 0 : 1 + passedOver),
    } satisfies Projection
  })
