/**
 * Forgetting: the tombstone that records the intent, and what its erasure
 * covers. The tombstone is decided here, before anything is erased, and
 * names the agent (and entry) only: it never carries the content.
 *
 * What a tombstone erases is a pure function of the tombstone and the
 * records of the agent's subjects, so the operator's CLI and the eraser
 * service that resumes after a crash erase exactly the same messages.
 */
import { HashMap } from "effect"
import { AgentNotFound, UnknownEntries, ValidationError } from "../contracts/errors.ts"
import type { EventOf } from "../contracts/events.ts"
import { isSubjectToken } from "../contracts/ids.ts"
import { agentConfigSubject, agentEvents, agentStepSubject, entrySubject } from "../contracts/subjects.ts"
import type { AgentView } from "./agent-view.ts"
import { accept, type Decision, envelope, refuse, type Stamp } from "./decision.ts"
import { type EntryFacts, isLongTerm, NO_ENTRY_FACTS } from "./entry-standing.ts"

export type Tombstone = EventOf<"EntryForgotten"> | EventOf<"AgentForgotten">

export interface ForgetRequest {
  /** Forget this entry only; the whole agent when absent. */
  readonly entryId?: string
}

/**
 * Forgetting an agent needs it registered; forgetting an entry needs the
 * agent to hold it, in working (the view) or in long-term (`known`: what the
 * caller read of the entry's subject). Anything else is refused and nothing
 * is written.
 */
export const decideForget = (
  view: AgentView | undefined,
  request: ForgetRequest,
  stamp: Stamp,
  known: EntryFacts = NO_ENTRY_FACTS,
): Decision<Tombstone> => {
  if (view === undefined) return refuse(new AgentNotFound({ agentId: stamp.agentId }))
  const entryId = request.entryId
  if (entryId === undefined) return accept({ _tag: "AgentForgotten", ...envelope(stamp) })
  if (!isSubjectToken(entryId))
    return refuse(ValidationError.one("entryId", "must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'"))
  if (!HashMap.has(view.entries, entryId) && !isLongTerm(known, entryId))
    return refuse(new UnknownEntries({ entryIds: [entryId] }))
  return accept({ _tag: "EntryForgotten", ...envelope(stamp), entryId })
}

/** The subjects whose records a tombstone's erasure reads (a stream filter). */
export const erasureFilter = (tombstone: Tombstone): string =>
  tombstone._tag === "EntryForgotten"
    ? entrySubject(tombstone.agentId, tombstone.entryId)
    : agentEvents(tombstone.agentId)

/** One stored record of the erasure's filter, in stream order. */
export interface StoredRecord {
  readonly seq: number
  readonly subject: string
}

/**
 * The sequences a tombstone erases among the records of its filter, given
 * in stream order:
 * - an entry's tombstone: every record on the entry's subject but the
 *   entry's tombstones (an entry id is never reused, so a record that
 *   reached the subject after the tombstone is about the forgotten entry too);
 * - an agent's tombstone: every record of the agent before it, every
 *   later record on the subject of an entry recorded before it (a fade or
 *   cue decision that raced the forget), and every later record on its step
 *   subject until the agent is registered again (a recall that raced it).
 *   Records of the agent registered again after the tombstone are kept.
 */
export const erasedSequences = (
  tombstone: Tombstone,
  tombstoneSeq: number,
  records: Iterable<StoredRecord>,
): number[] => {
  const erased: number[] = []
  if (tombstone._tag === "EntryForgotten") {
    for (const r of records)
      if (r.seq !== tombstoneSeq && r.subject === entrySubject(tombstone.agentId, tombstone.entryId)) erased.push(r.seq)
    return erased
  }
  const before = new Set<string>()
  const entryPrefix = entrySubject(tombstone.agentId, "")
  const steps = agentStepSubject(tombstone.agentId)
  const config = agentConfigSubject(tombstone.agentId)
  // A registration after the tombstone is the only record on the agent's configuration subject after it.
  let registeredAgain = false
  for (const r of records) {
    if (r.seq < tombstoneSeq) {
      erased.push(r.seq)
      before.add(r.subject)
    } else if (r.seq > tombstoneSeq) {
      if (r.subject === config) registeredAgain = true
      if ((r.subject.startsWith(entryPrefix) && before.has(r.subject)) || (r.subject === steps && !registeredAgain))
        erased.push(r.seq)
    }
  }
  return erased
}

/** Whether a subject is among those a tombstone's erasure reads. */
export const coversSubject = (tombstone: Tombstone, subject: string): boolean => {
  const filter = erasureFilter(tombstone)
  return filter.endsWith(".>") ? subject.startsWith(filter.slice(0, -1)) : subject === filter
}
