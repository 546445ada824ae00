/**
 * The gateway: validates every write request, stamps ids and times, counts
 * tokens once, and appends the resulting event to the log. Its replicas
 * divide the partitions by lease, as the working service's do; each decides
 * against its projection of its own partitions' views; when that says no
 * (unknown agent, no open step...), it first catches up with the log and
 * decides again, so a write that just landed through another instance is
 * never refused. Every write goes through the command handler: guarded by
 * the expected sequence of its subject and kept in the request ledger.
 * An entry's subject is its own ledger; batches of entries are recorded
 * entry by entry, their appends pipelined. New entries of an agent wait
 * (`Overloaded`) while background work on its partition is far behind the
 * log (back-pressure.ts).
 */

import { nuid } from "@nats-io/nuid"
import { Clock, Context, Effect, HashMap, Layer, Result } from "effect"
import type { AgentConfig } from "../../contracts/agent.ts"
import type { OperationName, RequestOf, ResponseOf } from "../../contracts/api.ts"
import { decodeEvent } from "../../contracts/decode.ts"
import {
  AgentNotFound,
  type ApiError,
  BatchTooLarge,
  IdempotencyConflict,
  InvalidState,
  Unavailable,
  ValidationError,
} from "../../contracts/errors.ts"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import { agentConfigSubject, agentStepSubject, entrySubject } from "../../contracts/subjects.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import {
  type Decision,
  decideBeginStep,
  decideEndStep,
  decideEnterHyperfocus,
  decideExitHyperfocus,
  decideFocus,
  decideRecord,
  decideReference,
  decideRegister,
  decideRetune,
  recordConflict,
  type Stamp,
} from "../../domain/decide.ts"
import type { EntryFacts } from "../../domain/entry-standing.ts"
import { replyOfEvent } from "../../domain/requests.ts"
import { preloadEncoding } from "../../domain/tokens.ts"
import { decodeRequestValue, encodeError, serveOperation, validationErrorOf } from "../platform/api/serve.ts"
import { makeCommandHandler, type Outcome } from "../platform/log/command-handler.ts"
import { EventLog } from "../platform/log/event-log.ts"
import type { WarmUp } from "../platform/log/projection.ts"
import { openLeaseBucket } from "../platform/partitions/leases.ts"
import { partitionOwner } from "../platform/partitions/partition-owner.ts"
import { type PartitionedViews, projectPartitionedViews } from "../platform/partitions/partitioned-views.ts"
import { progressReader } from "../platform/partitions/progress.ts"
import { PartitionSettings } from "../platform/partitions/settings.ts"
import { makeBackPressure } from "./back-pressure.ts"
import { makeQuoteResolver } from "./quotes.ts"
import { GatewaySettings } from "./settings.ts"

export interface GatewayShape {
  readonly views: PartitionedViews
  readonly warmUp: WarmUp
}

/** Appends of one batch in flight at once: each entry has a subject of its own, so none waits for another's ack. */
const BATCH_APPEND_WINDOW = 64

type RecordManyResult = ResponseOf<"recordMany">["results"][number]

/** An item's field, as the batch names it: `entries.<index>.<field>`. */
const itemField = (index: number, field: string) =>
  field === "(body)" ? `entries.${index}` : `entries.${index}.${field}`

/** A refusal of one entry of a batch, its field named within the batch. */
const inItem = (index: number, error: ApiError): ApiError => {
  switch (error._tag) {
    case "ValidationError":
      return new ValidationError({
        field: itemField(index, error.field),
        reason: error.reason,
        issues: error.issues.map((i) => ({ field: itemField(index, i.field), reason: i.reason })),
      })
    case "InvalidState":
      return new InvalidState({ field: itemField(index, error.field), reason: error.reason })
    case "IdempotencyConflict":
      return new IdempotencyConflict({ field: itemField(index, error.field), reason: error.reason })
    default:
      return error
  }
}

/** The refusal of one entry as the wire carries every refusal: its fields and its message. */
const refusedItem = (index: number, error: ApiError): RecordManyResult => ({
  index,
  ok: false,
  error: encodeError(inItem(index, error)) as unknown as ApiError,
})

export class Gateway extends Context.Service<Gateway, GatewayShape>()("wm/Gateway") {
  static readonly make = Effect.gen(function* () {
    const log = yield* EventLog
    const settings = yield* GatewaySettings
    const clock = yield* Clock.Clock
    // New entries wait while background work on their partition is far behind (back-pressure.ts).
    const backPressure = makeBackPressure(
      settings.maxProjectionLag,
      progressReader(yield* openLeaseBucket((yield* PartitionSettings).leaseTtlMs)),
      clock,
    )
    // Only the partitions this replica holds a lease on (services/platform/partitions).
    const views = yield* projectPartitionedViews("gateway")
    const owner = partitionOwner("gateway", views)
    const commands = yield* makeCommandHandler({ get: views.get, waitFor: views.projection.waitFor })

    /** Waits until the agent's partition has applied the log as it stands now. */
    const catchUp = (agentId: string) =>
      Effect.flatMap(log.lastSeq, (seq) => views.projection.waitFor(seq, "5 seconds", agentId)).pipe(
        Effect.catch(() => Effect.void),
      )

    const stamp = (
      agentId: string,
      operation: OperationName,
      request: { readonly requestId?: string },
      correlationId: string | null = null,
    ): Stamp => {
      const requestId = request.requestId ?? nuid.next()
      return {
        eventId: `${agentId}:${operation}:${requestId}`,
        agentId,
        at: clock.currentTimeMillisUnsafe(),
        causationId: requestId,
        correlationId,
      }
    }

    /** A gateway write: decided on the gateway's view, guarded on its subject, kept in the request ledger. */
    const write = <O extends OperationName, E extends MemoryEvent | null, A>(
      agentId: string,
      operation: O,
      request: RequestOf<O> & { readonly requestId?: string },
      subject: string,
      decide: (view: AgentView, s: Stamp, known: EntryFacts) => Decision<E>,
      reply: (outcome: Outcome<E>) => A,
      lookUp?: (view: AgentView) => Iterable<string>,
    ) => {
      const s = stamp(agentId, operation, request)
      return commands.handle<E, A>({
        agentId,
        operation,
        requestId: request.requestId,
        request,
        eventId: s.eventId,
        subject,
        ...(lookUp ? { lookUp } : {}),
        decide: (view, known) => decide(view, s, known),
        reply,
        // An attempt that stored its event and died before answering: the reply follows from the event.
        fromEvent: (event, seq, view) => replyOfEvent(view, event, seq) as A,
      })
    }

    const registerAgent = Effect.fn("Gateway.registerAgent")(function* (
      agentId: string,
      request: RequestOf<"registerAgent">,
    ) {
      const s = stamp(agentId, "registerAgent", request)
      /** The sequence a new registration must follow: 0, or a forgotten agent's tombstone. */
      const registrationBase = log.lastOnSubject(agentConfigSubject(agentId)).pipe(
        Effect.map((last) => {
          if (last === null) return 0
          const decoded = decodeEvent(last.data)
          return decoded.ok && decoded.event._tag === "AgentForgotten" ? last.seq : 0
        }),
        Effect.orElseSucceed(() => 0),
      )
      const appendRegistration = Effect.fnUntraced(function* (base: number) {
        const current = views.get(agentId)
        // A registration retried is answered as it was, whatever changed since.
        const earlier =
          current !== undefined && request.requestId !== undefined
            ? yield* commands.answered(agentId, current.registeredSeq, "registerAgent", request.requestId, request)
            : null
        if (earlier !== null) return earlier.reply as { config: AgentConfig; budget: number; seq: number }
        const decision = decideRegister(current, request, s)
        if (!decision.ok) return yield* Effect.fail(decision.error)
        if (decision.event === null)
          return { config: current!.config, budget: current!.budgetInForce, seq: current!.registeredSeq }
        preloadEncoding(decision.event.config.encoding)
        // Expecting the subject as it was makes registration happen once, whoever races.
        const appended = yield* log.append(decision.event, { expectLastSubjectSeq: base })
        const registration = {
          config: decision.event.config,
          budget: decision.event.config.budget,
          seq: appended.seq,
        }
        if (request.requestId !== undefined)
          yield* commands.answer(
            agentId,
            appended.seq,
            "registerAgent",
            request.requestId,
            request,
            appended.seq,
            registration,
          )
        return registration
      })
      const result = yield* appendRegistration(0).pipe(
        Effect.catchTag("SequenceConflict", () =>
          Effect.andThen(
            catchUp(agentId),
            Effect.flatMap(registrationBase, (base) => appendRegistration(base)),
          ),
        ),
        Effect.catchTag("SequenceConflict", () => Effect.fail(new AgentNotFound({ agentId }))),
      )
      return { agent: result.config, budget: result.budget, seq: result.seq } satisfies ResponseOf<"registerAgent">
    })

    const budgetReply = ({ view, decided, seq }: Outcome<EventOf<"BudgetChanged">>) =>
      replyOfEvent(view, decided, seq) as ResponseOf<"retuneBudget">

    const retuneBudget = Effect.fn("Gateway.retuneBudget")((agentId: string, request: RequestOf<"retuneBudget">) =>
      write(
        agentId,
        "retuneBudget",
        request,
        agentConfigSubject(agentId),
        (view, s) => decideRetune(view, request, s),
        budgetReply,
      ),
    )
    const enterHyperfocus = Effect.fn("Gateway.enterHyperfocus")(
      (agentId: string, request: RequestOf<"enterHyperfocus">) =>
        write(
          agentId,
          "enterHyperfocus",
          request,
          agentConfigSubject(agentId),
          (view, s) => decideEnterHyperfocus(view, request, s),
          budgetReply,
        ),
    )
    const exitHyperfocus = Effect.fn("Gateway.exitHyperfocus")(
      (agentId: string, request: RequestOf<"exitHyperfocus">) =>
        write(
          agentId,
          "exitHyperfocus",
          request,
          agentConfigSubject(agentId),
          (view, s) => decideExitHyperfocus(view, s),
          budgetReply,
        ),
    )

    /**
     * The first EntryRecorded on the entry's subject answers every retry of
     * its request id, at any age: an entry's subject is its ledger.
     */
    const firstRecord = (agentId: string, entryId: string) =>
      log.nextOnSubject(entrySubject(agentId, entryId), 1).pipe(
        Effect.map((stored) => {
          if (stored === null) return null
          const decoded = decodeEvent(stored.data)
          return decoded.ok ? { event: decoded.event, seq: stored.seq } : null
        }),
      )

    const recordAnswer = Effect.fnUntraced(function* (
      request: RequestOf<"recordEntry">,
      entryId: string,
      first: { event: MemoryEvent; seq: number } | null,
    ) {
      if (first === null || first.event._tag !== "EntryRecorded") {
        return yield* Effect.fail(
          new InvalidState({
            field: "requestId",
            reason: `entry '${entryId}' recorded with this request id was forgotten`,
          }),
        )
      }
      const conflict = recordConflict(request, first.event)
      if (conflict !== null) {
        return yield* Effect.fail(
          new IdempotencyConflict({
            field: conflict,
            reason: `differs from entry '${entryId}' first recorded with this request id`,
          }),
        )
      }
      return {
        entryId,
        timestamp: first.event.timestamp,
        tokens: first.event.tokens,
        seq: first.seq,
        duplicate: true,
      } satisfies ResponseOf<"recordEntry">
    })

    /** The agent's view, caught up with the log first when this replica does not know the agent yet. */
    const knownView = Effect.fnUntraced(function* (agentId: string) {
      let view = views.get(agentId)
      if (view === undefined) {
        yield* catchUp(agentId)
        view = views.get(agentId)
      }
      if (view === undefined) return yield* Effect.fail(new AgentNotFound({ agentId }))
      return view
    })

    /** An entry and its id, decided on the agent's view as `entry.record` decides it. */
    const decideEntry = (agentId: string, view: AgentView, request: RequestOf<"recordEntry">) => {
      const s = stamp(agentId, "recordEntry", request, request.correlationId ?? null)
      const entryId = request.requestId ?? s.eventId.slice(s.eventId.lastIndexOf(":") + 1)
      return { entryId, decision: decideRecord(view, request, s, entryId) }
    }

    /** Appends a decided entry; an entry already stored under its request id answers as it was first recorded. */
    const appendEntry = Effect.fnUntraced(function* (
      agentId: string,
      request: RequestOf<"recordEntry">,
      entryId: string,
      event: EventOf<"EntryRecorded">,
    ) {
      // An entry is created once: its subject must be empty, whatever the dedupe window.
      const appended = yield* log
        .append(event, { expectLastSubjectSeq: 0 })
        .pipe(Effect.catchTag("SequenceConflict", () => Effect.succeed(null)))
      if (appended === null || appended.duplicate)
        return yield* recordAnswer(request, entryId, yield* firstRecord(agentId, entryId))
      return {
        entryId,
        timestamp: event.timestamp,
        tokens: event.tokens,
        seq: appended.seq,
        duplicate: false,
      } satisfies ResponseOf<"recordEntry">
    })

    const recordEntry = Effect.fn("Gateway.recordEntry")(function* (
      agentId: string,
      request: RequestOf<"recordEntry">,
    ) {
      const view = yield* knownView(agentId)
      const { entryId, decision } = decideEntry(agentId, view, request)
      if (!decision.ok) return yield* Effect.fail(decision.error)
      const overloaded = yield* backPressure.check(agentId)
      if (overloaded !== null) {
        // Only new entries wait: a retry of one already recorded is answered as it was.
        const first = request.requestId === undefined ? null : yield* firstRecord(agentId, entryId)
        if (first === null) return yield* Effect.fail(overloaded)
        return yield* recordAnswer(request, entryId, first)
      }
      return yield* appendEntry(agentId, request, entryId, decision.event)
    })

    /**
     * A batch: every entry validated, decided and appended as `entry.record` does it, each its own event
     * (so each is stored whole or not at all), and answered in its own result. The appends are pipelined,
     * sent in the batch's order, so the log holds the entries in that order unless an append is retried.
     */
    const recordMany = Effect.fn("Gateway.recordMany")(function* (agentId: string, request: RequestOf<"recordMany">) {
      const size = request.entries.length
      if (size > settings.maxBatchEntries)
        return yield* Effect.fail(new BatchTooLarge({ field: "entries", size, limit: settings.maxBatchEntries }))
      const view = yield* knownView(agentId)
      const results: Array<RecordManyResult | undefined> = Array.from({ length: size })
      const decided: Array<{
        readonly index: number
        readonly request: RequestOf<"recordEntry">
        readonly entryId: string
        readonly event: EventOf<"EntryRecorded">
      }> = []
      request.entries.forEach((item, index) => {
        const decoded = decodeRequestValue("recordEntry", item)
        if (!decoded.ok) {
          results[index] = refusedItem(index, validationErrorOf(decoded.issues))
          return
        }
        const { entryId, decision } = decideEntry(agentId, view, decoded.value)
        if (!decision.ok) results[index] = refusedItem(index, decision.error)
        else decided.push({ index, request: decoded.value, entryId, event: decision.event })
      })
      const overloaded = decided.length > 0 ? yield* backPressure.check(agentId) : null
      if (overloaded !== null) {
        // Only a batch whose every entry is already recorded (a retry after a lost reply) is answered now.
        for (const item of decided) {
          const first = item.request.requestId === undefined ? null : yield* firstRecord(agentId, item.entryId)
          if (first === null) return yield* Effect.fail(overloaded)
        }
      }
      const appended = yield* Effect.forEach(
        decided,
        (item) => Effect.result(appendEntry(agentId, item.request, item.entryId, item.event)),
        { concurrency: BATCH_APPEND_WINDOW },
      )
      let seq = 0
      appended.forEach((result, i) => {
        const { index } = decided[i]!
        if (Result.isFailure(result)) {
          results[index] = refusedItem(index, result.failure)
          return
        }
        seq = Math.max(seq, result.success.seq)
        results[index] = { index, ok: true, ...result.success }
      })
      return { results: results as RecordManyResult[], seq } satisfies ResponseOf<"recordMany">
    })

    const beginStep = Effect.fn("Gateway.beginStep")((agentId: string, request: RequestOf<"beginStep">) => {
      const stepId = request.stepId ?? request.requestId ?? nuid.next()
      return write(
        agentId,
        "beginStep",
        request,
        agentStepSubject(agentId),
        (view, s) => decideBeginStep(view, request, s, stepId),
        // Beginning the step that is already open answers with the step as it began.
        ({ view, seq, recorded }): ResponseOf<"beginStep"> => ({
          stepId,
          seq: recorded ? seq : (view.step?.startedSeq ?? seq),
        }),
      )
    })

    const setFocus = Effect.fn("Gateway.setFocus")((agentId: string, request: RequestOf<"setFocus">) =>
      write(
        agentId,
        "setFocus",
        request,
        agentStepSubject(agentId),
        (view, s) => decideFocus(view, request, s),
        ({ decided, seq }): ResponseOf<"setFocus"> => ({ transition: decided.transition, seq }),
      ),
    )

    const resolveQuotes = yield* makeQuoteResolver

    const referenceEntries = Effect.fn("Gateway.referenceEntries")(function* (
      agentId: string,
      request: RequestOf<"referenceEntries">,
    ) {
      const quoted = request.quotes ? yield* resolveQuotes(views.get(agentId), request.quotes) : []
      const unresolved = (request.quotes ?? []).length > 0 && quoted.length === 0
      if (unresolved && (request.entryIds ?? []).length === 0) {
        return yield* Effect.fail(ValidationError.one("quotes", "no entry of this agent contains the quoted text"))
      }
      const merged = { ...request, entryIds: [...(request.entryIds ?? []), ...quoted] }
      return yield* write(
        agentId,
        "referenceEntries",
        request,
        agentStepSubject(agentId),
        (view, s, known) => decideReference(view, merged, s, known),
        ({ decided, seq }): ResponseOf<"referenceEntries"> => ({ entryIds: decided.entryIds, seq }),
        // Entries neither in working nor cues may be in long-term: the log says.
        (view) => merged.entryIds.filter((id) => !HashMap.has(view.entries, id) && !HashMap.has(view.cues, id)),
      )
    })

    const endStep = Effect.fn("Gateway.endStep")((agentId: string, request: RequestOf<"endStep">) =>
      write(
        agentId,
        "endStep",
        request,
        agentStepSubject(agentId),
        (view, s) => decideEndStep(view, request, s),
        ({ decided, seq }): ResponseOf<"endStep"> => ({ stepId: decided.stepId, seq }),
      ),
    )

    /**
     * A partition whose projection stopped at an event newer than this code reads has a stale view: a
     * write decided on it could break what that event changed, so every write for its agents is refused
     * until a gateway that reads it (an upgraded one) takes the partition.
     */
    const decidingOnCurrentLog =
      <Rq, A, E, R>(handler: (agentId: string, request: Rq) => Effect.Effect<A, E, R>) =>
      (agentId: string, request: Rq): Effect.Effect<A, E | Unavailable, R> =>
        Effect.suspend((): Effect.Effect<A, E | Unavailable, R> => {
          const halt = views.projection.halted(agentId)
          if (halt === null) return handler(agentId, request)
          return Effect.fail(
            new Unavailable({
              reason: `this gateway stopped before seq ${halt.seq} of the log: ${halt.error.eventType} v${halt.error.version} is newer than it reads (up to v${halt.error.understood}); upgrade the gateway`,
            }),
          )
        })

    yield* serveOperation("registerAgent", decidingOnCurrentLog(registerAgent), owner)
    yield* serveOperation("retuneBudget", decidingOnCurrentLog(retuneBudget), owner)
    yield* serveOperation("enterHyperfocus", decidingOnCurrentLog(enterHyperfocus), owner)
    yield* serveOperation("exitHyperfocus", decidingOnCurrentLog(exitHyperfocus), owner)
    yield* serveOperation("recordEntry", decidingOnCurrentLog(recordEntry), owner)
    yield* serveOperation("recordMany", decidingOnCurrentLog(recordMany), owner)
    yield* serveOperation("beginStep", decidingOnCurrentLog(beginStep), owner)
    yield* serveOperation("setFocus", decidingOnCurrentLog(setFocus), owner)
    yield* serveOperation("referenceEntries", decidingOnCurrentLog(referenceEntries), owner)
    yield* serveOperation("endStep", decidingOnCurrentLog(endStep), owner)

    // Serving starts before warm-up ends: each partition answers once it has caught up (`views.owns`).
    const warmUp = yield* views.projection.warmedUp
    // Once the views of the snapshots are decoded (behind the partitions, which answer before).
    yield* Effect.forkScoped(
      Effect.andThen(
        views.decoded,
        Effect.sync(() => {
          for (const view of views.all().values()) preloadEncoding(view.config.encoding)
        }),
      ),
    )
    return { views, warmUp } satisfies GatewayShape
  })

  static readonly layer = Layer.effect(Gateway, Gateway.make)
}
