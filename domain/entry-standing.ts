/**
 * Where an entry stands, as the log tells: what a decision about an entry
 * the agent's view does not hold natively (in long-term, a cue, forgotten)
 * reads at decision time instead of the view carrying every such id.
 *
 * An entry's subject holds its whole history, so its last event says both
 * where the entry stands and the sequence a write to that subject must
 * expect. Services read it (the last message on `entrySubject`) and pass the
 * fact to the deciders, which stay pure.
 */
import type { MemoryEvent } from "../contracts/events.ts"

/**
 * - `absent`: nothing readable was ever stored on the entry's subject;
 * - `working`: the entry is a native working entry (recorded, faded or promoted last);
 * - `long-term`: the entry left working for long-term (demoted last, or a cue of it came or went since);
 * - `forgotten`: the entry's tombstone is its last event.
 */
export type EntryStanding = "absent" | "working" | "long-term" | "forgotten"

/** One entry, as its subject's last event tells. */
export interface EntryFact {
  readonly standing: EntryStanding
  /** Stream sequence of the event the standing follows from: the last on the subject that decodes (0: none). */
  readonly standingSeq: number
  /**
   * Stream sequence of the last message on the entry's subject, decodable or
   * not (0: none): what a write to the subject must expect.
   */
  readonly subjectSeq: number
}

/** The facts a decision read from the log, by entry id. An id with no fact is `absent`. */
export type EntryFacts = ReadonlyMap<string, EntryFact>

export const NO_ENTRY_FACTS: EntryFacts = new Map()

export const ABSENT_ENTRY: EntryFact = { standing: "absent", standingSeq: 0, subjectSeq: 0 }

/**
 * Where an entry stands after `last`, the last event on its subject that
 * decodes (null: none). A cue rehydrated or dropped last means long-term
 * for an entry the view does not hold natively; for a summarised native
 * entry the view's own entry answers first.
 */
export const standingAfter = (last: MemoryEvent | null): EntryStanding => {
  if (last === null) return "absent"
  switch (last._tag) {
    case "EntryRecorded":
    case "RungChanged":
    case "CuePromoted":
      return "working"
    case "EntryDemoted":
    case "CueRehydrated":
    case "CueDropped":
      return "long-term"
    case "EntryForgotten":
      return "forgotten"
    default:
      return "absent"
  }
}

/** The fact of an entry whose subject's last decodable event is `last` (at `standingSeq`), its last message at `subjectSeq`. */
export const factAfter = (last: MemoryEvent | null, standingSeq: number, subjectSeq: number): EntryFact => ({
  standing: standingAfter(last),
  standingSeq: last === null ? 0 : standingSeq,
  subjectSeq,
})

export const factOf = (facts: EntryFacts, entryId: string): EntryFact => facts.get(entryId) ?? ABSENT_ENTRY

/** Whether the log says the entry is in long-term. */
export const isLongTerm = (facts: EntryFacts, entryId: string): boolean =>
  factOf(facts, entryId).standing === "long-term"
