/**
 * Which of an agent's entries are in long-term, folded from its events, for
 * readers that hold the agent's whole history anyway (the dashboard's read
 * model, the audit replay). The services' views do not carry these ids:
 * their decisions read the entry's own subject (entry-standing.ts).
 *
 * An entry is in long-term from its demotion out of working until it is
 * promoted back or forgotten; a forgotten agent, or one not registered, has
 * none.
 */
import { HashMap } from "effect"
import type { MemoryEvent } from "../contracts/events.ts"
import { type AgentView, applies, type LogPosition } from "./agent-view.ts"

/**
 * Folds `event` into `ids`, the entries in long-term given `before` (the
 * agent's view just before the event). The set is the caller's own and is
 * updated in place: one step per event, however many ids it holds.
 */
export const trackLongTerm = (
  ids: Set<string>,
  before: AgentView | undefined,
  event: MemoryEvent,
  position: LogPosition,
): void => {
  if (event._tag === "AgentForgotten" || before === undefined) {
    ids.clear()
    return
  }
  if (!applies(before, event, position)) return
  if (event._tag === "EntryDemoted" && HashMap.has(before.entries, event.entryId)) ids.add(event.entryId)
  else if (event._tag === "CuePromoted" || event._tag === "EntryForgotten") ids.delete(event.entryId)
}
