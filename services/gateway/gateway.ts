/**
 * The gateway: validates every write request, stamps ids and times, counts
 * tokens once, and appends the resulting event to the log. It decides
 * against its own projection of the agents' views; when that says no
 * (unknown agent, no open step...), it first catches up with the log and
 * decides again, so a write that just landed through another instance is
 * never refused.
 */
import { nuid } from "@nats-io/nuid"
import { Context, Effect, HashMap, Layer } from "effect"
import { operations, type OperationName, type ResponseOf } from "../../contracts/api.ts"
import { AgentNotFound, ValidationError, type ApiError } from "../../contracts/errors.ts"
import { agentConfigSubject, apiSubject, EVENTS_STREAM } from "../../contracts/subjects.ts"
import { decodeEvent } from "../log/decode.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import {
  decideBeginStep,
  decideEndStep,
  decideEnterHyperfocus,
  decideExitHyperfocus,
  decideFocus,
  decideRecord,
  decideReference,
  decideRegister,
  decideRetune,
  type Decision,
  type Stamp,
} from "../../domain/decide.ts"
import { preloadEncoding } from "../../domain/tokens.ts"
import { serveOperation } from "../api/serve.ts"
import { EventLog, type Appended } from "../log/event-log.ts"
import { Nats } from "../nats/connection.ts"
import type { WarmUp } from "../log/projection.ts"
import { projectAgentViews, type AgentViews } from "../views/agent-views.ts"

export interface GatewayShape {
  readonly views: AgentViews
  readonly warmUp: WarmUp
}

/** How many times a decision is retaken after losing an optimistic-concurrency race. */
const MAX_DECISION_ATTEMPTS = 5

export class Gateway extends Context.Service<Gateway, GatewayShape>()("wm/Gateway") {
  static readonly layer = Layer.effect(
    Gateway,
    Effect.gen(function* () {
      const log = yield* EventLog
      const { nc, jsm } = yield* Nats
      const views = yield* projectAgentViews("gateway")
      const warmUp = yield* views.projection.warmedUp
      for (const view of views.all().values()) preloadEncoding(view.config.encoding)

      const catchUp = Effect.flatMap(log.lastSeq, (seq) => views.projection.waitFor(seq, "5 seconds")).pipe(
        Effect.catch(() => Effect.void),
      )

      const stamp = (agentId: string, operation: OperationName, request: { readonly requestId?: string }, correlationId: string | null = null): Stamp => {
        const requestId = request.requestId ?? nuid.next()
        return { eventId: `${agentId}:${operation}:${requestId}`, agentId, at: Date.now(), causationId: requestId, correlationId }
      }

      /**
       * Decides against the current view; a refusal that a lagging view could
       * explain is retaken once after catching up with the log.
       */
      const decide = <E>(
        agentId: string,
        decider: (view: AgentView) => Decision<E>,
      ): Effect.Effect<{ readonly view: AgentView; readonly event: E }, ApiError> =>
        Effect.gen(function* () {
          const attempt = () => {
            const view = views.get(agentId)
            if (view === undefined) return { ok: false as const, error: new AgentNotFound({ agentId }) }
            const decision = decider(view)
            return decision.ok ? { ok: true as const, view, event: decision.event } : decision
          }
          let result = attempt()
          if (!result.ok && result.error._tag !== "ValidationError") {
            yield* catchUp
            result = attempt()
          }
          if (!result.ok) return yield* Effect.fail(result.error)
          return { view: result.view, event: result.event }
        })

      /** Appends, and after a lost race catches up and decides again. */
      const decideAndAppend = <E extends MemoryEvent | null>(
        agentId: string,
        decider: (view: AgentView) => Decision<E>,
        expectSeq?: (view: AgentView, event: E & MemoryEvent) => number | undefined,
      ): Effect.Effect<{ readonly view: AgentView; readonly event: E; readonly appended: Appended }, ApiError> =>
        Effect.gen(function* () {
          for (let attempt = 1; ; attempt++) {
            const { view, event } = yield* decide(agentId, decider)
            if (event === null) return { view, event, appended: { seq: view.lastSeq, duplicate: true } }
            const expected = expectSeq?.(view, event as E & MemoryEvent)
            const appended = yield* log
              .append(event as E & MemoryEvent, expected === undefined ? undefined : { expectLastSubjectSeq: expected })
              .pipe(
                Effect.catchTag("SequenceConflict", (conflict) =>
                  attempt < MAX_DECISION_ATTEMPTS ? Effect.succeed(null) : Effect.die(conflict),
                ),
              )
            if (appended !== null) return { view, event, appended }
            yield* catchUp
          }
        })

      yield* serveOperation("registerAgent", (agentId, request) =>
        Effect.gen(function* () {
          const s = stamp(agentId, "registerAgent", request)
          /** The sequence a new registration must follow: 0, or a forgotten agent's tombstone. */
          const registrationBase = Effect.tryPromise(() => jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: agentConfigSubject(agentId) })).pipe(
            Effect.map((last) => {
              if (last === null) return 0
              const decoded = decodeEvent(last.data)
              return decoded.ok && decoded.event._tag === "AgentForgotten" ? last.seq : 0
            }),
            Effect.orElseSucceed(() => 0),
          )
          const appendRegistration = (base: number) =>
            Effect.gen(function* () {
              const current = views.get(agentId)
              const decision = decideRegister(current, request, s)
              if (!decision.ok) return yield* Effect.fail(decision.error)
              if (decision.event === null) return { config: current!.config, budget: current!.budget, seq: current!.lastSeq }
              preloadEncoding(decision.event.config.encoding)
              // Expecting the subject as it was makes registration happen once, whoever races.
              const appended = yield* log.append(decision.event, { expectLastSubjectSeq: base })
              return { config: decision.event.config, budget: decision.event.config.budget, seq: appended.seq }
            })
          const result = yield* appendRegistration(0).pipe(
            Effect.catchTag("SequenceConflict", () =>
              Effect.andThen(catchUp, Effect.flatMap(registrationBase, (base) => appendRegistration(base))),
            ),
            Effect.catchTag("SequenceConflict", () => Effect.fail(new AgentNotFound({ agentId }))),
          )
          return { agent: result.config, budget: result.budget, seq: result.seq } satisfies ResponseOf<"registerAgent">
        }),
      )

      const budgetReply = (r: { view: AgentView; event: MemoryEvent | null; appended: Appended }): ResponseOf<"retuneBudget"> =>
        r.event?._tag === "BudgetChanged"
          ? { baseBudget: r.event.baseBudget, budget: r.event.budget, hyperfocus: r.event.reason === "hyperfocus-enter" ? true : r.event.reason === "hyperfocus-exit" ? false : r.view.hyperfocus, seq: r.appended.seq }
          : { baseBudget: r.view.config.budget, budget: r.view.budget, hyperfocus: r.view.hyperfocus, seq: r.appended.seq }
      const configSeq = (view: AgentView) => view.configSeq

      yield* serveOperation("retuneBudget", (agentId, request) =>
        decideAndAppend(agentId, (view) => decideRetune(view, request, stamp(agentId, "retuneBudget", request)), configSeq).pipe(
          Effect.map(budgetReply),
        ),
      )
      yield* serveOperation("enterHyperfocus", (agentId, request) =>
        decideAndAppend(agentId, (view) => decideEnterHyperfocus(view, request, stamp(agentId, "enterHyperfocus", request)), configSeq).pipe(
          Effect.map(budgetReply),
        ),
      )
      yield* serveOperation("exitHyperfocus", (agentId, request) =>
        decideAndAppend(agentId, (view) => decideExitHyperfocus(view, stamp(agentId, "exitHyperfocus", request)), configSeq).pipe(
          Effect.map(budgetReply),
        ),
      )

      yield* serveOperation("recordEntry", (agentId, request) =>
        Effect.gen(function* () {
          const s = stamp(agentId, "recordEntry", request, request.correlationId ?? null)
          const entryId = request.requestId ?? s.eventId.slice(s.eventId.lastIndexOf(":") + 1)
          const { event } = yield* decide(agentId, (view) => decideRecord(view, request, s, entryId))
          // An entry is created once: its subject must be empty, whatever the dedupe window.
          const appended = yield* log.append(event, { expectLastSubjectSeq: 0 }).pipe(
            Effect.catchTag("SequenceConflict", () =>
              Effect.map(log.lastSeq, (seq): Appended => ({ seq, duplicate: true })),
            ),
          )
          return {
            entryId,
            timestamp: event.timestamp,
            tokens: event.tokens,
            seq: appended.seq,
            duplicate: appended.duplicate,
          } satisfies ResponseOf<"recordEntry">
        }),
      )

      yield* serveOperation("beginStep", (agentId, request) =>
        Effect.gen(function* () {
          const s = stamp(agentId, "beginStep", request)
          const stepId = request.stepId ?? s.causationId ?? nuid.next()
          const { appended } = yield* decideAndAppend(agentId, (view) => decideBeginStep(view, request, s, stepId))
          return { stepId, seq: appended.seq } satisfies ResponseOf<"beginStep">
        }),
      )

      yield* serveOperation("setFocus", (agentId, request) =>
        decideAndAppend(agentId, (view) => decideFocus(view, request, stamp(agentId, "setFocus", request))).pipe(
          Effect.map(({ event, appended }) => ({ transition: event.transition, seq: appended.seq })),
        ),
      )

      /**
       * A quote refers to the entries whose text contains it: working entries and
       * cues first, else long-term entries, found through retrieval and checked
       * against their raw text in the substrate.
       */
      const normalise = (text: string) => text.toLowerCase().replace(/\s+/g, " ").trim()
      const ask = <A>(agentId: string, subject: string, body: unknown) =>
        Effect.tryPromise(() => nc.request(apiSubject(agentId, subject), JSON.stringify(body), { timeout: 5_000 })).pipe(
          Effect.map((reply) => reply.json<{ ok: boolean; value?: A }>()),
          Effect.map((reply) => (reply.ok ? (reply.value ?? null) : null)),
          Effect.orElseSucceed(() => null),
        )
      const resolveQuotes = (agentId: string, quotes: ReadonlyArray<string>) =>
        Effect.forEach(quotes, (quote) =>
          Effect.gen(function* () {
            const needle = normalise(quote)
            const view = views.get(agentId)
            if (view === undefined) return []
            const inWorking = [...HashMap.values(view.entries), ...HashMap.values(view.cues)]
              .filter((e) => [e.content, e.keyPoints, e.summary].some((t) => t !== null && normalise(t).includes(needle)))
              .map((e) => e.id)
            if (inWorking.length > 0) return inWorking
            const found = yield* ask<ResponseOf<"query">>(agentId, operations.query.subject, { query: quote, limit: 5 })
            const candidates = (found?.results ?? []).filter((r) => r.tier === "long-term").map((r) => r.entryId)
            const raws = yield* Effect.forEach(candidates, (entryId) => ask<ResponseOf<"getRaw">>(agentId, operations.getRaw.subject, { entryId }))
            return raws.filter((r) => r !== null && normalise(r.content).includes(needle)).map((r) => r!.entryId)
          }),
        ).pipe(Effect.map((ids) => ids.flat()))

      yield* serveOperation("referenceEntries", (agentId, request) =>
        Effect.gen(function* () {
          const quoted = request.quotes ? yield* resolveQuotes(agentId, request.quotes) : []
          const unresolved = (request.quotes ?? []).length > 0 && quoted.length === 0
          if (unresolved && (request.entryIds ?? []).length === 0) {
            return yield* Effect.fail(ValidationError.one("quotes", "no entry of this agent contains the quoted text"))
          }
          const merged = { ...request, entryIds: [...(request.entryIds ?? []), ...quoted] }
          const { event, appended } = yield* decideAndAppend(agentId, (view) =>
            decideReference(view, merged, stamp(agentId, "referenceEntries", request)),
          )
          return { entryIds: event.entryIds, seq: appended.seq }
        }),
      )

      yield* serveOperation("endStep", (agentId, request) =>
        decideAndAppend(agentId, (view) => decideEndStep(view, request, stamp(agentId, "endStep", request))).pipe(
          Effect.map(({ event, appended }) => ({ stepId: event.stepId, seq: appended.seq })),
        ),
      )

      return { views, warmUp }
    }),
  )
}

