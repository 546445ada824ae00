/**
 * Recording an entry: decided on the agent's view, appended on its own subject, which must be empty (an
 * entry is created once, whatever the dedupe window), so the subject is the entry's ledger: the first
 * EntryRecorded there answers every retry of its request id, at any age. New entries wait (`Overloaded`)
 * while background work on the agent's partition is far behind the log (back-pressure.ts).
 */
import { Effect } from "effect"
import type { RequestOf, ResponseOf } from "../../contracts/api.ts"
import { IdempotencyConflict, InvalidState } from "../../contracts/errors.ts"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import { entrySubject } from "../../contracts/subjects.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { decideRecord, recordConflict } from "../../domain/decide.ts"
import type { EventLogShape } from "../platform/log/event-log.ts"
import type { BackPressure } from "./back-pressure.ts"
import type { Writes } from "./writes.ts"

export const makeEntries = (log: EventLogShape, backPressure: BackPressure, { stamp, knownView }: Writes) => {
  /**
   * The first EntryRecorded on the entry's subject answers every retry of
   * its request id, at any age: an entry's subject is its ledger.
   */
  const firstRecord = (agentId: string, entryId: string) =>
    log.nextOnSubject(entrySubject(agentId, entryId), 1).pipe(
      Effect.map((stored) => {
        if (stored === null) return null
        const decoded = log.decode(stored.data)
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

  const recordEntry = Effect.fn("Gateway.recordEntry")(function* (agentId: string, request: RequestOf<"recordEntry">) {
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

  return { recordEntry, decideEntry, appendEntry, firstRecord }
}

export type Entries = ReturnType<typeof makeEntries>
