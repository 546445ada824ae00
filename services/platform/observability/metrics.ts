/**
 * The process's metrics: one prom-client registry holding the instruments declared in
 * contracts/metrics.ts, each under its declared name, kind, help and labels.
 *
 * Counters and histograms are updated where things happen. Gauges are read from the services' state at
 * each scrape instead: a service registers a collector for as long as its scope lives, and a scrape resets
 * every gauge and runs the collectors, so a partition this replica no longer holds leaves no stale series.
 *
 * `Metrics` is a reference with a default: code that records metrics runs unchanged where no process-wide
 * instance is provided (a test, a benchmark), recording into a registry nobody serves.
 */
import { Context, Effect, type Scope } from "effect"
import { Counter, Gauge, Histogram, Registry } from "prom-client"
import { metrics as declared, type MetricDeclaration, type MetricKind } from "../../../contracts/metrics.ts"

/** Each declared metric as the instrument of its kind (checked against the declaration when made). */
export interface Instruments {
  readonly requestDuration: Histogram
  readonly projectionLag: Gauge
  readonly partitionsOwned: Gauge
  readonly partitionsWithoutOwner: Gauge
  readonly leaseTakeovers: Counter
  readonly snapshotAge: Gauge
  readonly snapshotDuration: Histogram
  readonly snapshotBytes: Gauge
  readonly fadeDecisions: Counter
  readonly cuesPromoted: Counter
  readonly cuesDropped: Counter
  readonly recallsUnavailable: Counter
  readonly longtermWrites: Counter
  readonly errors: Counter
  readonly deadLetters: Counter
  readonly forgetsPending: Gauge
  readonly backgroundQueueDepth: Gauge
  readonly natsConnected: Gauge
}

export interface MetricsShape extends Instruments {
  readonly registry: Registry
  /** Runs `collect` at every scrape, after the gauges are reset, until the scope closes. */
  readonly collect: (collect: () => void) => Effect.Effect<void, never, Scope.Scope>
  /** The scrape in Prometheus text format. */
  readonly scrape: Effect.Effect<string>
}

/** Request latencies from 1 ms to 10 s: a read answers in milliseconds, a write waits for its append. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const SNAPSHOT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

const instrumentOf = (registry: Registry, declaration: MetricDeclaration): Counter | Gauge | Histogram => {
  const options = {
    name: declaration.name,
    help: declaration.help,
    labelNames: [...declaration.labels],
    registers: [registry],
  }
  switch (declaration.kind) {
    case "counter":
      return new Counter(options)
    case "gauge":
      return new Gauge(options)
    case "histogram":
      return new Histogram({
        ...options,
        buckets: declaration.name === declared.requestDuration.name ? REQUEST_BUCKETS : SNAPSHOT_BUCKETS,
      })
  }
}

const kindOf = (instrument: Counter | Gauge | Histogram): MetricKind =>
  instrument instanceof Counter ? "counter" : instrument instanceof Gauge ? "gauge" : "histogram"

export const makeMetrics = (): MetricsShape => {
  const registry = new Registry()
  const made = Object.entries(declared).map(([key, declaration]) => [key, instrumentOf(registry, declaration)] as const)
  const instruments = Object.fromEntries(made) as unknown as Instruments
  const gauges = made.flatMap(([, instrument]) => (kindOf(instrument) === "gauge" ? [instrument as Gauge] : []))
  const collectors = new Set<() => void>()
  return {
    ...instruments,
    registry,
    collect: (collect) =>
      Effect.acquireRelease(
        Effect.sync(() => collectors.add(collect)),
        () => Effect.sync(() => collectors.delete(collect)),
      ),
    scrape: Effect.suspend(() => {
      for (const gauge of gauges) gauge.reset()
      for (const collect of collectors) collect()
      return Effect.promise(() => registry.metrics())
    }),
  }
}

export const Metrics = Context.Reference<MetricsShape>("wm/Metrics", { defaultValue: makeMetrics })

/** Parts that run inside another service's process, and the service they are labelled with. */
const PART_OF: Readonly<Record<string, string>> = { eraser: "substrate", retrieval: "memory" }

/** The `service` label of a part of the system named `part` (a connection's `wm-<service>`, the eraser, retrieval). */
export const serviceLabel = (part: string): string => {
  const name = part.replace(/^wm-/, "")
  return PART_OF[name] ?? name
}
