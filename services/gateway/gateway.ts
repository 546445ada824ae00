/**
 * The gateway: validates every write request, stamps ids and times, counts
 * tokens once, and appends the resulting event to the log. Its replicas
 * divide the partitions by lease, as the working service's do; each decides
 * against its projection of its own partitions' views; when that says no
 * (unknown agent, no open step...), it first catches up with the log and
 * decides again, so a write that just landed through another instance is
 * never refused. Every write goes through the command handler: guarded by
 * the expected sequence of its subject and kept in the request ledger.
 * An entry's subject is its own ledger; batches of entries are recorded
 * entry by entry, their appends pipelined. New entries of an agent wait
 * (`Overloaded`) while background work on its partition is far behind the
 * log (back-pressure.ts). Each group of operations is a module of its own
 * (registration, agent-settings, entries, batches, steps) over what every
 * write shares (writes.ts); this one builds them and serves them.
 */

import { Clock, Context, Effect, Layer } from "effect"
import { preloadEncoding } from "../../domain/tokens.ts"
import { makeAdmission } from "../platform/api/admission.ts"
import { serveOperation } from "../platform/api/serve.ts"
import { makeCommandHandler } from "../platform/log/command-handler.ts"
import { EventLog } from "../platform/log/event-log.ts"
import type { WarmUp } from "../platform/log/projection.ts"
import { inspectionOf, type PartitionedServiceInspection } from "../platform/partitions/inspection.ts"
import { openLeaseBucket } from "../platform/partitions/leases.ts"
import { partitionOwner } from "../platform/partitions/partition-owner.ts"
import { projectPartitionedViews } from "../platform/partitions/partitioned-views.ts"
import { progressReader } from "../platform/partitions/progress.ts"
import { PartitionSettings } from "../platform/partitions/settings.ts"
import { makeAgentSettings } from "./agent-settings.ts"
import { makeBackPressure } from "./back-pressure.ts"
import { makeBatches } from "./batches.ts"
import { makeEntries } from "./entries.ts"
import { makeQuoteResolver } from "./quotes.ts"
import { makeRegistration } from "./registration.ts"
import { GatewaySettings } from "./settings.ts"
import { makeSteps } from "./steps.ts"
import { makeWrites } from "./writes.ts"

/** What it shows of its partitions (inspection.ts), and how its warm-up went. */
export interface GatewayShape extends PartitionedServiceInspection {
  readonly warmUp: WarmUp
}

export class Gateway extends Context.Service<Gateway, GatewayShape>()("wm/Gateway") {
  static readonly make = Effect.gen(function* () {
    const log = yield* EventLog
    const settings = yield* GatewaySettings
    const clock = yield* Clock.Clock
    // New entries wait while background work on their partition is far behind (back-pressure.ts).
    const backPressure = makeBackPressure(
      settings.maxProjectionLag,
      progressReader(yield* openLeaseBucket((yield* PartitionSettings).leaseTtlMs)),
      clock,
    )
    // Only the partitions this replica holds a lease on (services/platform/partitions).
    const views = yield* projectPartitionedViews("gateway")
    const owner = partitionOwner("gateway", views)
    const commands = yield* makeCommandHandler({
      get: views.get,
      waitFor: views.projection.waitFor,
      waitForRecord: views.projection.waitForRecord,
    })

    const writes = makeWrites(log, views, commands, clock)
    const { registerAgent } = makeRegistration(log, views, commands, writes)
    const { retuneBudget, enterHyperfocus, exitHyperfocus } = makeAgentSettings(writes)
    const entries = makeEntries(log, backPressure, writes)
    const { recordEntry } = entries
    const { recordMany } = makeBatches(settings, backPressure, writes, entries)
    const { beginStep, setFocus, referenceEntries, endStep } = makeSteps(yield* makeQuoteResolver, writes)
    const { decidingOnCurrentLog } = writes
    // An idle agent's request at once, a few places for the rest: one agent's burst does not slow another's.
    const admission = makeAdmission(settings.concurrentRequests)

    yield* serveOperation("registerAgent", decidingOnCurrentLog(registerAgent), owner, admission)
    yield* serveOperation("retuneBudget", decidingOnCurrentLog(retuneBudget), owner, admission)
    yield* serveOperation("enterHyperfocus", decidingOnCurrentLog(enterHyperfocus), owner, admission)
    yield* serveOperation("exitHyperfocus", decidingOnCurrentLog(exitHyperfocus), owner, admission)
    yield* serveOperation("recordEntry", decidingOnCurrentLog(recordEntry), owner, admission)
    yield* serveOperation("recordMany", decidingOnCurrentLog(recordMany), owner, admission)
    yield* serveOperation("beginStep", decidingOnCurrentLog(beginStep), owner, admission)
    yield* serveOperation("setFocus", decidingOnCurrentLog(setFocus), owner, admission)
    yield* serveOperation("referenceEntries", decidingOnCurrentLog(referenceEntries), owner, admission)
    yield* serveOperation("endStep", decidingOnCurrentLog(endStep), owner, admission)

    // Serving starts before warm-up ends: each partition answers once it has caught up (`views.owns`).
    const warmUp = yield* views.projection.warmedUp
    // Once the views of the snapshots are decoded (behind the partitions, which answer before).
    yield* Effect.forkScoped(
      Effect.andThen(
        views.decoded,
        Effect.sync(() => {
          for (const view of views.all().values()) preloadEncoding(view.config.encoding)
        }),
      ),
    )
    return { ...inspectionOf(views), warmUp } satisfies GatewayShape
  })

  static readonly layer = Layer.effect(Gateway, Gateway.make)
}
