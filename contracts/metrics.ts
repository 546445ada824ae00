/**
 * Every metric the services export at `/metrics` (Prometheus text format), declared once: its name, kind,
 * help text and label names. The services register exactly these; docs/metrics.md, the Grafana dashboard
 * and the alert rules in `infra/` are checked against this list. No label names an agent, an entry or a
 * request: a fleet's cardinality stays bounded by operations, services, partitions and rungs.
 */

export type MetricKind = "counter" | "gauge" | "histogram"

export interface MetricDeclaration {
  readonly name: string
  readonly kind: MetricKind
  readonly help: string
  readonly labels: ReadonlyArray<string>
}

const metric = (
  name: string,
  kind: MetricKind,
  help: string,
  labels: ReadonlyArray<string> = [],
): MetricDeclaration => ({ name, kind, help, labels })

export const metrics = {
  requestDuration: metric(
    "wm_request_duration_seconds",
    "histogram",
    "Time from receiving an API request to replying, by operation and outcome (ok, or the error's tag).",
    ["service", "operation", "outcome"],
  ),
  projectionLag: metric(
    "wm_projection_lag_events",
    "gauge",
    "Events between the last sequence of the log's partition and what the projection has applied.",
    ["service", "partition"],
  ),
  partitionsOwned: metric("wm_partitions_owned", "gauge", "Partitions whose lease this replica holds.", ["service"]),
  partitionsWithoutOwner: metric(
    "wm_partitions_without_owner",
    "gauge",
    "Partitions no replica of the service holds a lease on, as this replica last saw the leases.",
    ["service"],
  ),
  leaseTakeovers: metric(
    "wm_lease_takeovers_total",
    "counter",
    "Leases this replica took over from another replica (or from an expired lease).",
    ["service"],
  ),
  snapshotAge: metric(
    "wm_snapshot_age_seconds",
    "gauge",
    "Seconds since the last snapshot of a partition's view was written.",
    ["service", "partition"],
  ),
  snapshotDuration: metric(
    "wm_snapshot_duration_seconds",
    "histogram",
    "Time to encode and write one partition's snapshot.",
    ["service"],
  ),
  snapshotBytes: metric("wm_snapshot_bytes", "gauge", "Size of the last snapshot written.", ["service", "partition"]),
  fadeDecisions: metric(
    "wm_fade_decisions_total",
    "counter",
    "Fade decisions recorded, by the rung the entry moved to.",
    ["rung"],
  ),
  cuesPromoted: metric("wm_cues_promoted_total", "counter", "Long-term entries recalled as cues into a working view."),
  cuesDropped: metric("wm_cues_dropped_total", "counter", "Cues dropped from a working view at a step's end."),
  recallsUnavailable: metric(
    "wm_recalls_unavailable_total",
    "counter",
    "Context builds of a focused step served without its recall from long-term: retrieval did not answer.",
  ),
  longtermWrites: metric(
    "wm_longterm_writes_total",
    "counter",
    "Writes to the long-term store, by outcome (ok or error).",
    ["outcome"],
  ),
  errors: metric(
    "wm_errors_total",
    "counter",
    "Unexpected errors (defects and failed background work), by service and kind.",
    ["service", "kind"],
  ),
  deadLetters: metric("wm_dead_letters_total", "counter", "Events a projection could not apply and set aside.", [
    "service",
  ]),
  forgetsPending: metric("wm_forgets_pending", "gauge", "Forgets requested and not yet complete."),
  backgroundQueueDepth: metric(
    "wm_background_queue_depth",
    "gauge",
    "Items waiting in a background queue (embedding, fading, long-term writes).",
    ["service", "queue"],
  ),
  natsConnected: metric(
    "wm_nats_connected",
    "gauge",
    "1 while the service's NATS connection is up, 0 while it is disconnected or reconnecting.",
    ["service"],
  ),
} as const satisfies Record<string, MetricDeclaration>

export const metricNames: ReadonlyArray<string> = Object.values(metrics).map((m) => m.name)

/** The series names a scrape shows for a metric (a histogram's buckets, sum and count). */
export const seriesNames = (m: MetricDeclaration): ReadonlyArray<string> =>
  m.kind === "histogram" ? [`${m.name}_bucket`, `${m.name}_sum`, `${m.name}_count`] : [m.name]
