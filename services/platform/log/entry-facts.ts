/**
 * Reads where entries stand from the log: the last message on each entry's
 * subject, decoded (see domain/entry-standing.ts). One read per entry, at
 * decision time, in place of the views carrying every long-term id.
 */
import { Effect } from "effect"
import { decodeEvent } from "../../../contracts/decode.ts"
import type { Unavailable } from "../../../contracts/errors.ts"
import { isSubjectToken } from "../../../contracts/ids.ts"
import { entrySubject } from "../../../contracts/subjects.ts"
import { ABSENT_ENTRY, type EntryFact, type EntryFacts, standingAfter } from "../../../domain/entry-standing.ts"
import type { EventLogShape } from "./event-log.ts"

/**
 * Where one entry stands; a last record that does not decode gives `absent`
 * at its sequence. An id that cannot be a subject token names no entry (and
 * must never reach the server as a wildcard).
 */
export const readEntryFact = (
  log: EventLogShape,
  agentId: string,
  entryId: string,
): Effect.Effect<EntryFact, Unavailable> =>
  !isSubjectToken(entryId)
    ? Effect.succeed(ABSENT_ENTRY)
    : Effect.map(log.lastOnSubject(entrySubject(agentId, entryId)), (last) => {
        if (last === null) return ABSENT_ENTRY
        const decoded = decodeEvent(last.data)
        return { standing: standingAfter(decoded.ok ? decoded.event : null), subjectSeq: last.seq }
      })

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
