/**
 * The retrieval service: merged queries over working and long-term, threads
 * by correlation id, and the reverse lifecycle — transient cues.
 *
 * Reload triggers:
 * - similarity: the first build of a focused step asks `step.recall`; the
 *   hits whose similarity clears the threshold come back as cues, best
 *   first, with the best representation that fits (the raw text from the
 *   substrate while there is room, else key points, else the summary);
 * - task transition: a new task during an open step recalls for it;
 * - explicit reference: referencing a long-term entry by id (or quoting it)
 *   rehydrates it.
 * A cue the agent references in its step is promoted to a native working
 * entry with fresh fade tracking; the others are dropped at step end. Both
 * are events; the long-term record is never changed by a cue.
 *
 * Each part is its own module, composed here: the indexes (memory-indexes.ts)
 * and what the views' changes do to them (partition-hooks.ts), reads at a
 * position (caught-up.ts), queries (query.ts), recall (cue-recall.ts), the
 * reactions to the log (reactions.ts), warm-ups (warm-up.ts) and threads
 * (threads.ts); cue events are written by cue-writes.ts.
 */

import { Clock, Context, Effect, FiberSet, Layer } from "effect"
import { allPartitions } from "../../../contracts/partitions.ts"
import { AgentSharing } from "../../platform/access/sharing.ts"
import { serveOperation } from "../../platform/api/serve.ts"
import { EmbeddingProvider } from "../../platform/embedding/embedding-provider.ts"
import { makeCommandHandler } from "../../platform/log/command-handler.ts"
import { EventLog } from "../../platform/log/event-log.ts"
import { makeSubjectPositions } from "../../platform/log/subject-positions.ts"
import { Metrics } from "../../platform/observability/metrics.ts"
import { inspectionOf, type PartitionedServiceInspection } from "../../platform/partitions/inspection.ts"
import { partitionOwner } from "../../platform/partitions/partition-owner.ts"
import { projectPartitionedViews } from "../../platform/partitions/partitioned-views.ts"
import { SubstrateReader } from "../../platform/substrate-reader.ts"
import { makeOpenStepMemo } from "../../platform/views/open-step-memo.ts"
import { LongTerm } from "../longterm/longterm.ts"
import { LongTermStore } from "../longterm/store.ts"
import { makeCaughtUpReads } from "./caught-up.ts"
import { makeCueRecall, type RecalledCues } from "./cue-recall.ts"
import { makeCueWrites } from "./cue-writes.ts"
import { makeMemoryIndexes } from "./memory-indexes.ts"
import { makePartitionHooks } from "./partition-hooks.ts"
import { makeQuery } from "./query.ts"
import { makeReactions } from "./reactions.ts"
import { RetrievalSettings } from "./settings.ts"
import { makeThreads } from "./threads.ts"
import { makeWarmUp } from "./warm-up.ts"

export { RetrievalSettings, type RetrievalSettingsShape } from "./settings.ts"

/** What it shows of its partitions (inspection.ts), and its background work. */
export interface RetrievalShape extends PartitionedServiceInspection {
  /** Working entries whose vectors the background lane is making now (after a burst, a restart, a takeover). */
  readonly embeddingInBackground: () => number
}

export class Retrieval extends Context.Service<Retrieval, RetrievalShape>()("wm/Retrieval") {
  static readonly make = Effect.gen(function* () {
    const settings = yield* RetrievalSettings
    const store = yield* LongTermStore
    const longTerm = yield* LongTerm
    const embeddings = yield* EmbeddingProvider
    const substrate = yield* SubstrateReader
    const log = yield* EventLog
    const metrics = yield* Metrics
    const sharing = yield* AgentSharing
    const clock = yield* Clock.Clock
    const runFork = yield* FiberSet.makeRuntime<never>()

    const indexes = makeMemoryIndexes({ store, embeddings })
    const recalledSteps = makeOpenStepMemo<RecalledCues>()
    const positions = makeSubjectPositions()
    const partitions = makePartitionHooks({ indexes, positions, recalledSteps, longTerm, runFork })
    const views = yield* projectPartitionedViews("memory", partitions.hooks)
    // Runs before the views' own finalizers (last added, first run), which release the leases.
    yield* Effect.addFinalizer(() => Effect.sync(partitions.stop))
    // Cue writes are decided on this service's views and guarded on their subject, like every write.
    const commands = yield* makeCommandHandler({
      get: views.get,
      waitFor: views.projection.waitFor,
      waitForRecord: views.projection.waitForRecord,
      lastSeqOnSubject: positions.lastSeq,
    })
    const writes = makeCueWrites({ commands, metrics, clock })
    const { caughtUpTo, viewAfter } = makeCaughtUpReads({ views, longTerm, log })
    const { recallCues, recall } = makeCueRecall({
      settings,
      sources: indexes.sources,
      // An entry recalled again is read from what an earlier recall read. A promotion reads the log: an entry
      // whose forget has erased it is not promoted, whether or not this service has applied the forget yet.
      substrate: indexes.recalled.reader(substrate),
      writes,
      recalledSteps,
      viewAfter,
    })
    // Reactions start once every handler they use is defined.
    partitions.startReactions(
      views,
      makeReactions({ log, substrate, commands, writes, clock, recallCues, recalledSteps }),
    )

    yield* views.projection.warmedUp
    // A local store holds only the partitions this replica serves: what an earlier run left of others goes.
    const held = new Set(views.leases.held())
    yield* Effect.forEach(
      allPartitions().filter((p) => !held.has(p) && !longTerm.partitions().has(p)),
      longTerm.release,
      { discard: true },
    )

    const { query } = makeQuery({ sources: indexes.sources, viewAfter })
    const threads = makeThreads({ view: views.get, owns: views.owns, caughtUpTo, store, sharing })
    const { warmUp } = makeWarmUp({ settings, store, commands, writes, viewAfter })

    const owner = partitionOwner("retrieval", views)
    yield* threads.servePeerParts
    yield* serveOperation("query", query, owner)
    yield* serveOperation("thread", threads.thread, owner)
    yield* serveOperation("recall", recall, owner)
    yield* serveOperation("warmUp", warmUp, owner)

    return {
      ...inspectionOf(views),
      embeddingInBackground: () => indexes.workingVectors.inBackground(),
    } satisfies RetrievalShape
  })

  static readonly layer = Layer.effect(Retrieval, Retrieval.make)
}
