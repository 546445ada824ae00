/**
 * What the memory service does as the views of its partitions change: it indexes both tiers' texts as the
 * log goes and runs each partition's long-term projection beside it, makes working entries' vectors, drops
 * what it keeps of agents that leave, and, once its reactions are started, hands them every event of an
 * agent whose partition answers here.
 */
import { Effect, HashMap, Option } from "effect"
import { entryIdOf, type MemoryEvent } from "../../../contracts/events.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import type { SubjectPositions } from "../../platform/log/subject-positions.ts"
import type { PartitionedViews, PartitionHooks } from "../../platform/partitions/partitioned-views.ts"
import type { OpenStepMemo } from "../../platform/views/open-step-memo.ts"
import type { LongTermShape } from "../longterm/longterm.ts"
import { indexEvent, memoryIndexState } from "./index-state.ts"
import type { MemoryIndexes } from "./memory-indexes.ts"

/** What an event applied to an agent this replica answers for asks of retrieval. */
export type React = (before: AgentView | undefined, after: AgentView, event: MemoryEvent) => Effect.Effect<void>

export interface PartitionHooksDependencies {
  readonly indexes: MemoryIndexes
  /** Where the views last saw each entry's subject: the position a cue's append expects. */
  readonly positions: SubjectPositions
  readonly recalledSteps: Pick<OpenStepMemo<unknown>, "forget">
  readonly longTerm: LongTermShape
  /** Forks into the service's scope. */
  readonly runFork: (effect: Effect.Effect<void>) => unknown
}

export const makePartitionHooks = ({
  indexes,
  positions,
  recalledSteps,
  longTerm,
  runFork,
}: PartitionHooksDependencies) => {
  const { lexical, episodes, texts, workingVectors } = indexes
  /** Set once the views exist and every handler is defined: reactions run only for agents whose partition answers. */
  let reacting: { readonly views: PartitionedViews; readonly react: React } | null = null
  let stopping = false

  const dropAgents = (agents: ReadonlyArray<string>) => {
    indexes.dropAgents(agents)
    for (const agentId of agents) recalledSteps.forget(agentId)
  }

  const hooks: PartitionHooks = {
    // Snapshots carry the lexical and episode indexes beside the views.
    state: memoryIndexState(lexical, episodes, texts),
    opened: (partition, scope) => Effect.asVoid(longTerm.open(partition, scope)),
    settled: (partition) => longTerm.partitions().get(partition)?.caughtUp ?? Effect.void,
    // The long-term records of the partition are written behind the indexes, by the partition's writer.
    behind: (partition) => {
      const stored = longTerm.partitions().get(partition)
      return stored === undefined ? null : { seq: stored.storedSeq(), records: stored.backlog() }
    },
    applied: (event, before, after, record) => {
      if (entryIdOf(event) !== null) positions.applied(record.subject, record.seq)
      indexEvent(lexical, episodes, texts, event, after)
      if (after === undefined) {
        if (event._tag === "AgentForgotten") dropAgents([event.agentId])
        return
      }
      if (event._tag === "EntryDemoted" || event._tag === "EntryForgotten") {
        workingVectors.left(event.agentId, event.entryId)
      }
      if (event._tag === "EntryForgotten") indexes.recalled.forgetEntry(event.agentId, event.entryId)
      if (reacting?.views.owns(event.agentId)) {
        const { views, react } = reacting
        if (event._tag === "EntryRecorded") {
          const entry = HashMap.get(after.entries, event.entryId)
          if (Option.isSome(entry)) workingVectors.recorded(event.agentId, entry.value)
        }
        runFork(
          react(before, after, event).pipe(
            Effect.catchCause((c) =>
              // Given up meanwhile (a shutdown releases every partition): its views are gone, not wrong.
              views.takes(event.agentId) ? Effect.logError("[retrieval]", c) : Effect.logDebug("[retrieval]", c),
            ),
          ),
        )
      }
    },
    // A partition taken from a snapshot or the log has working entries without vectors: made now, in the
    // background lane, so the first queries after a restart rank them as before it.
    ready: (_partition, agents, viewOf) => {
      workingVectors.warm(agents, viewOf)
    },
    lost: (partition, agents) => {
      dropAgents(agents)
      // Released at shutdown, a durable store keeps the partition: the next start resumes it if it is still
      // this replica's, and drops it if not.
      if (!stopping) runFork(longTerm.release(partition))
    },
  }

  return {
    hooks,
    /** Reactions start: `views` are the ones built with these hooks. */
    startReactions: (views: PartitionedViews, react: React) => {
      reacting = { views, react }
    },
    /** The service is stopping: a partition lost from now on stays in a durable store, for the next start. */
    stop: () => {
      stopping = true
    },
  }
}
