/**
 * Reads where entries stand from the log: the last message on each entry's
 * subject, decoded (see domain/entry-standing.ts). One read per entry, at
 * decision time, in place of the views carrying every long-term id.
 */
import { Effect } from "effect"
import type { Unavailable } from "../../../contracts/errors.ts"
import type { EventOf, MemoryEvent } from "../../../contracts/events.ts"
import { isSubjectToken } from "../../../contracts/ids.ts"
import { entrySubject } from "../../../contracts/subjects.ts"
import { ABSENT_ENTRY, type EntryFact, type EntryFacts, factAfter } from "../../../domain/entry-standing.ts"
import type { EventLogShape } from "./event-log.ts"

/** The last event on a subject that decodes, at or before `untilSeq`, walking its history (an entry's is short). */
const lastDecodable = (log: EventLogShape, subject: string, untilSeq: number) =>
  Effect.gen(function* () {
    let found: { readonly event: MemoryEvent; readonly seq: number } | null = null
    let from = 1
    while (from <= untilSeq) {
      const next = yield* log.nextOnSubject(subject, from)
      if (next === null || next.seq > untilSeq) break
      const decoded = log.decode(next.data)
      if (decoded.ok) found = { event: decoded.event, seq: next.seq }
      from = next.seq + 1
    }
    return found
  })

/**
 * Where one entry stands. A last record that does not decode (it was
 * dead-lettered) is skipped for the standing, as projections skip it, and
 * still counts for the subject's position. An id that cannot be a subject
 * token names no entry (and must never reach the server as a wildcard).
 */
export const readEntryFact = (
  log: EventLogShape,
  agentId: string,
  entryId: string,
): Effect.Effect<EntryFact, Unavailable> => {
  if (!isSubjectToken(entryId)) return Effect.succeed(ABSENT_ENTRY)
  const subject = entrySubject(agentId, entryId)
  return Effect.gen(function* () {
    const last = yield* log.lastOnSubject(subject)
    if (last === null) return ABSENT_ENTRY
    const decoded = log.decode(last.data)
    if (decoded.ok) return factAfter(decoded.event, last.seq, last.seq)
    const earlier = yield* lastDecodable(log, subject, last.seq - 1)
    return factAfter(earlier?.event ?? null, earlier?.seq ?? 0, last.seq)
  })
}

export const readEntryFacts = (
  log: EventLogShape,
  agentId: string,
  entryIds: Iterable<string>,
): Effect.Effect<EntryFacts, Unavailable> =>
  Effect.map(
    Effect.forEach(
      new Set(entryIds),
      (entryId) => Effect.map(readEntryFact(log, agentId, entryId), (fact) => [entryId, fact] as const),
      { concurrency: 16 },
    ),
    (pairs) => new Map(pairs),
  )

/** The entry's last demotion on its subject (null: it never demoted, or no demotion decodes). */
export const readLastDemotion = (
  log: EventLogShape,
  agentId: string,
  entryId: string,
): Effect.Effect<EventOf<"EntryDemoted"> | null, Unavailable> =>
  Effect.gen(function* () {
    if (!isSubjectToken(entryId)) return null
    const subject = entrySubject(agentId, entryId)
    let found: EventOf<"EntryDemoted"> | null = null
    for (let from = 1; ; ) {
      const next = yield* log.nextOnSubject(subject, from)
      if (next === null) return found
      const decoded = log.decode(next.data)
      if (decoded.ok && decoded.event._tag === "EntryDemoted") found = decoded.event
      from = next.seq + 1
    }
  })
