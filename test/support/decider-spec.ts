/**
 * Decider specifications in the given/when/then form:
 *
 *     given(registered(), stepStarted("s1", 1))
 *       .when((view) => decideBeginStep(view, { stepId: "s2" }, stamp, "s2"))
 *       .thenFails("InvalidState")
 *
 * `given` folds the events as `foldEvents` (events.ts) does, `when` runs a
 * pure decider on the view, and `then` compares the events it decided (none
 * when it accepts with nothing to record).
 */
import { expect } from "vitest"
import type { MemoryEvent } from "../../contracts/events.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { foldEvents } from "./events.ts"

/** What a decider returns: the events to append, or the typed error that refuses the command. */
type Outcome =
  | { readonly ok: true; readonly event: MemoryEvent | ReadonlyArray<MemoryEvent> | null }
  | { readonly ok: false; readonly error: { readonly _tag: string } }

const eventsOf = (event: MemoryEvent | ReadonlyArray<MemoryEvent> | null): ReadonlyArray<MemoryEvent> =>
  event === null ? [] : Array.isArray(event) ? (event as ReadonlyArray<MemoryEvent>) : [event as MemoryEvent]

export interface DeciderSpec {
  readonly view: AgentView | undefined
  when(decide: (view: AgentView | undefined) => Outcome): {
    /** The decided events equal these (partially: only the given fields are compared). */
    then(...expected: ReadonlyArray<Partial<MemoryEvent>>): void
    /** The command is refused with this error tag; returns the error for further checks. */
    thenFails(tag: string): { readonly _tag: string }
  }
}

export const given = (...events: ReadonlyArray<MemoryEvent>): DeciderSpec => {
  const view = foldEvents(events)
  return {
    view,
    when: (decide) => {
      const outcome = decide(view)
      return {
        then: (...expected) => {
          if (!outcome.ok) throw new Error(`expected events, the decider refused with ${outcome.error._tag}`)
          const decided = eventsOf(outcome.event)
          expect(decided).toHaveLength(expected.length)
          decided.forEach((event, i) => {
            expect(event).toMatchObject(expected[i]!)
          })
        },
        thenFails: (tag) => {
          if (outcome.ok)
            throw new Error(
              `expected ${tag}, the decider accepted: ${JSON.stringify(eventsOf(outcome.event).map((e) => e._tag))}`,
            )
          expect(outcome.error._tag).toBe(tag)
          return outcome.error
        },
      }
    },
  }
}
