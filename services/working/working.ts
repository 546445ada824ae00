/**
 * The working service: holds every agent's working view in memory, rebuilt
 * at start by replaying the log (warm-up) and then following it live, and
 * serves the context builder and the view inspector. Each build appends an
 * EntriesRead event (decided by `decideRead`, guarded on the step subject,
 * kept in the request ledger), from which reference counts are folded.
 */

import { nuid } from "@nats-io/nuid"
import { Clock, Context, Effect, Layer } from "effect"
import type { RequestOf, ResponseOf } from "../../contracts/api.ts"
import type { ApiError } from "../../contracts/errors.ts"
import { agentStepSubject } from "../../contracts/subjects.ts"
import { type AgentView, recallOf, viewResponseOf } from "../../domain/agent-view.ts"
import { decideRead, type Stamp } from "../../domain/decide.ts"
import { replayedContext, replyOfEvent, type StoredContext, storedContext } from "../../domain/requests.ts"
import { callOperation } from "../platform/api/call.ts"
import { serveOperation } from "../platform/api/serve.ts"
import { ContentKeys } from "../platform/keys/content-keys.ts"
import { readAgentEvents } from "../platform/log/agent-events.ts"
import { makeCommandHandler } from "../platform/log/command-handler.ts"
import { EventLog } from "../platform/log/event-log.ts"
import { knownView } from "../platform/log/known-view.ts"
import type { WarmUp } from "../platform/log/projection.ts"
import { Nats } from "../platform/nats/connection.ts"
import { Metrics } from "../platform/observability/metrics.ts"
import { inspectionOf, type PartitionedServiceInspection } from "../platform/partitions/inspection.ts"
import { partitionOwner } from "../platform/partitions/partition-owner.ts"
import { projectPartitionedViews } from "../platform/partitions/partitioned-views.ts"
import { makeOpenStepMemo } from "../platform/views/open-step-memo.ts"

/** What it shows of its partitions (inspection.ts), and how its warm-up went. */
export interface WorkingShape extends PartitionedServiceInspection {
  readonly warmUp: WarmUp
}

export class Working extends Context.Service<Working, WorkingShape>()("wm/Working") {
  static readonly make = Effect.gen(function* () {
    const log = yield* EventLog
    const { nc, js } = yield* Nats
    const keys = yield* ContentKeys
    const metrics = yield* Metrics
    // Only the partitions this replica holds a lease on (services/platform/partitions).
    const views = yield* projectPartitionedViews("working")
    const owner = partitionOwner("working", views)
    const commands = yield* makeCommandHandler({
      get: views.get,
      waitFor: views.projection.waitFor,
      waitForRecord: views.projection.waitForRecord,
    })

    /**
     * Before the first build of a focused step, asks the retrieval service to
     * rehydrate the step's cues, and waits until they are in the view. When
     * retrieval does not answer (not running, restarting, overloaded) the build
     * is served without cues and says so (`recall: "unavailable"`, counted in
     * `wm_recalls_unavailable_total`), and the step's next build asks again.
     */
    const recalled = makeOpenStepMemo<"asked" | "failed">()
    const recallCues = (view: AgentView): Effect.Effect<void> => {
      const step = view.step
      if (step === null || recallOf(view) === "none") return Effect.void
      if (recalled.get(view.config.id, step.stepId) === "asked") return Effect.void
      recalled.set(view.config.id, step.stepId, "asked")
      // Retrieval answers once it has seen what this view has: the step it recalls for, at least.
      return callOperation(nc, view.config.id, "recall", { stepId: step.stepId, afterSeq: view.lastSeq }).pipe(
        Effect.flatMap((recalled) => views.projection.waitForRecord(recalled.seq, view.config.id)),
        Effect.catch((error) => {
          if (recalled.get(view.config.id, step.stepId) === "asked") recalled.set(view.config.id, step.stepId, "failed")
          metrics.recallsUnavailable.inc()
          return Effect.logWarning(
            `agent '${view.config.id}', step '${step.stepId}': built without its cues, the recall failed (${error.message}); the next build asks again`,
          )
        }),
      )
    }

    /** The agent's view once the writes the caller has seen are applied. */
    const viewAfter = Effect.fnUntraced(function* (
      agentId: string,
      afterSeq: number | undefined,
    ): Effect.fn.Return<AgentView, ApiError> {
      if (afterSeq !== undefined) yield* views.projection.waitFor(afterSeq, undefined, agentId)
      return yield* knownView({ get: views.get, waitFor: views.projection.waitFor }, log, agentId)
    })

    const buildContext = Effect.fn("Working.buildContext")(function* (
      agentId: string,
      request: RequestOf<"buildContext">,
    ) {
      const view = yield* viewAfter(agentId, request.afterSeq)
      yield* recallCues(view)
      const requestId = request.requestId ?? nuid.next()
      const stamp: Stamp = {
        eventId: `${agentId}:buildContext:${requestId}`,
        agentId,
        at: yield* Clock.currentTimeMillis,
        causationId: requestId,
        correlationId: null,
      }
      return yield* commands.handle({
        agentId,
        operation: "buildContext",
        requestId: request.requestId,
        request,
        eventId: stamp.eventId,
        subject: agentStepSubject(agentId),
        decide: (current) => decideRead(current, request, stamp),
        eventOf: (decided) => decided.event,
        reply: ({ decided, seq }): ResponseOf<"buildContext"> => ({ ...decided.built, seq }),
        stored: storedContext,
        replay: (stored, current) => replayedContext(current, stored as StoredContext),
        fromEvent: (event, seq, current) =>
          replayedContext(current, replyOfEvent(current, event, seq) as StoredContext),
      })
    })

    const getView = Effect.fn("Working.getView")((agentId: string, request: RequestOf<"getView">) =>
      Effect.map(
        viewAfter(agentId, request.afterSeq),
        (view): ResponseOf<"getView"> => viewResponseOf(view, views.projection.appliedSeq(agentId)),
      ),
    )

    // An agent's own events for its local mirror: every event stored before the request (read your writes), in
    // stream order; with waitMs, a request finding nothing new waits for the agent's next event (a long poll).
    const readEvents = Effect.fn("Working.readEvents")(function* (agentId: string, request: RequestOf<"readEvents">) {
      const afterSeq = request.afterSeq ?? 0
      const known = () => views.get(agentId)?.lastSeq ?? 0
      yield* Effect.flatMap(log.lastSeq, (seq) => views.projection.waitFor(seq, undefined, agentId))
      const deadline = (yield* Clock.currentTimeMillis) + (request.waitMs ?? 0)
      while (known() <= afterSeq && (yield* Clock.currentTimeMillis) < deadline) yield* Effect.sleep("25 millis")
      const maxPayload = nc.info?.max_payload ?? 1024 * 1024
      return yield* readAgentEvents(js, keys, agentId, {
        afterSeq,
        untilSeq: known(),
        max: request.max ?? 256,
        // Room for the reply's envelope around the events.
        maxBytes: Math.max(64 * 1024, maxPayload - 128 * 1024),
      })
    })

    yield* serveOperation("buildContext", buildContext, owner)
    yield* serveOperation("getView", getView, owner)
    yield* serveOperation("readEvents", readEvents, owner)

    // Serving starts before warm-up ends: each partition answers once it has caught up (`views.owns`).
    const warmUp = yield* views.projection.warmedUp
    return { ...inspectionOf(views), warmUp } satisfies WorkingShape
  })

  static readonly layer = Layer.effect(Working, Working.make)
}
