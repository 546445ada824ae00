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
 */

import { Clock, Context, Effect, FiberSet, HashMap, Layer, Option } from "effect"
import type { RequestOf, ResponseOf } from "../../../contracts/api.ts"
import { AgentNotFound, InvalidState, NotCaughtUp } from "../../../contracts/errors.ts"
import type { EventOf, MemoryEvent } from "../../../contracts/events.ts"
import { focusText } from "../../../contracts/focus.ts"
import { allPartitions, partitionOf } from "../../../contracts/partitions.ts"
import { settings as configured } from "../../../contracts/settings.ts"
import { type AgentView, currentFocus } from "../../../domain/agent-view.ts"
import {
  decideCueDrops,
  decideExplicitRehydration,
  decidePromotion,
  decideRecall,
  type Recalled,
} from "../../../domain/cue-decide.ts"
import { planCueForms, rawCue } from "../../../domain/cue-plan.ts"
import type { Decision } from "../../../domain/decision.ts"
import { accept } from "../../../domain/decision.ts"
import { isLongTerm } from "../../../domain/entry-standing.ts"
import { DEFAULT_RELEVANCE } from "../../../domain/relevance.ts"
import { terms } from "../../../domain/terms.ts"
import { AgentSharing } from "../../platform/access/sharing.ts"
import { serveOperation } from "../../platform/api/serve.ts"
import { EmbeddingProvider } from "../../platform/embedding/embedding-provider.ts"
import { makeCommandHandler } from "../../platform/log/command-handler.ts"
import { readEntryFacts } from "../../platform/log/entry-facts.ts"
import { EventLog } from "../../platform/log/event-log.ts"
import { READ_WAIT } from "../../platform/log/projection.ts"
import { Metrics } from "../../platform/observability/metrics.ts"
import { partitionOwner } from "../../platform/partitions/partition-owner.ts"
import {
  type PartitionedViews,
  type PartitionHooks,
  projectPartitionedViews,
} from "../../platform/partitions/partitioned-views.ts"
import { SubstrateReader } from "../../platform/substrate-reader.ts"
import { makeOpenStepMemo } from "../../platform/views/open-step-memo.ts"
import { LongTerm } from "../longterm/longterm.ts"
import { LongTermStore } from "../longterm/store.ts"
import { EpisodeIndex } from "./episodes.ts"
import { indexEvent, memoryIndexState } from "./index-state.ts"
import { LexicalIndex } from "./lexical-index.ts"
import { hitText, type RankedHit, type RankingSources, rankBothTiers } from "./rank.ts"
import { makeThreads } from "./threads.ts"
import { WorkingTexts } from "./working-texts.ts"
import { WorkingVectors } from "./working-vectors.ts"

/** The metadata a recalled entry carries back, from whatever holds it (a working entry, a record, the substrate). */
const recalledMeta = (m: {
  readonly timestamp: number
  readonly origin: Recalled["origin"]
  readonly tags: ReadonlyArray<string>
  readonly moodSnapshot: Recalled["moodSnapshot"]
  readonly emotionalWeight: number
}) => ({
  timestamp: m.timestamp,
  origin: m.origin,
  tags: [...m.tags],
  moodSnapshot: m.moodSnapshot,
  emotionalWeight: m.emotionalWeight,
})
type CueTrigger = EventOf<"CueRehydrated">["trigger"]

export interface RetrievalSettingsShape {
  /**
   * Hits come back as cues only when their dense cosine, or their lexical match scaled to the best, reaches this
   * (0 by default: the `recallDepth` best hits qualify, and the builder ranks them).
   */
  readonly cueThreshold: number
  /** How many hits a recall considers. */
  readonly recallDepth: number
  /** Cues of one step may carry at most this share of the agent's budget. */
  readonly cueBudgetShare: number
  readonly warmUpCount: number
}

export class RetrievalSettings extends Context.Service<RetrievalSettings, RetrievalSettingsShape>()(
  "wm/RetrievalSettings",
) {
  /** WM_CUE_THRESHOLD, WM_RECALL_DEPTH, WM_CUE_BUDGET_SHARE, WM_WARMUP_COUNT, read with Effect Config; `settings` overrides them. */
  static readonly make = (settings: Partial<RetrievalSettingsShape> = {}) =>
    Layer.unwrap(
      Effect.gen(function* () {
        return Layer.succeed(RetrievalSettings, {
          cueThreshold: yield* configured.WM_CUE_THRESHOLD.config,
          recallDepth: yield* configured.WM_RECALL_DEPTH.config,
          cueBudgetShare: yield* configured.WM_CUE_BUDGET_SHARE.config,
          warmUpCount: yield* configured.WM_WARMUP_COUNT.config,
          ...settings,
        })
      }).pipe(Effect.orDie),
    )
}

export interface RetrievalShape {
  readonly view: (agentId: string) => AgentView | undefined
  /** The views of the partitions this replica owns. */
  readonly views: PartitionedViews
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

    const lexical = new LexicalIndex()
    const episodes = new EpisodeIndex()
    const texts = new WorkingTexts()
    const workingVectors = new WorkingVectors(embeddings.offline, texts)
    const sources: RankingSources = {
      store,
      embeddings,
      lexical,
      episodes,
      workingVectors: (agentId, entries) => Effect.promise(() => workingVectors.forQuery(agentId, entries)),
    }
    const recalledSteps = makeOpenStepMemo<{ cues: number; seq: number }>()
    /** Set once the partitioned views exist: reactions run only for agents whose partition answers. */
    let partitioned: PartitionedViews | null = null
    // Reactions start once every handler below is defined.
    let live = false

    const dropAgents = (agents: ReadonlyArray<string>) => {
      for (const agentId of agents) {
        lexical.dropAgent(agentId)
        episodes.dropAgent(agentId)
        texts.dropAgent(agentId)
        recalledSteps.forget(agentId)
      }
      workingVectors.dropAgents(agents)
    }

    /** Indexes both tiers' texts as the log goes; the partition's long-term projection runs beside it. */
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
      applied: (event, before, after) => {
        indexEvent(lexical, episodes, texts, event, after)
        if (after === undefined) {
          if (event._tag === "AgentForgotten") dropAgents([event.agentId])
          return
        }
        if (event._tag === "EntryDemoted" || event._tag === "EntryForgotten") {
          workingVectors.left(event.agentId, event.entryId)
        }
        if (live && partitioned?.owns(event.agentId)) {
          if (event._tag === "EntryRecorded") {
            const entry = HashMap.get(after.entries, event.entryId)
            if (Option.isSome(entry)) workingVectors.recorded(event.agentId, entry.value)
          }
          runFork(
            react(before, after, event).pipe(
              Effect.catchCause((c) =>
                // Given up meanwhile (a shutdown releases every partition): its views are gone, not wrong.
                partitioned?.takes(event.agentId)
                  ? Effect.logError("[retrieval]", c)
                  : Effect.logDebug("[retrieval]", c),
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
    let stopping = false
    const views = yield* projectPartitionedViews("memory", hooks)
    partitioned = views
    // Runs before the views' own finalizers (last added, first run), which release the leases.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        stopping = true
      }),
    )
    const projection = views.projection
    // Cue writes are decided on this service's views and guarded on their subject, like every write.
    const commands = yield* makeCommandHandler({ get: views.get, waitFor: views.projection.waitFor })
    /** Appends `event` unless, on the view as it stands, `holds` no longer does; retaken after a lost race. */
    const appendWhile = (agentId: string, event: MemoryEvent, holds: (view: AgentView) => boolean) =>
      commands.handle({
        agentId,
        operation: event._tag,
        decide: (view) => accept(holds(view) ? event : null),
        reply: (outcome) => {
          if (outcome.recorded && event._tag === "CuePromoted") metrics.cuesPromoted.inc()
          if (outcome.recorded && event._tag === "CueDropped") metrics.cuesDropped.inc()
          return { seq: outcome.seq }
        },
      })
    const stepOpen = (stepId: string) => (view: AgentView) => view.step?.stepId === stepId
    /** A cue brings back what working does not hold in full: not a native entry below rung 2. */
    const notHeldInFull = (entryId: string) => (view: AgentView) => {
      const native = Option.getOrUndefined(HashMap.get(view.entries, entryId))
      return native === undefined || native.rung >= 2
    }

    /** The events a cue decider accepted; a refusal here is a defect (the caller checked the step). */
    const decided = <E>(decision: Decision<E>): Effect.Effect<E> =>
      decision.ok ? Effect.succeed(decision.event) : Effect.die(decision.error)

    /**
     * Chooses each hit's representation while `room` lasts: the raw text
     * (from the substrate) while it fits, else key points, else the summary.
     * Sizes are known without reading anything; raw texts are then fetched
     * together.
     */
    const planCues = (view: AgentView, hits: ReadonlyArray<RankedHit>, room: number, focus: ReadonlySet<string>) => {
      const planned = planCueForms(hits, room, (hit) => ({
        rawTokens: hit.working?.tokens.raw ?? hit.record?.rawTokens ?? Infinity,
        keyPoints:
          hit.working?.keyPoints != null && hit.working.tokens.keyPoints !== undefined
            ? { text: hit.working.keyPoints, tokens: hit.working.tokens.keyPoints }
            : hit.record?.keyPoints != null && hit.record.keyPointsTokens !== null
              ? { text: hit.record.keyPoints, tokens: hit.record.keyPointsTokens }
              : undefined,
        summaryTokens: hit.working?.tokens.summary ?? hit.record?.summaryTokens ?? Infinity,
      }))
      return Effect.forEach(
        planned,
        ({ hit, form, keyPoints }) =>
          Effect.gen(function* () {
            const meta = hit.working ?? hit.record!
            const base = recalledMeta(meta)
            if (form === "raw") {
              const raw = yield* substrate.get(view.config.id, hit.entryId)
              if (raw !== null) return { hit, recalled: rawCue(meta, raw, keyPoints, focus, view.config.encoding) }
            }
            if (keyPoints && form !== "summary")
              return { hit, recalled: { ...base, form: "keyPoints", ...keyPoints } as Recalled }
            const summary = hitText(hit)
            const tokens = hit.working?.tokens.summary ?? hit.record?.summaryTokens ?? 0
            return summary.text.length > 0
              ? { hit, recalled: { ...base, form: summary.form, text: summary.text, tokens } as Recalled }
              : null
          }),
        { concurrency: 16 },
      ).pipe(Effect.map((xs) => xs.filter((x) => x !== null)))
    }

    /** Recalls for the open step's focus and records each cue as an event. */
    const recallCues = Effect.fn("Retrieval.recallCues")(function* (view: AgentView, trigger: CueTrigger) {
      const step = view.step!
      const query = focusText(currentFocus(view))
      const hits = yield* rankBothTiers(view, query, { limit: settings.recallDepth }, sources)
      // Cues bring back what working does not hold in full: long-term records and summarised entries.
      const eligible = hits.filter(
        (hit) =>
          !(hit.tier === "working" && hit.working!.rung < 2) &&
          !HashMap.has(view.cues, hit.entryId) &&
          (hit.dense >= settings.cueThreshold || hit.lexical >= settings.cueThreshold),
      )
      const cues = yield* planCues(
        view,
        eligible,
        Math.floor(view.budgetInForce * settings.cueBudgetShare),
        new Set(terms(query)),
      )
      const [ranked, ...rehydrated] = yield* decided(
        decideRecall(
          view,
          step.stepId,
          {
            trigger,
            similarities: hits
              .filter((h) => h.tier === "working")
              .map((h) => ({ entryId: h.entryId, similarity: h.similarity })),
            cues: cues.map(({ hit, recalled }) => ({
              entryId: hit.entryId,
              relevance: hit.similarity,
              correlationId: (hit.working ?? hit.record!).correlationId,
              recalled,
            })),
          },
          { at: yield* Clock.currentTimeMillis },
        ),
      )
      const first = yield* appendWhile(view.config.id, ranked!, stepOpen(step.stepId)).pipe(Effect.orDie)
      const seqs = yield* Effect.forEach(
        rehydrated as ReadonlyArray<EventOf<"CueRehydrated">>,
        (event) =>
          appendWhile(
            view.config.id,
            event,
            (current) =>
              stepOpen(step.stepId)(current) &&
              notHeldInFull(event.entryId)(current) &&
              !HashMap.has(current.cues, event.entryId),
          ).pipe(Effect.map((a) => a.seq)),
        { concurrency: 64 },
      ).pipe(Effect.orDie)
      return { cues: rehydrated.length, seq: Math.max(first.seq, ...seqs) }
    })

    const promote = (
      view: AgentView,
      stepId: string | null,
      entryId: string,
      trigger: CueTrigger,
      recalled: Recalled,
      key: string,
    ) =>
      decided(
        decidePromotion(view, { stepId, entryId, trigger, recalled, key }, { at: clock.currentTimeMillisUnsafe() }),
      ).pipe(
        Effect.flatMap((event) => appendWhile(view.config.id, event, notHeldInFull(entryId))),
        Effect.orDie,
      )

    const recalledOf = (cue: NonNullable<ReturnType<typeof cueOf>>): Recalled => {
      const base = recalledMeta(cue)
      if (cue.content !== null) {
        const kp =
          cue.keyPoints !== null && cue.tokens.keyPoints !== undefined
            ? { keyPoints: { text: cue.keyPoints, tokens: cue.tokens.keyPoints } }
            : {}
        return { ...base, form: "raw", text: cue.content, tokens: cue.tokens.raw, ...kp }
      }
      if (cue.keyPoints !== null)
        return { ...base, form: "keyPoints", text: cue.keyPoints, tokens: cue.tokens.keyPoints ?? 0 }
      return { ...base, form: "summary", text: cue.summary ?? "", tokens: cue.tokens.summary ?? 0 }
    }
    const cueOf = (view: AgentView, id: string) => Option.getOrUndefined(HashMap.get(view.cues, id))

    /** What the log asks of retrieval once live: promotions, explicit references, drops, task transitions. */
    const react = (before: AgentView | undefined, after: AgentView, event: MemoryEvent): Effect.Effect<void> => {
      switch (event._tag) {
        case "EntriesReferenced":
          return Effect.forEach(
            event.entryIds,
            (id) =>
              Effect.gen(function* () {
                const cue = cueOf(after, id)
                if (cue) return yield* promote(after, event.stepId, id, "similarity", recalledOf(cue), event.stepId)
                if (HashMap.has(after.entries, id)) return
                // Whether the entry is in long-term is the log's word (its subject), not the view's.
                const known = yield* readEntryFacts(log, after.config.id, [id]).pipe(Effect.orDie)
                if (!isLongTerm(known, id)) return
                // Explicit reference to a long-term entry: rehydrate it, and since it is used, make it native.
                const raw = yield* substrate.get(after.config.id, id)
                if (raw === null) return
                const recalled: Recalled = {
                  ...recalledMeta(raw),
                  form: "raw",
                  text: raw.content,
                  tokens: raw.tokens,
                }
                const stamp = { at: yield* Clock.currentTimeMillis, causationId: event.eventId }
                const rehydrated = yield* commands
                  .handle({
                    agentId: after.config.id,
                    operation: "CueRehydrated",
                    lookUp: () => [id],
                    decide: (current, facts) => {
                      if (!notHeldInFull(id)(current) || HashMap.has(current.cues, id)) return accept(null)
                      const rehydration = decideExplicitRehydration(
                        current,
                        event.stepId,
                        id,
                        recalled,
                        raw.correlationId,
                        stamp,
                        facts,
                      )
                      // The step may have ended, or the entry left long-term, meanwhile: nothing to rehydrate.
                      return rehydration.ok ? rehydration : accept(null)
                    },
                    reply: (outcome) => outcome.recorded,
                  })
                  .pipe(Effect.orDie)
                if (!rehydrated) return
                yield* promote(after, event.stepId, id, "explicit-reference", recalled, event.stepId)
              }),
            { discard: true },
          )
        case "StepEnded": {
          if (before === undefined) return Effect.void
          return decided(
            decideCueDrops(before, event.stepId, { at: clock.currentTimeMillisUnsafe(), causationId: event.eventId }),
          ).pipe(
            // A cue promoted meanwhile is native now: nothing to drop.
            Effect.flatMap((drops) =>
              Effect.forEach(drops, (drop) => appendWhile(before.config.id, drop, notHeldInFull(drop.entryId)), {
                discard: true,
              }),
            ),
            Effect.orDie,
          )
        }
        case "FocusChanged":
          if (!event.transition || after.step === null) return Effect.void
          return recallCues(after, "task-transition").pipe(
            Effect.tap((r) => Effect.sync(() => recalledSteps.set(after.config.id, after.step!.stepId, r))),
            Effect.asVoid,
            Effect.orDie,
          )
        default:
          return Effect.void
      }
    }

    live = true
    yield* projection.warmedUp
    // A local store holds only the partitions this replica serves: what an earlier run left of others goes.
    const held = new Set(views.leases.held())
    yield* Effect.forEach(
      allPartitions().filter((p) => !held.has(p) && !longTerm.partitions().has(p)),
      longTerm.release,
      { discard: true },
    )

    // Both tiers have applied `afterSeq`, or the read is told NotCaughtUp within READ_WAIT (inside one SDK attempt).
    const caughtUpTo = (afterSeq: number, agentId: string) =>
      Effect.all([projection.waitFor(afterSeq, READ_WAIT, agentId), longTerm.waitFor(afterSeq, agentId)], {
        concurrency: 2,
        discard: true,
      }).pipe(
        Effect.timeoutOrElse({
          duration: READ_WAIT,
          orElse: () =>
            Effect.fail(
              new NotCaughtUp({
                afterSeq,
                appliedSeq: Math.min(
                  projection.appliedSeq(agentId),
                  longTerm.partitions().get(partitionOf(agentId))?.storedSeq() ?? 0,
                ),
              }),
            ),
        }),
      )

    const viewAfter = Effect.fnUntraced(function* (agentId: string, afterSeq?: number) {
      if (afterSeq !== undefined) yield* caughtUpTo(afterSeq, agentId)
      const view = views.get(agentId)
      if (view === undefined) return yield* Effect.fail(new AgentNotFound({ agentId }))
      return view
    })

    const query = Effect.fn("Retrieval.query")(function* (agentId: string, request: RequestOf<"query">) {
      const view = yield* viewAfter(agentId, request.afterSeq)
      const hits = yield* rankBothTiers(
        view,
        request.query,
        { limit: request.limit ?? 10, filter: request.filter },
        sources,
      ).pipe(Effect.orDie)
      const weights = view.config.relevance ?? DEFAULT_RELEVANCE
      return {
        results: hits.map((h) => {
          const meta = h.working ?? h.record!
          return {
            entryId: h.entryId,
            tier: h.tier,
            origin: meta.origin,
            timestamp: meta.timestamp,
            tags: [...meta.tags],
            correlationId: meta.correlationId,
            ...hitText(h),
            relevance: h.relevance,
            ...(request.explain
              ? {
                  explain: {
                    similarity: h.similarity,
                    dense: h.dense,
                    lexical: h.lexical,
                    recency: h.recency,
                    frequency: h.frequency,
                    weights,
                  },
                }
              : {}),
          }
        }),
      } satisfies ResponseOf<"query">
    })

    const threads = makeThreads({ view: views.get, owns: views.owns, caughtUpTo, store, sharing })

    const recall = Effect.fn("Retrieval.recall")(function* (agentId: string, request: RequestOf<"recall">) {
      const view = yield* viewAfter(agentId, request.afterSeq)
      if (view.step?.stepId !== request.stepId) {
        return yield* Effect.fail(
          new InvalidState({ field: "stepId", reason: `step '${request.stepId}' is not the open step` }),
        )
      }
      const done = recalledSteps.get(agentId, request.stepId)
      if (done) return done
      const result = yield* recallCues(view, "similarity").pipe(Effect.orDie)
      recalledSteps.set(agentId, request.stepId, result)
      return result
    })

    /** Promotes the agent's most recently demoted records not in working, as a warm-up asks. */
    const promoteRecent = Effect.fnUntraced(function* (
      agentId: string,
      request: { readonly count?: number; readonly requestId?: string; readonly afterSeq?: number },
    ) {
      const view = yield* viewAfter(agentId, request.afterSeq)
      const count = request.count ?? settings.warmUpCount
      const records = (yield* store.list({ agentId }).pipe(Effect.orDie))
        .filter((r) => !HashMap.has(view.entries, r.entryId))
        .sort((a, b) => b.demotedAt - a.demotedAt || b.timestamp - a.timestamp)
        .slice(0, count)
      const key = `warmup-${request.requestId ?? (yield* Clock.currentTimeMillis).toString(36)}`
      let seq = 0
      for (const r of records) {
        const recalled: Recalled =
          r.keyPoints !== null && r.keyPointsTokens !== null
            ? { ...recalledMeta(r), form: "keyPoints", text: r.keyPoints, tokens: r.keyPointsTokens }
            : { ...recalledMeta(r), form: r.summaryForm, text: r.summary, tokens: r.summaryTokens }
        seq = (yield* promote(view, null, r.entryId, "warm-up", recalled, key)).seq
      }
      return { entryIds: records.map((r) => r.entryId), seq: seq || view.lastSeq }
    })
    // A warm-up promotes records chosen when it runs: with a request id, it runs once, and a retry is answered as it was.
    const warmUp = Effect.fn("Retrieval.warmUp")((agentId: string, request: RequestOf<"warmUp">) =>
      request.requestId === undefined
        ? promoteRecent(agentId, request)
        : commands.once(
            { agentId, operation: "warmUp", requestId: request.requestId, request },
            Effect.map(promoteRecent(agentId, request), (reply) => ({
              reply,
              recorded: reply.entryIds.length > 0,
              seq: reply.seq,
            })),
          ),
    )

    const owner = partitionOwner("retrieval", views)
    yield* threads.servePeerParts
    yield* serveOperation("query", query, owner)
    yield* serveOperation("thread", threads.thread, owner)
    yield* serveOperation("recall", recall, owner)
    yield* serveOperation("warmUp", warmUp, owner)

    return {
      view: (agentId) => views.get(agentId),
      views,
      embeddingInBackground: () => workingVectors.inBackground(),
    } satisfies RetrievalShape
  })

  static readonly layer = Layer.effect(Retrieval, Retrieval.make)
}
