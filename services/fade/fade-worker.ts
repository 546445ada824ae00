/**
 * The fade service: scores each agent's working entries and records rung
 * decisions as events — key points (rung 1), a summary (rung 2), or an
 * embedding and demotion out of working.
 *
 * It runs when a step ends, when working usage passes τ, after a budget
 * retune or the end of hyperfocus, after a task transition, and on a
 * timer; never on the path of a context build. Several workers may run for
 * a fleet: they divide the partitions by lease as the working replicas do
 * (services/platform/partitions), each following only its partitions'
 * events, and every decision is appended with
 * Nats-Expected-Last-Subject-Sequence on the entry's subject, so a decision
 * taken on a stale view is refused and the entry re-evaluated, never moved
 * twice.
 *
 * Summaries and embeddings are computed once, here, and travel in the
 * event; replaying the log applies them and calls nothing.
 */
import { Clock, Context, Effect, HashMap, Layer, Option, Queue, Semaphore } from "effect"
import type { MemoryEvent } from "../../contracts/events.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { settings } from "../../contracts/settings.ts"
import { type AgentView, fullestText } from "../../domain/agent-view.ts"
import { decideFadeMove, type MadeRepresentation } from "../../domain/fade-decide.ts"
import { type FadeMove, planFade } from "../../domain/fade-plan.ts"
import { DEFAULT_FADE_CONFIG, type FadeConfig } from "../../domain/fade-score.ts"
import { extractKeyPoints } from "../../domain/key-points.ts"
import { encodeVector } from "../platform/embedding/embedder.ts"
import { EmbeddingProvider } from "../platform/embedding/embedding-provider.ts"
import { readLastDemotion } from "../platform/log/entry-facts.ts"
import { EventLog } from "../platform/log/event-log.ts"
import type { WarmUp } from "../platform/log/projection.ts"
import { Metrics } from "../platform/observability/metrics.ts"
import { inspectionOf, type PartitionedServiceInspection } from "../platform/partitions/inspection.ts"
import { projectPartitionedViews } from "../platform/partitions/partitioned-views.ts"
import { RequestsFirst } from "../platform/scheduling/requests-first.ts"
import { KeptTexts } from "./kept-texts.ts"
import { Summarizer } from "./summarizer.ts"

export interface FadeWorkerSettingsShape {
  readonly fade: FadeConfig
  /** How often every owned agent is re-evaluated even without a trigger. */
  readonly intervalMs: number
  /** Plan-apply rounds per evaluation. */
  readonly maxPasses: number
  /** Instance name, for dead letters and logs. */
  readonly name: string
}

export class FadeWorkerSettings extends Context.Service<FadeWorkerSettings, FadeWorkerSettingsShape>()(
  "wm/FadeWorkerSettings",
) {
  static readonly make = (settings: Partial<FadeWorkerSettingsShape> = {}) =>
    Layer.succeed(FadeWorkerSettings, {
      fade: DEFAULT_FADE_CONFIG,
      intervalMs: 30_000,
      maxPasses: 8,
      name: "fade",
      ...settings,
    })

  /** WM_FADE_INTERVAL_MS, WM_FADE_TAU, read with Effect Config like every setting. */
  static readonly fromEnv = () =>
    Layer.unwrap(
      Effect.gen(function* () {
        const intervalMs = yield* settings.WM_FADE_INTERVAL_MS.config
        const tau = yield* settings.WM_FADE_TAU.config
        return FadeWorkerSettings.make({ intervalMs, fade: { ...DEFAULT_FADE_CONFIG, tau } })
      }).pipe(Effect.orDie),
    )
}

export interface FadeRun {
  readonly passes: number
  readonly applied: number
  readonly conflicts: number
}

/** What it shows of its partitions (inspection.ts), its evaluations, and the histories it keeps. */
export interface FadeWorkerShape extends PartitionedServiceInspection {
  /** Evaluates one agent now, until nothing more moves (or the pass limit). */
  readonly evaluate: (agentId: string) => Effect.Effect<FadeRun>
  readonly warmUp: WarmUp
  readonly stats: () => { readonly applied: number; readonly conflicts: number; readonly evaluations: number }
  /** Entries whose history is kept (working entries with key points or an earlier life): not the demoted ones. */
  readonly trackedHistories: () => number
}

/** Events after which an agent's entries may have to move. */
const isTrigger = (event: MemoryEvent): boolean => {
  switch (event._tag) {
    case "StepEnded":
    case "EntryRecorded":
    case "CuePromoted":
      return true
    case "BudgetChanged":
      return event.reason !== "hyperfocus-enter"
    case "FocusChanged":
      return event.transition
    default:
      return false
  }
}

export class FadeWorker extends Context.Service<FadeWorker, FadeWorkerShape>()("wm/FadeWorker") {
  static readonly make = Effect.gen(function* () {
    const settings = yield* FadeWorkerSettings
    const log = yield* EventLog
    const metrics = yield* Metrics
    const summarizer = yield* Summarizer
    const embeddings = yield* EmbeddingProvider
    const requestsFirst = yield* RequestsFirst
    const config = settings.fade
    const texts = new KeptTexts()
    /** An entry promoted back from long-term: its earlier life is what its subject's last demotion carried. */
    const historyOf = Effect.fnUntraced(function* (agentId: string, entryId: string) {
      const kept = texts.history(agentId, entryId)
      if (kept?.earlierLife !== true) return kept
      const demotion = yield* readLastDemotion(log, agentId, entryId)
      const earlier = demotion?.entry ?? null
      if (earlier === null) return kept
      return { keyPoints: kept.keyPoints ?? earlier.keyPoints, earlierCitations: earlier.citationCount }
    })
    const forgetAgent = (agentId: string) => {
      texts.forgetAgent(agentId)
      locks.delete(agentId)
      pendingSince.delete(agentId)
      lastTrigger.delete(agentId)
    }

    // Work behind the log, for the progress report: per agent, its first trigger that no evaluation has
    // covered yet (its sequence, and how many records of the partition had been applied before it), and
    // its latest trigger's sequence; per partition, how many records have been applied.
    const pendingSince = new Map<string, { readonly seq: number; readonly records: number }>()
    const lastTrigger = new Map<string, number>()
    const recordsApplied = new Map<number, number>()
    const countRecord = (partition: number) => {
      recordsApplied.set(partition, (recordsApplied.get(partition) ?? 0) + 1)
    }
    /** An evaluation that started on a view at `covers`, `records` into its partition, ended: the triggers up to there are dealt with. */
    const covered = (agentId: string, covers: number, records: number) => {
      const first = pendingSince.get(agentId)
      if (first === undefined || first.seq > covers) return
      // A trigger came in meanwhile: counted from just after what was covered.
      if ((lastTrigger.get(agentId) ?? 0) > covers) pendingSince.set(agentId, { seq: covers + 1, records })
      else {
        pendingSince.delete(agentId)
        lastTrigger.delete(agentId)
      }
    }
    /** Fade's work on a partition is done up to just before its oldest trigger still waiting, and behind from there. */
    const behind = (partition: number) => {
      let oldest: { readonly seq: number; readonly records: number } | null = null
      for (const [agentId, first] of pendingSince)
        if (partitionOf(agentId) === partition && (oldest === null || first.seq < oldest.seq)) oldest = first
      if (oldest === null) return null
      return { seq: oldest.seq - 1, records: (recordsApplied.get(partition) ?? 0) - oldest.records }
    }

    // Agents to evaluate, each queued once until its evaluation starts.
    const dirty = new Set<string>()
    const toEvaluate = yield* Queue.unbounded<string>()
    const stats = { applied: 0, conflicts: 0, evaluations: 0 }
    // One evaluation per agent at a time in this worker: a second would only redo the first's work.
    const locks = new Map<string, Semaphore.Semaphore>()

    // Only the partitions this worker holds a lease on; their snapshots carry the kept texts beside the views.
    const views = yield* projectPartitionedViews("fade", {
      state: texts.kept(),
      applied: (event, before, after, record) => {
        countRecord(partitionOf(event.agentId))
        texts.apply(event, before, after)
        if (after === undefined) {
          if (event._tag === "AgentForgotten") {
            locks.delete(event.agentId)
            pendingSince.delete(event.agentId)
            lastTrigger.delete(event.agentId)
          }
          return
        }
        if (isTrigger(event)) markDirty(event.agentId, record.seq)
      },
      deadLettered: (partition) => countRecord(partition),
      behind,
      ready: (_partition, agents) => {
        for (const agentId of agents) markDirty(agentId)
      },
      lost: (partition, agents) => {
        for (const agentId of agents) forgetAgent(agentId)
        recordsApplied.delete(partition)
      },
    })
    /** Queues the agent's evaluation; `triggeredAt`: the sequence of the event that calls for it. */
    const markDirty = (agentId: string, triggeredAt?: number) => {
      if (!views.owns(agentId)) return
      if (triggeredAt !== undefined) {
        // The trigger's record is applied already: the records before it are the count less one.
        const records = (recordsApplied.get(partitionOf(agentId)) ?? 1) - 1
        if (!pendingSince.has(agentId)) pendingSince.set(agentId, { seq: triggeredAt, records })
        lastTrigger.set(agentId, triggeredAt)
      }
      if (dirty.has(agentId)) return
      dirty.add(agentId)
      Queue.offerUnsafe(toEvaluate, agentId)
    }
    const warmUp = yield* views.projection.warmedUp

    const execute = Effect.fn("FadeWorker.execute")(function* (view: AgentView, move: FadeMove) {
      const entry = Option.getOrUndefined(HashMap.get(view.entries, move.entryId))
      if (entry === undefined) return null
      // Extracts, summaries and the offline embedder run on the event loop the process's requests use.
      yield* requestsFirst.backgroundTurn
      const source = texts.rawText(view.config.id, entry.id) ?? fullestText(entry)
      const made: MadeRepresentation =
        move.to === 1
          ? { to: 1, keyPoints: extractKeyPoints(source, config.keyPointsShare, view.config.encoding) }
          : move.to === 2
            ? yield* Effect.map(
                summarizer.summarize(source, { share: config.summaryShare, encoding: view.config.encoding }),
                (s) => ({
                  to: 2 as const,
                  summary: s.text,
                  producer: s.producer,
                }),
              )
            : yield* Effect.map(embeddings.embed(source), (e) => ({
                to: 3 as const,
                embedding: {
                  model: e.model,
                  dims: e.vector.length,
                  vector: encodeVector(e.vector),
                  producer: e.producer,
                },
              }))
      const stamp = {
        eventId: `${view.config.id}:fade:${entry.id}:${move.from}-${move.to}:${move.expectSeq}`,
        agentId: view.config.id,
        at: yield* Clock.currentTimeMillis,
        causationId: `seq:${move.expectSeq}`,
        correlationId: entry.correlationId,
      }
      const history = move.to === 3 ? yield* historyOf(view.config.id, entry.id) : undefined
      const decision = decideFadeMove(view, move, made, stamp, history)
      if (!decision.ok) return null
      return yield* log.append(decision.event, { expectLastSubjectSeq: move.expectSeq }).pipe(
        Effect.map((appended) => {
          if (!appended.duplicate) metrics.fadeDecisions.inc({ rung: String(move.to) })
          return appended.seq
        }),
        Effect.catchTag("SequenceConflict", () =>
          Effect.sync(() => {
            stats.conflicts++
            return null
          }),
        ),
      )
    })

    const lockOf = (agentId: string) => {
      let lock = locks.get(agentId)
      if (lock === undefined) {
        lock = Semaphore.makeUnsafe(1)
        locks.set(agentId, lock)
      }
      return lock
    }

    const runPasses = Effect.fnUntraced(function* (agentId: string) {
      stats.evaluations++
      let applied = 0
      let conflicts = 0
      let passes = 0
      for (; passes < settings.maxPasses; passes++) {
        yield* requestsFirst.backgroundTurn
        const view = views.get(agentId)
        if (view === undefined) break
        const moves = planFade(view, config)
        if (moves.length === 0) break
        const seqs = yield* Effect.forEach(moves, (move) => execute(view, move), { concurrency: 8 })
        const done = seqs.filter((s): s is number => s !== null)
        applied += done.length
        conflicts += seqs.length - done.length
        // Plan again only on a view that includes these decisions (and whatever beat them).
        const target = done.length > 0 ? Math.max(...done) : yield* log.lastSeq
        yield* views.projection.waitFor(target, "30 seconds", agentId).pipe(Effect.ignore)
      }
      stats.applied += applied
      return { passes, applied, conflicts } satisfies FadeRun
    })

    const evaluate: (agentId: string) => Effect.Effect<FadeRun> = Effect.fn("FadeWorker.evaluate")(
      function* (agentId: string) {
        // The first pass plans on the view as applied now: every trigger up to here is dealt with.
        const covers = views.projection.appliedSeq(agentId)
        const records = recordsApplied.get(partitionOf(agentId)) ?? 0
        return yield* runPasses(agentId).pipe(Effect.ensuring(Effect.sync(() => covered(agentId, covers, records))))
      },
      (evaluation, agentId) =>
        evaluation.pipe(
          lockOf(agentId).withPermits(1),
          Effect.catchCause((cause) =>
            Effect.as(Effect.logError(`[${settings.name}] evaluating ${agentId} failed`, cause), {
              passes: 0,
              applied: 0,
              conflicts: 0,
            }),
          ),
        ),
    )

    // The evaluation loop: drains the dirty set, one evaluation per agent at a time.
    const loop = Effect.gen(function* () {
      while (true) {
        const agents = yield* Queue.takeAll(toEvaluate)
        for (const agentId of agents) dirty.delete(agentId)
        yield* Effect.forEach(agents, evaluate, { concurrency: 4, discard: true })
      }
    })
    yield* Effect.forkScoped(loop)
    yield* Effect.forkScoped(
      Effect.gen(function* () {
        while (true) {
          yield* Effect.sleep(settings.intervalMs)
          for (const agentId of views.all().keys()) markDirty(agentId)
        }
      }),
    )

    return {
      evaluate,
      ...inspectionOf(views),
      warmUp,
      stats: () => ({ ...stats }),
      trackedHistories: () => texts.trackedHistories(),
    } satisfies FadeWorkerShape
  })

  static readonly layer = Layer.effect(FadeWorker, FadeWorker.make)
}
