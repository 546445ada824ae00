/**
 * The text each working entry was recorded with, kept while working holds the entry. A working entry's
 * vector is made from it whatever rung the entry has faded to since, so a vector made after a restart or a
 * rebuild from the log equals the one made when the entry was recorded: rankings are a function of the log.
 */
import { HashMap } from "effect"
import { entryIdOf, type MemoryEvent } from "../../../contracts/events.ts"
import type { AgentView } from "../../../domain/agent-view.ts"

export class WorkingTexts {
  readonly #texts = new Map<string, Map<string, string>>()

  /** What an event applied to the agent's view changes (`after` undefined: the agent was removed). */
  apply(event: MemoryEvent, after: AgentView | undefined): void {
    if (after === undefined) {
      this.dropAgent(event.agentId)
      return
    }
    if (event._tag === "EntryRecorded") {
      let texts = this.#texts.get(event.agentId)
      if (texts === undefined) {
        texts = new Map()
        this.#texts.set(event.agentId, texts)
      }
      texts.set(event.entryId, event.content)
      return
    }
    const entryId = entryIdOf(event)
    if (entryId !== null && !HashMap.has(after.entries, entryId)) this.#texts.get(event.agentId)?.delete(entryId)
  }

  get(agentId: string, entryId: string): string | undefined {
    return this.#texts.get(agentId)?.get(entryId)
  }

  /** The agent's texts in the order they were recorded. */
  of(agentId: string): ReadonlyArray<readonly [string, string]> {
    return [...(this.#texts.get(agentId) ?? [])]
  }

  restore(agentId: string, texts: ReadonlyArray<readonly [string, string]>): void {
    if (texts.length === 0) this.#texts.delete(agentId)
    else this.#texts.set(agentId, new Map(texts))
  }

  dropAgent(agentId: string): void {
    this.#texts.delete(agentId)
  }
}
