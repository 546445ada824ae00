/**
 * One way every service writes an event that depends on an agent's state:
 *
 *   1. a request with a request id is first looked up in the request ledger:
 *      a retry of any age is answered as the first attempt was, and writes
 *      nothing; a copy arriving while the first is still being answered in
 *      this process waits for that answer;
 *   2. the decider runs on the service's view of the agent, and on what the
 *      log says of the entries the view does not hold natively (long-term,
 *      cues, forgotten: the view does not carry them), read at decision time;
 *   3. the event is appended with Nats-Expected-Last-Subject-Sequence on its
 *      subject (configuration, step or entry) at the position the view had,
 *      or, for an entry the view does not hold natively, at the last
 *      sequence read on the entry's subject once the view has applied it;
 *   4. when another write reached that subject first, the view catches up
 *      with it and the decider runs again (bounded): of two racing writes one
 *      wins, and the other is decided again on the winner's outcome — a
 *      typed refusal or a decision that still holds, never an overwrite;
 *   5. the answer is settled in the ledger before the reply leaves.
 *
 * Modelled on the decide/evolve command handlers of event-sourcing libraries
 * (emmett's handleCommand), with the agent's view as the state.
 */
import { Clock, Deferred, type Duration, Effect, Semaphore } from "effect"
import { type ApiError, IdempotencyConflict, type NotCaughtUp, Unavailable } from "../../../contracts/errors.ts"
import { entryIdOf, type MemoryEvent } from "../../../contracts/events.ts"
import { agentEvents, entrySubject } from "../../../contracts/subjects.ts"
import { type AgentView, expectedSeqOf } from "../../../domain/agent-view.ts"
import type { Decision } from "../../../domain/decision.ts"
import { type EntryFact, type EntryFacts, NO_ENTRY_FACTS } from "../../../domain/entry-standing.ts"
import { ledgerKey, type PendingRequest, requestBody, sameRequestBody } from "../../../domain/requests.ts"
import { readEntryFact, readEntryFacts } from "./entry-facts.ts"
import { EventLog, type SequenceConflict } from "./event-log.ts"
import { catchUpWithLog, knownView, type WaitableViews } from "./known-view.ts"
import { openRequestLedger } from "./request-ledger.ts"

/** Where the handler reads the agent's state: a projection of the log that can be waited for. */
export interface ViewSource extends WaitableViews {
  /**
   * Waits until the views have applied the record at `seq`, one of the agent's own events (appended here,
   * or read on one of its subjects): reaching it is the proof, with no question to the stream leader.
   */
  readonly waitForRecord: (seq: number, agentId: string, timeout?: Duration.Input) => Effect.Effect<void, NotCaughtUp>
  /** Where these views last saw an entry's subject, when they remember it (subject-positions.ts). */
  readonly lastSeqOnSubject?: (subject: string) => number | undefined
}

export interface Outcome<D> {
  readonly view: AgentView
  readonly decided: D
  /** The stored event's sequence (the view's position when nothing was recorded). */
  readonly seq: number
  /** True when nothing new was stored: the decision recorded nothing, or the log already had this event. */
  readonly duplicate: boolean
  /** True when the decision recorded an event (now or, for a duplicate, earlier). */
  readonly recorded: boolean
}

/** How a request is kept in the request ledger. */
export interface LedgerRequest<A> {
  readonly agentId: string
  /** The operation's name: with the request id, the ledger key. */
  readonly operation: string
  readonly requestId: string
  /** The request as received: a retry must repeat it. */
  readonly request?: object
  /** The id of the event the request produces (derived from its request id). */
  readonly eventId?: string
  /** The subject that event goes to: where a lost attempt's event is looked for. */
  readonly subject?: string
  /** What the ledger keeps of the reply (default: all of it). It must hold no entry content. */
  readonly stored?: (reply: A) => unknown
  /** The reply of a retry, from what the ledger kept (default: the kept reply, `duplicate: true` where the reply has it). */
  readonly replay?: (stored: unknown, view: AgentView) => A
  /** The reply of a retry whose first attempt stored its event and died before settling it. */
  readonly fromEvent?: (event: MemoryEvent, seq: number, view: AgentView) => A
}

export interface Command<D, A> extends Omit<LedgerRequest<A>, "requestId"> {
  /** A write without a request id cannot be retried, and is not kept in the ledger. */
  readonly requestId?: string | undefined
  /**
   * The entries the decision needs the log's word on (ones the view does not
   * hold natively): their subjects' last events are read before each attempt
   * and passed to `decide`.
   */
  readonly lookUp?: (view: AgentView) => Iterable<string>
  readonly decide: (view: AgentView, known: EntryFacts) => Decision<D>
  /** The event a decision records, if any (default: the decision itself). */
  readonly eventOf?: (decided: D) => MemoryEvent | null
  readonly reply: (outcome: Outcome<D>) => A
}

/** Whether a view has applied the event a fact read from the log follows from (a record that does not decode has nothing to apply). */
const viewHas = (view: AgentView, fact: EntryFact): boolean => fact.standingSeq <= view.lastSeq

/** Decisions retaken after losing a race; beyond, the request is Unavailable (nothing stored, safe to retry). */
export const MAX_DECISION_ATTEMPTS = 8
/**
 * A reservation older than this whose event is not in the log is taken over
 * (its attempt died before storing anything). Should that attempt still be
 * appending, both carry the same event id, and JetStream stores it once as
 * long as the dedupe window is longer than an append's retries.
 */
export const TAKE_OVER_AFTER_MS = 5_000

const markDuplicate = (reply: unknown): unknown =>
  reply !== null && typeof reply === "object" && "duplicate" in reply ? { ...reply, duplicate: true } : reply

export const makeCommandHandler = (views: ViewSource) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const ledger = yield* openRequestLedger

    const { waitForRecord } = views

    /** Catches the views up with one of the agent's records, or (null) with the log's end; never fails. */
    const catchUpTo = (agentId: string, seq: number | null) =>
      (seq === null
        ? Effect.flatMap(log.lastSeq, (last) => views.waitFor(last, "5 seconds", agentId))
        : waitForRecord(seq, agentId, "5 seconds")
      ).pipe(Effect.catch(() => Effect.void))

    const viewOf = (agentId: string) => knownView(views, log, agentId)

    /**
     * Writes to one subject from this process take turns, so they do not lose
     * races to each other (one round trip each instead of a conflict storm);
     * writes from other processes are still ordered by the expected sequence.
     */
    const turns = new Map<string, { readonly lock: Semaphore.Semaphore; waiting: number }>()
    const inTurn = <X, E>(subject: string | undefined, effect: Effect.Effect<X, E>): Effect.Effect<X, E> => {
      if (subject === undefined) return effect
      return Effect.suspend(() => {
        let turn = turns.get(subject)
        if (turn === undefined) {
          turn = { lock: Semaphore.makeUnsafe(1), waiting: 0 }
          turns.set(subject, turn)
        }
        turn.waiting++
        const current = turn
        return current.lock
          .withPermits(1)(effect)
          .pipe(
            Effect.ensuring(
              Effect.sync(() => {
                if (--current.waiting === 0) turns.delete(subject)
              }),
            ),
          )
      })
    }

    /** Steps 2–4: decide, append with the expected sequence, re-decide after a lost race. */
    const decideAndAppend = <D, A>(command: Command<D, A>): Effect.Effect<Outcome<D>, ApiError> =>
      inTurn(command.subject, decideAndAppendNow(command))

    const decideAndAppendNow = <D, A>(command: Command<D, A>): Effect.Effect<Outcome<D>, ApiError> =>
      Effect.gen(function* () {
        const eventOf = command.eventOf ?? ((d: D) => d as unknown as MemoryEvent | null)
        let caughtUpAfterRefusal = false
        for (let attempt = 1; attempt <= MAX_DECISION_ATTEMPTS; attempt++) {
          let view = yield* viewOf(command.agentId)
          const lookedUp = command.lookUp ? [...command.lookUp(view)] : []
          const known = lookedUp.length > 0 ? yield* readEntryFacts(log, command.agentId, lookedUp) : NO_ENTRY_FACTS
          // Facts and view must agree: the view decides once it has applied what the log says of those entries.
          const behind = [...known.values()].filter((fact) => !viewHas(view, fact))
          if (behind.length > 0) {
            yield* catchUpTo(command.agentId, Math.max(...behind.map((fact) => fact.standingSeq)))
            view = yield* viewOf(command.agentId)
          }
          const decision = command.decide(view, known)
          if (!decision.ok) {
            // A refusal a lagging view could explain is retaken once, on the log's end; views that cannot get there
            // now answer NotCaughtUp (asked again by the SDKs), never a refusal the log may not bear out.
            if (decision.error._tag === "ValidationError" || caughtUpAfterRefusal)
              return yield* Effect.fail(decision.error)
            caughtUpAfterRefusal = true
            yield* catchUpWithLog(views, log, command.agentId)
            continue
          }
          const event = eventOf(decision.event)
          if (event === null)
            return { view, decided: decision.event, seq: view.lastSeq, duplicate: true, recorded: false }
          let expected = expectedSeqOf(view, event)
          if (expected === null) {
            // An entry the view does not hold natively: its subject's position is the log's, as these views last
            // saw it on a first attempt (the append checks it), else as read from the log.
            const entryId = entryIdOf(event)!
            const remembered =
              attempt === 1 && !known.has(entryId)
                ? views.lastSeqOnSubject?.(entrySubject(command.agentId, entryId))
                : undefined
            // The view decides on what it has applied: a position it has not reached yet is read from the log.
            if (remembered !== undefined && remembered <= view.lastSeq) expected = remembered
            else {
              const fact = known.get(entryId) ?? (yield* readEntryFact(log, command.agentId, entryId))
              if (!viewHas(view, fact)) {
                // The subject moved on past the view, as a lost race would say: catch up and decide again.
                yield* catchUpTo(command.agentId, fact.standingSeq)
                continue
              }
              expected = fact.subjectSeq
            }
          }
          const appended = yield* log
            .append(event, { expectLastSubjectSeq: expected })
            .pipe(
              Effect.catchTag("SequenceConflict", (conflict: SequenceConflict) =>
                Effect.as(catchUpTo(command.agentId, conflict.actual), null),
              ),
            )
          if (appended !== null) {
            // The next write in turn decides on a view that has this one.
            if (command.subject !== undefined)
              yield* waitForRecord(appended.seq, command.agentId, "1 second").pipe(Effect.catch(() => Effect.void))
            return { view, decided: decision.event, seq: appended.seq, duplicate: appended.duplicate, recorded: true }
          }
        }
        return yield* Effect.fail(
          new Unavailable({
            reason: `other writes to agent '${command.agentId}' kept winning the race; nothing was stored, retry with the same requestId`,
          }),
        )
      })

    /** Requests being answered in this process, by ledger key. */
    const inFlight = new Map<string, { readonly body: string; readonly reply: Deferred.Deferred<unknown, ApiError> }>()
    const conflictOf = (request: { readonly requestId: string; readonly operation: string }) =>
      new IdempotencyConflict({
        field: "requestId",
        reason: `'${request.requestId}' was already used for a different ${request.operation} request`,
      })

    /**
     * Runs a request once per request id: a retry of any age is answered
     * from the ledger (or, when the first attempt died after storing its
     * event, from that event), and `run` is not run again.
     */
    const once = <A>(
      request: LedgerRequest<A>,
      run: Effect.Effect<{ readonly reply: A; readonly recorded: boolean; readonly seq: number }, ApiError>,
    ): Effect.Effect<A, ApiError> =>
      Effect.gen(function* () {
        const first = yield* viewOf(request.agentId)
        const key = ledgerKey(request.agentId, first.registeredSeq, request.operation, request.requestId)
        const body = requestBody(request.request ?? {})
        // A copy sent while the first is still being answered here waits for that answer (an impatient
        // client, a client retry after a timeout): the ledger alone would only say "still being processed".
        const running = inFlight.get(key)
        if (running !== undefined) {
          if (running.body !== body) return yield* Effect.fail(conflictOf(request))
          return markDuplicate(yield* Deferred.await(running.reply)) as A
        }
        const answer = Deferred.makeUnsafe<unknown, ApiError>()
        inFlight.set(key, { body, reply: answer })
        return yield* firstAnswer(request, run, first, key, body).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              inFlight.delete(key)
              Deferred.doneUnsafe(answer, exit)
            }),
          ),
        )
      })

    /** The ledger's part of `once`: reserve the request, or answer it as its first attempt was. */
    const firstAnswer = <A>(
      request: LedgerRequest<A>,
      run: Effect.Effect<{ readonly reply: A; readonly recorded: boolean; readonly seq: number }, ApiError>,
      first: AgentView,
      key: string,
      body: string,
    ): Effect.Effect<A, ApiError> =>
      Effect.gen(function* () {
        const pending: PendingRequest = {
          state: "pending",
          operation: request.operation,
          body,
          eventId: request.eventId ?? "",
          subject: request.subject ?? agentEvents(request.agentId),
          afterSeq: first.lastSeq,
          at: yield* Clock.currentTimeMillis,
        }
        const settle = (seq: number, reply: A) =>
          ledger.settle(key, {
            state: "done",
            operation: request.operation,
            body,
            seq,
            reply: request.stored ? request.stored(reply) : reply,
          })
        const reservation = yield* ledger.reserve(key, pending)
        if (reservation._tag !== "Reserved") {
          if (!sameRequestBody(reservation.record.body, request.request ?? {}))
            return yield* Effect.fail(conflictOf(request))
          if (reservation._tag === "Settled") {
            const stored = reservation.record.reply
            return request.replay
              ? request.replay(stored, yield* viewOf(request.agentId))
              : (markDuplicate(stored) as A)
          }
          // An earlier attempt reserved the request and has not answered: still in flight, or dead.
          const lost = reservation.record
          const found = lost.eventId === "" ? null : yield* ledger.findEvent(lost.subject, lost.afterSeq, lost.eventId)
          if (found !== null) {
            if (request.fromEvent === undefined) {
              return yield* Effect.fail(
                new Unavailable({ reason: `request '${request.requestId}' was stored but its answer was lost` }),
              )
            }
            yield* waitForRecord(found.seq, request.agentId, "5 seconds").pipe(Effect.catch(() => Effect.void))
            const reply = request.fromEvent(found.event, found.seq, yield* viewOf(request.agentId))
            yield* settle(found.seq, reply)
            return reply
          }
          if ((yield* Clock.currentTimeMillis) - lost.at < TAKE_OVER_AFTER_MS) {
            return yield* Effect.fail(
              new Unavailable({
                reason: `request '${request.requestId}' is still being processed; retry with the same requestId`,
              }),
            )
          }
          yield* ledger.takeOver(key, pending, reservation.revision)
        }
        const outcome = yield* run.pipe(Effect.tapError(() => ledger.release(key)))
        // Nothing recorded: a later retry decides again.
        yield* outcome.recorded ? settle(outcome.seq, outcome.reply) : ledger.release(key)
        return outcome.reply
      })

    /** The whole command: through the ledger when the request can be retried. */
    const handle = <D, A>(command: Command<D, A>): Effect.Effect<A, ApiError> => {
      const run = Effect.map(decideAndAppend(command), (outcome) => ({
        reply: command.reply(outcome),
        recorded: outcome.recorded,
        seq: outcome.seq,
      }))
      return command.requestId === undefined
        ? Effect.map(run, (r) => r.reply)
        : once({ ...command, requestId: command.requestId }, run)
    }

    /**
     * For writes that are exactly-once by their subject (a registration): the
     * answer a request id was first given, and recording it.
     */
    const answered = (agentId: string, registeredSeq: number, operation: string, requestId: string, request: object) =>
      Effect.gen(function* () {
        const record = yield* ledger.settled(ledgerKey(agentId, registeredSeq, operation, requestId))
        if (record === null) return null
        if (!sameRequestBody(record.body, request)) return yield* Effect.fail(conflictOf({ requestId, operation }))
        return { reply: record.reply }
      })
    const answer = (
      agentId: string,
      registeredSeq: number,
      operation: string,
      requestId: string,
      request: object,
      seq: number,
      reply: unknown,
    ) =>
      ledger.settle(ledgerKey(agentId, registeredSeq, operation, requestId), {
        state: "done",
        operation,
        body: requestBody(request),
        seq,
        reply,
      })

    return { handle, once, decideAndAppend, answered, answer }
  })

export type CommandHandler = Effect.Success<ReturnType<typeof makeCommandHandler>>
