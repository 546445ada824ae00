/**
 * The fade service: scores each agent's working entries and records rung
 * decisions as events — key points (rung 1), a summary (rung 2), or an
 * embedding and demotion out of working.
 *
 * It runs when a step ends, when working usage passes τ, after a budget
 * retune or the end of hyperfocus, after a task transition, and on a
 * timer; never on the path of a context build. Several workers may run for
 * a fleet: each owns the agents whose id hashes to its shard, and every
 * decision is appended with Nats-Expected-Last-Subject-Sequence on the
 * entry's subject, so a decision taken on a stale view is refused and the
 * entry re-evaluated, never moved twice.
 *
 * Summaries and embeddings are computed once, here, and travel in the
 * event; replaying the log applies them and calls nothing.
 */
import { Config, ConfigProvider, Context, Effect, HashMap, Layer, Option, Semaphore } from "effect"
import type { MemoryEvent } from "../../contracts/events.ts"
import { agentOfEventSubject } from "../../contracts/subjects.ts"
import { type AgentView, evolve, skipUndecodable } from "../../domain/agent-view.ts"
import { decideFadeMove, type EntryHistory, type MadeRepresentation, NO_HISTORY } from "../../domain/fade-decide.ts"
import { type FadeMove, planFade } from "../../domain/fade-plan.ts"
import { DEFAULT_FADE_CONFIG, type FadeConfig } from "../../domain/fade-score.ts"
import { extractKeyPoints } from "../../domain/key-points.ts"
import { encodeVector } from "../platform/embedding/embedder.ts"
import { EmbeddingProvider } from "../platform/embedding/embedding-provider.ts"
import { EventLog } from "../platform/log/event-log.ts"
import { runProjection, type WarmUp } from "../platform/log/projection.ts"
import { Summarizer } from "./summarizer.ts"

export interface FadeWorkerSettingsShape {
  readonly fade: FadeConfig
  /** How often every owned agent is re-evaluated even without a trigger. */
  readonly intervalMs: number
  /** This worker owns the agents whose id hashes to `index` modulo `count`. */
  readonly shard: { readonly index: number; readonly count: number }
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
      shard: { index: 0, count: 1 },
      maxPasses: 8,
      name: "fade",
      ...settings,
    })

  /** WM_FADE_INTERVAL_MS, WM_FADE_SHARD ("index/count"), WM_FADE_TAU, read with Effect Config like every setting. */
  static readonly fromEnv = () =>
    Layer.unwrap(
      Effect.gen(function* () {
        const intervalMs = yield* Config.Int("WM_FADE_INTERVAL_MS").pipe(Config.withDefault(30_000))
        const shard = yield* Config.String("WM_FADE_SHARD").pipe(
          Config.withDefault("0/1"),
          Config.mapEffect((text) => {
            const match = /^(\d+)\/(\d+)$/.exec(text.trim())
            const index = Number(match?.[1])
            const count = Number(match?.[2])
            return match && count >= 1 && index < count
              ? Effect.succeed({ index, count })
              : Effect.fail(
                  new Config.ConfigError(
                    new ConfigProvider.SourceError({
                      message: `WM_FADE_SHARD: '${text}' is not <index>/<count> with 0 <= index < count`,
                    }),
                  ),
                )
          }),
        )
        const tau = yield* Config.Number("WM_FADE_TAU").pipe(Config.withDefault(DEFAULT_FADE_CONFIG.tau))
        return FadeWorkerSettings.make({
          intervalMs,
          shard,
          fade: { ...DEFAULT_FADE_CONFIG, tau },
          name: shard.count > 1 ? `fade-${shard.index}` : "fade",
        })
      }).pipe(Effect.orDie),
    )
}

export interface FadeRun {
  readonly passes: number
  readonly applied: number
  readonly conflicts: number
}

export interface FadeWorkerShape {
  /** Evaluates one agent now, until nothing more moves (or the pass limit). */
  readonly evaluate: (agentId: string) => Effect.Effect<FadeRun>
  readonly view: (agentId: string) => AgentView | undefined
  readonly warmUp: WarmUp
  readonly stats: () => { readonly applied: number; readonly conflicts: number; readonly evaluations: number }
}

const hashOf = (s: string) => {
  let h = 0
  for (let i = 0; i < s.length; i++) h = (Math.imul(h, 31) + s.charCodeAt(i)) | 0
  return h >>> 0
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
  static readonly layer = Layer.effect(
    FadeWorker,
    Effect.gen(function* () {
      const settings = yield* FadeWorkerSettings
      const log = yield* EventLog
      const summarizer = yield* Summarizer
      const embeddings = yield* EmbeddingProvider
      const config = settings.fade
      const owns = (agentId: string) => hashOf(agentId) % settings.shard.count === settings.shard.index

      const views = new Map<string, AgentView>()
      // The raw text of every working entry: working drops it at rung 2, but demotion embeds it.
      const rawText = new Map<string, string>()
      // What a demotion records beside the view: key points working dropped, citations of earlier lives.
      const histories = new Map<string, EntryHistory>()
      const keepHistory = (before: AgentView | undefined, event: MemoryEvent) => {
        if (event._tag === "AgentForgotten") {
          for (const key of histories.keys()) if (key.startsWith(`${event.agentId}/`)) histories.delete(key)
          return
        }
        if (event._tag !== "RungChanged" && event._tag !== "EntryDemoted" && event._tag !== "EntryForgotten") return
        const key = `${event.agentId}/${event.entryId}`
        const history = histories.get(key) ?? NO_HISTORY
        if (event._tag === "EntryForgotten") histories.delete(key)
        else if (event._tag === "RungChanged") {
          if (event.to === 1) histories.set(key, { ...history, keyPoints: { text: event.text, tokens: event.tokens } })
        } else {
          const working =
            before === undefined ? undefined : Option.getOrUndefined(HashMap.get(before.entries, event.entryId))
          histories.set(
            key,
            event.entry !== null
              ? { keyPoints: event.entry.keyPoints ?? history.keyPoints, earlierCitations: event.entry.citationCount }
              : { ...history, earlierCitations: history.earlierCitations + (working?.citationCount ?? 0) },
          )
        }
      }
      const dirty = new Set<string>()
      let warmedUp = false
      let wake: (() => void) | null = null
      const markDirty = (agentId: string) => {
        if (!owns(agentId)) return
        dirty.add(agentId)
        if (warmedUp && wake) wake()
      }
      const stats = { applied: 0, conflicts: 0, evaluations: 0 }

      const projection = yield* runProjection({
        name: settings.name,
        apply: (event, record) => {
          if (!owns(event.agentId)) return
          const before = views.get(event.agentId)
          const next = evolve(before, event, record)
          keepHistory(before, event)
          if (next === undefined) {
            views.delete(event.agentId)
            if (event._tag === "AgentForgotten")
              for (const key of rawText.keys()) if (key.startsWith(`${event.agentId}/`)) rawText.delete(key)
            return
          }
          views.set(event.agentId, next)
          const key = `${event.agentId}/${"entryId" in event ? event.entryId : ""}`
          if (event._tag === "EntryRecorded") rawText.set(key, event.content)
          else if (event._tag === "CuePromoted" && event.recalled.form === "raw") rawText.set(key, event.recalled.text)
          else if (event._tag === "EntryDemoted" || event._tag === "EntryForgotten") rawText.delete(key)
          if (isTrigger(event)) markDirty(event.agentId)
        },
        onDeadLetter: (letter) => {
          const agentId = agentOfEventSubject(letter.subject)
          const view = views.get(agentId)
          if (view !== undefined) views.set(agentId, skipUndecodable(view, letter.subject, letter.seq))
        },
      })
      const warmUp = yield* projection.warmedUp
      warmedUp = true

      const execute = (view: AgentView, move: FadeMove) =>
        Effect.gen(function* () {
          const entry = Option.getOrUndefined(HashMap.get(view.entries, move.entryId))
          if (entry === undefined) return null
          const key = `${view.config.id}/${entry.id}`
          const raw = rawText.get(key) ?? entry.content
          const source = raw ?? entry.keyPoints ?? entry.summary ?? ""
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
            at: Date.now(),
            causationId: `seq:${move.expectSeq}`,
            correlationId: entry.correlationId,
          }
          const decision = decideFadeMove(view, move, made, stamp, histories.get(key))
          if (!decision.ok) return null
          return yield* log.append(decision.event, { expectLastSubjectSeq: move.expectSeq }).pipe(
            Effect.map((appended) => appended.seq),
            Effect.catchTag("SequenceConflict", () =>
              Effect.sync(() => {
                stats.conflicts++
                return null
              }),
            ),
          )
        })

      // One evaluation per agent at a time in this worker: a second would only redo the first's work.
      const locks = new Map<string, Semaphore.Semaphore>()
      const lockOf = (agentId: string) => {
        let lock = locks.get(agentId)
        if (lock === undefined) {
          lock = Semaphore.makeUnsafe(1)
          locks.set(agentId, lock)
        }
        return lock
      }

      const evaluate = (agentId: string): Effect.Effect<FadeRun> =>
        Effect.gen(function* () {
          stats.evaluations++
          let applied = 0
          let conflicts = 0
          let passes = 0
          for (; passes < settings.maxPasses; passes++) {
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
            yield* projection.waitFor(target, "30 seconds").pipe(Effect.ignore)
          }
          stats.applied += applied
          return { passes, applied, conflicts }
        }).pipe(
          lockOf(agentId).withPermits(1),
          Effect.catchCause((cause) =>
            Effect.sync(() => {
              console.error(`[${settings.name}] evaluating ${agentId} failed`, cause)
              return { passes: 0, applied: 0, conflicts: 0 }
            }),
          ),
        )

      // The evaluation loop: drains the dirty set, one evaluation per agent at a time.
      const loop = Effect.gen(function* () {
        while (true) {
          if (dirty.size === 0) {
            yield* Effect.callback<void>((resume) => {
              wake = () => {
                wake = null
                resume(Effect.void)
              }
              return Effect.sync(() => {
                wake = null
              })
            })
          }
          const agents = [...dirty]
          dirty.clear()
          yield* Effect.forEach(agents, evaluate, { concurrency: 4, discard: true })
        }
      })
      yield* Effect.forkScoped(loop)
      yield* Effect.forkScoped(
        Effect.gen(function* () {
          while (true) {
            yield* Effect.sleep(settings.intervalMs)
            for (const agentId of views.keys()) markDirty(agentId)
          }
        }),
      )
      for (const agentId of views.keys()) markDirty(agentId)

      return {
        evaluate,
        view: (agentId) => views.get(agentId),
        warmUp,
        stats: () => ({ ...stats }),
      }
    }),
  )
}
