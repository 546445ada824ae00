/**
 * The Qdrant long-term store: the durable adapter of `LongTermStore`, over
 * the official REST client.
 *
 * Layout — `shared` (the default): payload partitioning, not a collection per agent:
 *
 * - One collection per embedding model (the vectors of one model share one
 *   dimension), named `<prefix><model slug>_<8 hex of sha1(model)>`, e.g.
 *   `wm_longterm_text_embedding_3_small_1a2b3c4d` (default prefix
 *   `wm_longterm_`). The hash keeps two models whose slugs collide apart.
 *   Cosine distance.
 * - Every agent's records live in that one collection, told apart by the
 *   `agentId` payload field, indexed as a keyword with `is_tenant: true`
 *   (Qdrant >= 1.11): storage is laid out by tenant, so one agent's points
 *   sit together on disk and a filtered query reads only them. The HNSW
 *   graph is built per tenant (`payload_m: 16`) and not globally (`m: 0`),
 *   as every dense search here names its agent.
 * - Keyword indexes on `origin`, `tags` and `correlationId`, and an integer
 *   range index on `timestamp`, serve the record filter.
 *
 * A fleet is many small agents: a collection each would mean thousands of
 * collections, each with its own segments, WAL, optimiser and index build,
 * and a cold start per new agent. One collection per model is one index
 * build, one set of segments, and tenant-aware storage that keeps per-agent
 * reads local.
 *
 * Layout `per-agent` (`WM_QDRANT_COLLECTIONS=per-agent`): a collection per
 * agent and model, `<the model's collection name>_<agent id>_<16 hex>`
 * (`agentCollectionName`), created on the agent's first write with the same
 * vectors, indexes and optimizer settings. A deleted point stays in Qdrant's
 * files until its segment is vacuumed (SECURITY.md); a deleted collection's
 * directory, its WAL included, is removed. So the agent's forget deletes its
 * collections instead of its points, and every read of an agent goes to its
 * collections alone. An entry's forget still deletes points. The price is a
 * collection per agent: what the shared layout avoids, above.
 *
 * Collections and indexes are created when a model is first written
 * (created if missing; "already exists" from a concurrent creator is fine).
 * Point ids are UUIDs derived from (agentId, entryId), so a retried or
 * replayed upsert overwrites the same point. Transient failures (network
 * errors, timeouts, 429, 5xx) are retried with a bounded exponential
 * schedule; anything else is a `LongTermStoreError`.
 *
 * The store is durable: the long-term projection keeps a checkpoint for it
 * (see longterm.ts), keyed by `name`, which names the target (URL, prefix
 * and layout) so a different target never resumes from another's checkpoint.
 */
import { createHash } from "node:crypto"
import {
  QdrantClient,
  QdrantClientResourceExhaustedError,
  QdrantClientTimeoutError,
  type Schemas,
} from "@qdrant/js-client-rest"
import { Clock, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { isSubjectToken } from "../../../contracts/ids.ts"
import { LongTermPayload, type RecordFilter } from "../../../contracts/longterm.ts"
import type { QdrantCollectionLayout } from "../../../contracts/settings.ts"
import { type Hit, type LongTermRecord, LongTermStore, LongTermStoreError, type LongTermStoreShape } from "./store.ts"

export interface QdrantStoreConfig {
  /** e.g. `http://localhost:6333` or `https://xyz.cloud.qdrant.io:6333`. */
  readonly url: string
  /** Sent as the `api-key` header when set. */
  readonly apiKey?: string | undefined
  /** Prefix of the collection names; default `wm_longterm_`. */
  readonly collectionPrefix?: string | undefined
  /** One collection per model for every agent (`shared`, the default), or one per agent and model (`per-agent`). */
  readonly collections?: QdrantCollectionLayout | undefined
  /** Points per upsert request and per scroll page; default 256. */
  readonly batchSize?: number | undefined
  /** Retries of a transient failure; default 6. */
  readonly retries?: number | undefined
  /** First retry delay, doubling, with jitter; default 100 ms. */
  readonly retryBase?: Duration.Input | undefined
  /** Longest retry delay; default 5 s. */
  readonly retryCap?: Duration.Input | undefined
  /** Per-request timeout in ms; default 30 000. */
  readonly timeoutMs?: number | undefined
  /** How long the list of collections and each agent's models are cached, in ms; default 5 000. */
  readonly cacheTtlMs?: number | undefined
}

export const DEFAULT_COLLECTION_PREFIX = "wm_longterm_"
const PREFIX_PATTERN = /^[A-Za-z0-9_-]{0,64}$/

// ---------------------------------------------------------------------------
// Names and ids

/** The collection holding the records of one embedding model. */
export const collectionName = (prefix: string, model: string): string => {
  const slug =
    model
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "_")
      .replace(/^_+|_+$/g, "")
      .slice(0, 48) || "model"
  return `${prefix}${slug}_${createHash("sha1").update(model, "utf8").digest("hex").slice(0, 8)}`
}

/** 16 hex of sha1(prefix, agent): ties a per-agent collection's name to its prefix and its agent. */
const agentTag = (prefix: string, agentId: string): string =>
  createHash("sha1").update(`${prefix}\n${agentId}`, "utf8").digest("hex").slice(0, 16)

/**
 * The collection holding one agent's records of one embedding model (layout `per-agent`): the model's
 * collection name, the agent id, and a tag of the prefix and the agent, e.g.
 * `wm_longterm_text_embedding_3_small_1a2b3c4d_planner_0f1e2d3c4b5a6978`. Agent ids are subject tokens
 * (1–64 of A-Za-z0-9_-), so the name is at most 64 + 57 + 1 + 64 + 17 = 203 characters of A-Za-z0-9_-:
 * within Qdrant's collection names (1–255, none of `<>:"/\|?*`). The tag tells agents apart whose names
 * differ only in case (a file system may not), and makes a name read back decide its agent (`agentOfCollection`).
 */
export const agentCollectionName = (prefix: string, model: string, agentId: string): string =>
  `${collectionName(prefix, model)}_${agentId}_${agentTag(prefix, agentId)}`

/** What `collectionName` puts after the prefix: a lowercase slug, `_`, 8 hex. */
const MODEL_PART = /^[a-z0-9_]+_[0-9a-f]{8}$/
const TAG = /^[0-9a-f]{16}$/

/**
 * The agent whose collection `name` is under `prefix` (layout `per-agent`), or null when it is none. Read
 * from the name alone, so an emptied collection is still known as the agent's. The tag decides where the
 * agent id starts (ids may hold `_`), and rules out a collection of a longer prefix that starts with this one.
 */
export const agentOfCollection = (prefix: string, name: string): string | null => {
  if (!name.startsWith(prefix)) return null
  const rest = name.slice(prefix.length)
  const tagAt = rest.length - 16
  if (tagAt < 2 || rest[tagAt - 1] !== "_" || !TAG.test(rest.slice(tagAt))) return null
  const end = tagAt - 1
  for (let at = rest.indexOf("_"); at >= 0 && at < end; at = rest.indexOf("_", at + 1)) {
    const agentId = rest.slice(at + 1, end)
    if (
      isSubjectToken(agentId) &&
      MODEL_PART.test(rest.slice(0, at)) &&
      agentTag(prefix, agentId) === rest.slice(tagAt)
    )
      return agentId
  }
  return null
}

/** RFC 4122 name-based UUID, version 5 (SHA-1). */
export const uuidV5 = (namespace: string, name: string): string => {
  const digest = createHash("sha1")
    .update(Buffer.from(namespace.replace(/-/g, ""), "hex"))
    .update(name, "utf8")
    .digest()
  digest[6] = (digest[6]! & 0x0f) | 0x50
  digest[8] = (digest[8]! & 0x3f) | 0x80
  const hex = digest.subarray(0, 16).toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`
}

const URL_NAMESPACE = "6ba7b811-9dad-11d1-80b4-00c04fd430c8"
/** The namespace of point ids. Stored ids derive from it: never change it. */
export const POINT_NAMESPACE = uuidV5(URL_NAMESPACE, "urn:working-memory:longterm-point")

/** The point id of an agent's entry: the same pair always gives the same id. */
export const pointId = (agentId: string, entryId: string): string => uuidV5(POINT_NAMESPACE, `${agentId}/${entryId}`)

/**
 * Where the client sends requests, read from the URL as a URL means it: its port, or the scheme's
 * (443, 80) when it names none — not Qdrant's 6333 — and its path as the prefix of every request (a
 * Qdrant behind a proxy at `https://host/qdrant`). The client's own `url` option would do neither.
 */
export const clientAddress = (
  url: string,
): { readonly host: string; readonly port: number; readonly https: boolean; readonly prefix?: string } => {
  const parsed = new URL(url)
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new Error(`QDRANT_URL ${JSON.stringify(url)}: expected an http:// or https:// URL`)
  const https = parsed.protocol === "https:"
  const prefix = parsed.pathname.replace(/\/+$/, "")
  return {
    host: parsed.hostname,
    port: parsed.port !== "" ? Number(parsed.port) : https ? 443 : 80,
    https,
    ...(prefix !== "" ? { prefix } : {}),
  }
}

// ---------------------------------------------------------------------------
// Request bodies

/** The payload indexes every collection carries; the tenant index first, before any data. */
/**
 * The payload indexes every collection carries; the tenant index first, before any data. Only the tenant
 * gets HNSW links (`payload_m`); the others are filters within an agent's graph, and `enable_hnsw: false`
 * keeps Qdrant (1.17+; earlier servers ignore the key) from building a graph per value of each.
 */
export const PAYLOAD_INDEXES: ReadonlyArray<Schemas["CreateFieldIndex"] & { readonly field_name: string }> = [
  { field_name: "agentId", field_schema: { type: "keyword", is_tenant: true } },
  { field_name: "origin", field_schema: { type: "keyword", enable_hnsw: false } },
  { field_name: "tags", field_schema: { type: "keyword", enable_hnsw: false } },
  { field_name: "correlationId", field_schema: { type: "keyword", enable_hnsw: false } },
  { field_name: "timestamp", field_schema: { type: "integer", lookup: false, range: true, enable_hnsw: false } },
]

/**
 * A new collection, laid out for erasure as far as Qdrant allows (SECURITY.md, "Qdrant"): a deleted
 * point's payload and vector stay in its segment until the vacuum optimizer rewrites the segment, so
 * vacuum runs at the smallest segment size Qdrant accepts (100 points) and at 5% deleted instead of 20%;
 * and the write-ahead log, which keeps every upsert until a whole segment of it is truncated, is cut into
 * 1 MB segments instead of 32 MB, one closed segment kept.
 */
export const collectionBody = (dims: number): Schemas["CreateCollection"] => ({
  vectors: { size: dims, distance: "Cosine" },
  hnsw_config: { m: 0, payload_m: 16 },
  optimizers_config: { deleted_threshold: 0.05, vacuum_min_vector_number: 100 },
  wal_config: { wal_capacity_mb: 1, wal_segments_ahead: 0, wal_retain_closed: 1 },
})

/**
 * The conditions selecting an agent's records (all agents' when `agentId` is
 * omitted) that match the filter, with `matchesFilter`'s semantics; `null`
 * when nothing can match (an empty any-of list).
 */
export const filterConditions = (
  agentId: string | undefined,
  filter: RecordFilter | undefined,
): Array<Schemas["Condition"]> | null => {
  const must: Array<Schemas["Condition"]> = []
  if (agentId !== undefined) must.push({ key: "agentId", match: { value: agentId } })
  if (filter === undefined) return must
  if (filter.origins !== undefined) {
    if (filter.origins.length === 0) return null
    must.push({ key: "origin", match: { any: [...filter.origins] } })
  }
  if (filter.tags !== undefined) {
    if (filter.tags.length === 0) return null
    must.push({ key: "tags", match: { any: [...filter.tags] } })
  }
  if (filter.correlationId !== undefined) must.push({ key: "correlationId", match: { value: filter.correlationId } })
  if (filter.from !== undefined || filter.to !== undefined) {
    const range: Schemas["Range"] = {}
    if (filter.from !== undefined) range.gte = filter.from
    if (filter.to !== undefined) range.lt = filter.to
    must.push({ key: "timestamp", range })
  }
  return must
}

const asFilter = (must: Array<Schemas["Condition"]>): { filter?: Schemas["Filter"] } =>
  must.length > 0 ? { filter: { must } } : {}

// ---------------------------------------------------------------------------
// Failures

interface Failure {
  readonly what: string
  readonly status: number | null
  readonly message: string
  readonly transient: boolean
  /** The request as it is can never pass (a bad request), as opposed to a refusal that may lift (login, quota). */
  readonly refused?: true
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
])

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null && key in value ? (value as Record<string, unknown>)[key] : undefined

const isNetworkError = (cause: unknown): boolean => {
  for (let e: unknown = cause, depth = 0; e !== undefined && depth < 4; e = field(e, "cause"), depth++) {
    const code = field(e, "code")
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true
    if (e instanceof TypeError && e.message === "fetch failed") return true
  }
  return false
}

/** Qdrant's strict-mode refusals that can lift with time (Qdrant 1.19, collection verification). */
const LIFTING_LIMITS = /limit of .* reached|Resident memory usage/i

/** A write sent with wait=true that Qdrant answered without "completed" (its wait ran out): not known applied. */
class WriteNotConfirmed extends Error {}

const failure = (what: string, cause: unknown): Failure => {
  if (cause instanceof WriteNotConfirmed) return { what, status: null, message: cause.message, transient: true }
  const status = field(cause, "status")
  if (typeof status === "number") {
    // Qdrant's error body: { status: { error: "..." }, time }
    const detail = field(field(field(cause, "data"), "status"), "error")
    const message = typeof detail === "string" ? detail : cause instanceof Error ? cause.message : String(cause)
    // A strict-mode limit reached (points, storage, memory) lifts as points are deleted or memory frees:
    // the write waits and is sent again, instead of its records being refused for good.
    const limited = status === 400 && LIFTING_LIMITS.test(message)
    const refused = (status === 400 || status === 422) && !limited
    return {
      what,
      status,
      message,
      transient: limited || status === 408 || status === 429 || status >= 500,
      ...(refused ? { refused: true as const } : {}),
    }
  }
  const message = cause instanceof Error ? cause.message : String(cause)
  const transient =
    cause instanceof QdrantClientTimeoutError ||
    cause instanceof QdrantClientResourceExhaustedError ||
    isNetworkError(cause)
  return { what, status: null, message, transient }
}

const permanent = (what: string, message: string): Failure => ({
  what,
  status: null,
  message,
  transient: false,
  refused: true,
})

const toStoreError = (f: Failure) =>
  new LongTermStoreError({
    reason: `qdrant: ${f.what} failed${f.status !== null ? ` (HTTP ${f.status})` : ""}: ${f.message}`,
    ...(f.refused ? { refused: true } : {}),
  })

/**
 * A collection this adapter did not lay out as it needs: not cosine, or the agent not its tenant. Every
 * record would be refused alike, so it is not a refusal of the records (which would dead-letter them all)
 * but a failure the writer waits out while it is logged, until the collection is fixed or the prefix changed.
 */
const misconfigured = (name: string, reason: string): Failure => ({
  what: `check of collection ${name}`,
  status: null,
  message: `${reason}; recreate it or set another WM_QDRANT_COLLECTION_PREFIX`,
  transient: false,
})

/** What is wrong with an existing collection's layout, or null. */
export const collectionMisfit = (info: Schemas["CollectionInfo"]): string | null => {
  const vectors = info.config.params.vectors
  const distance = vectors !== undefined && "distance" in vectors ? vectors.distance : undefined
  if (distance !== "Cosine") return `its vectors use ${String(distance)} distance, not Cosine`
  const tenant = info.payload_schema.agentId
  if (tenant === undefined) return null
  const params = tenant.params
  const isTenant =
    tenant.data_type === "keyword" && params !== null && params !== undefined && field(params, "is_tenant") === true
  return isTenant ? null : `its agentId index is not a keyword index with is_tenant: true`
}

const isMissingCollection = (f: Failure) => f.status === 404 && /collection/i.test(f.message)
const isAlreadyExists = (f: Failure) => f.status === 409 || (f.status === 400 && /already exists/i.test(f.message))

const decodePayload = Schema.decodeUnknownEffect(LongTermPayload)

const byTimeThenEntry = (a: LongTermPayload, b: LongTermPayload) =>
  a.timestamp - b.timestamp || (a.entryId < b.entryId ? -1 : 1)
const byScoreThenEntry = (a: Hit, b: Hit) => b.score - a.score || (a.payload.entryId < b.payload.entryId ? -1 : 1)

const chunks = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

// ---------------------------------------------------------------------------
// The store

/** A collection of the shared layout: every agent's records of one model. */
interface Collection {
  readonly name: string
  readonly model: string
}

/** A collection of the per-agent layout: one agent's records of one model. */
interface AgentCollection {
  readonly name: string
  readonly agentId: string
}

/**
 * The collections of this prefix, of both layouts, by name: a deployment that changed its layout still has
 * the other layout's collections, and an erasure reaches them too.
 */
interface Catalog {
  readonly at: number
  readonly shared: Map<string, Collection>
  readonly agents: Map<string, AgentCollection>
}

interface Ensured {
  readonly model: string
  readonly dims: number
  /** The collection's agent, in the per-agent layout. */
  readonly agentId?: string
}

export const makeQdrantStore = (config: QdrantStoreConfig): LongTermStoreShape => {
  const prefix = config.collectionPrefix ?? DEFAULT_COLLECTION_PREFIX
  if (!PREFIX_PATTERN.test(prefix))
    throw new Error(
      `Qdrant collection prefix ${JSON.stringify(prefix)}: up to 64 characters of A-Z, a-z, 0-9, '_' or '-'`,
    )
  const perAgent = config.collections === "per-agent"
  const batchSize = Math.max(1, config.batchSize ?? 256)
  const ttl = config.cacheTtlMs ?? 5_000
  const client = new QdrantClient({
    ...clientAddress(config.url),
    ...(config.apiKey !== undefined && config.apiKey !== "" ? { apiKey: config.apiKey } : {}),
    timeout: config.timeoutMs ?? 30_000,
    checkCompatibility: false,
  })
  const retry = Schedule.jittered(
    Schedule.min([
      Schedule.exponential(config.retryBase ?? Duration.millis(100), 2),
      Schedule.spaced(config.retryCap ?? Duration.seconds(5)),
    ]),
  )
  const retries = config.retries ?? 6
  const nameOf = (model: string) => collectionName(prefix, model)
  /** The collection an agent's records of `model` are written to, in this store's layout. */
  const targetOf = (agentId: string, model: string) =>
    perAgent ? agentCollectionName(prefix, model, agentId) : nameOf(model)

  /** One request, retried while its failure is transient. */
  const call = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, Failure> =>
    Effect.tryPromise({ try: () => run(), catch: (cause) => failure(what, cause) }).pipe(
      Effect.retry({ schedule: retry, times: retries, while: (f) => f.transient }),
    )
  /** A write, confirmed applied: with wait=true Qdrant says "completed"; anything else is sent again (writes are idempotent). */
  const write = (what: string, run: () => Promise<Schemas["UpdateResult"]>): Effect.Effect<void, Failure> =>
    call(what, async () => {
      const result = await run()
      if (result.status !== "completed")
        throw new WriteNotConfirmed(`Qdrant answered "${result.status}", not "completed": not known to be applied`)
    })
  /** A missing collection reads as `fallback` (nothing was ever written with that model). */
  const orIfMissing =
    <B>(fallback: B) =>
    <A>(self: Effect.Effect<A, Failure>): Effect.Effect<A | B, Failure> =>
      Effect.catch(self, (f) => (isMissingCollection(f) ? Effect.succeed(fallback) : Effect.fail(f)))
  const orIfExists = <A>(self: Effect.Effect<A, Failure>): Effect.Effect<A | undefined, Failure> =>
    Effect.catch(self, (f) => (isAlreadyExists(f) ? Effect.succeed(undefined) : Effect.fail(f)))

  const decode = (where: string, id: Schemas["ExtendedPointId"], payload: unknown) =>
    decodePayload(payload).pipe(
      Effect.mapError((error) => permanent(`decode of point ${id} in ${where}`, String(error))),
    )

  // Collections this process created or checked, by name.
  const ensured = new Map<string, Ensured>()
  // Collection name -> model, learned from a stored point (names carry a hash, not the model).
  const modelOf = new Map<string, string>()
  // Collection name -> its agent in the per-agent layout, or null: read from the name, which never changes meaning.
  const agentOfName = new Map<string, string | null>()
  let catalog: Catalog | null = null
  const modelsCache = new Map<string, { readonly at: number; readonly models: ReadonlyArray<string> }>()

  const agentOf = (name: string): string | null => {
    let agentId = agentOfName.get(name)
    if (agentId === undefined) {
      agentId = agentOfCollection(prefix, name)
      agentOfName.set(name, agentId)
    }
    return agentId
  }

  /** A collection this process ensured is listed from then on, though the list was read before it existed. */
  const addEnsured = (into: Catalog, name: string, { model, agentId }: Ensured) => {
    if (agentId === undefined) into.shared.set(name, { name, model })
    else into.agents.set(name, { name, agentId })
  }

  const ensure = (
    name: string,
    model: string,
    dims: number,
    agentId: string | undefined,
  ): Effect.Effect<void, Failure> =>
    Effect.gen(function* () {
      const known = ensured.get(name)
      if (known !== undefined) {
        if (known.dims !== dims)
          return yield* Effect.fail(
            permanent(`upsert into ${name}`, `model ${model} has ${known.dims} dimensions, got ${dims}`),
          )
        return
      }
      const info = yield* call(`read collection ${name}`, () => client.getCollection(name)).pipe(orIfMissing(null))
      let indexed: ReadonlySet<string>
      if (info === null) {
        yield* call(`create collection ${name}`, () => client.createCollection(name, collectionBody(dims))).pipe(
          orIfExists,
        )
        indexed = new Set()
      } else {
        const vectors = info.config.params.vectors
        const size =
          vectors !== undefined && "size" in vectors && typeof vectors.size === "number" ? vectors.size : null
        if (size !== dims)
          return yield* Effect.fail(
            permanent(`upsert into ${name}`, `collection has vectors of size ${size}, model ${model} has ${dims}`),
          )
        const misfit = collectionMisfit(info)
        if (misfit !== null) return yield* Effect.fail(misconfigured(name, misfit))
        indexed = new Set(Object.keys(info.payload_schema))
      }
      for (const index of PAYLOAD_INDEXES) {
        if (indexed.has(index.field_name)) continue
        yield* write(`index ${index.field_name} of ${name}`, () =>
          client.createPayloadIndex(name, { ...index, wait: true }),
        ).pipe(orIfExists)
      }
      const entry: Ensured = agentId === undefined ? { model, dims } : { model, dims, agentId }
      ensured.set(name, entry)
      modelOf.set(name, model)
      if (catalog !== null) addEnsured(catalog, name, entry)
    })

  /** After a collection was found dropped, or was dropped here: known again only once created or listed anew. */
  const dropped = (name: string) => {
    ensured.delete(name)
    modelOf.delete(name)
    catalog = null
  }

  /**
   * The collections of this prefix, with the model of each shared one and the agent of each per-agent one;
   * listed at most every `ttl` ms for reads, and anew (`fresh`) for an erasure, which must reach a
   * collection another replica created a moment ago.
   */
  const listCollections = (fresh: boolean): Effect.Effect<Catalog, Failure> =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (fresh || catalog === null || now - catalog.at >= ttl) {
        const listed = yield* call("list collections", () => client.getCollections())
        const found: Catalog = { at: now, shared: new Map(), agents: new Map() }
        for (const { name } of listed.collections) {
          if (!name.startsWith(prefix)) continue
          const agentId = agentOf(name)
          if (agentId !== null) {
            found.agents.set(name, { name, agentId })
            continue
          }
          let model = modelOf.get(name)
          if (model === undefined) {
            const sample = yield* call(`sample ${name}`, () =>
              client.scroll(name, { limit: 1, with_payload: ["model"], with_vector: false }),
            ).pipe(orIfMissing(null))
            const m = field(sample?.points[0]?.payload, "model")
            // Another prefix may start with this one: a collection is ours only if its name is its model's.
            if (typeof m === "string" && nameOf(m) === name) {
              model = m
              modelOf.set(name, m)
            }
          }
          if (model !== undefined) found.shared.set(name, { name, model })
        }
        for (const [name, entry] of ensured) addEnsured(found, name, entry)
        catalog = found
      }
      return catalog
    })
  const collections = listCollections(false)

  /** The per-agent collections of one agent. */
  const collectionsOf = (listed: Catalog, agentId: string): ReadonlyArray<AgentCollection> =>
    [...listed.agents.values()].filter((c) => c.agentId === agentId)
  /** Where this store's layout keeps an agent's records (every agent's when `agentId` is undefined). */
  const holding = (listed: Catalog, agentId: string | undefined): ReadonlyArray<Collection | AgentCollection> =>
    perAgent
      ? agentId === undefined
        ? [...listed.agents.values()]
        : collectionsOf(listed, agentId)
      : [...listed.shared.values()]

  const scrollAll = (name: string, must: Array<Schemas["Condition"]>) =>
    Effect.gen(function* () {
      const points: Array<Schemas["Record"]> = []
      let offset: Schemas["ExtendedPointId"] | null = null
      do {
        const from: Schemas["ExtendedPointId"] | null = offset
        const page: Schemas["ScrollResult"] | null = yield* call(
          `scroll ${name}`,
          (): Promise<Schemas["ScrollResult"]> =>
            client.scroll(name, {
              ...asFilter(must),
              limit: batchSize,
              with_payload: true,
              with_vector: false,
              ...(from !== null ? { offset: from } : {}),
            }),
        ).pipe(orIfMissing(null))
        if (page === null) break
        points.push(...page.points)
        const next: unknown = page.next_page_offset
        offset = typeof next === "string" || typeof next === "number" ? next : null
      } while (offset !== null)
      return points
    })

  const forget = (agentIds: Iterable<string>) => {
    for (const agentId of agentIds) modelsCache.delete(agentId)
  }

  const agentFilter = (agentId: string): Schemas["Filter"] => ({
    must: [{ key: "agentId", match: { value: agentId } }],
  })

  const upsert = (records: ReadonlyArray<LongTermRecord>): Effect.Effect<void, Failure> =>
    Effect.gen(function* () {
      // Last write wins within a batch, as it would across batches.
      const latest = new Map<string, LongTermRecord>()
      for (const r of records) {
        const id = pointId(r.payload.agentId, r.payload.entryId)
        latest.delete(id)
        latest.set(id, r)
      }
      const targets = new Map<string, { readonly name: string; readonly agentId: string }>()
      const byCollection = new Map<
        string,
        {
          readonly model: string
          readonly agentId: string
          readonly dims: number
          readonly points: Schemas["PointStruct"][]
        }
      >()
      for (const [id, r] of latest) {
        const { agentId, entryId, model } = r.payload
        if (perAgent && !isSubjectToken(agentId))
          return yield* Effect.fail(
            permanent(
              `upsert of ${JSON.stringify(agentId)}/${entryId}`,
              "an agent id names its collection: 1-64 characters of A-Z, a-z, 0-9, '_' or '-'",
            ),
          )
        const name = targetOf(agentId, model)
        targets.set(id, { name, agentId })
        let group = byCollection.get(name)
        if (group === undefined) {
          group = { model, agentId, dims: r.vector.length, points: [] }
          byCollection.set(name, group)
        }
        group.points.push({ id, vector: Array.from(r.vector), payload: { ...r.payload, tags: [...r.payload.tags] } })
      }
      for (const [name, { model, agentId, dims, points }] of byCollection) {
        const upsertAll = Effect.gen(function* () {
          yield* ensure(name, model, dims, perAgent ? agentId : undefined)
          for (const batch of chunks(points, batchSize))
            yield* write(`upsert into ${name}`, () => client.upsert(name, { wait: true, points: [...batch] }))
        })
        // A collection dropped from outside since it was ensured is created again, once.
        yield* upsertAll.pipe(
          Effect.catch((f) =>
            isMissingCollection(f)
              ? Effect.andThen(
                  Effect.sync(() => dropped(name)),
                  upsertAll,
                )
              : Effect.fail(f),
          ),
        )
      }
      // An entry re-embedded with another model leaves no copy under the previous one (in its agent's
      // collections, per agent).
      const agents = new Set([...targets.values()].map((t) => t.agentId))
      const listed = yield* collections
      for (const other of holding(listed, undefined)) {
        const owner = "agentId" in other ? other.agentId : undefined
        if (owner !== undefined && !agents.has(owner)) continue
        const stale: string[] = []
        for (const [id, target] of targets)
          if (target.name !== other.name && (owner === undefined || target.agentId === owner)) stale.push(id)
        for (const ids of chunks(stale, batchSize))
          yield* write(`delete from ${other.name}`, () =>
            client.delete(other.name, { wait: true, points: [...ids] }),
          ).pipe(orIfMissing(null))
      }
      forget(agents)
    })

  const hash = createHash("sha1")
    .update(`${new URL(config.url).href}\n${prefix}`)
    .digest("hex")
    .slice(0, 8)
  return {
    // The layout is part of the target: a store changed to the other layout starts from the log, not from
    // the checkpoint of collections it no longer reads.
    name: perAgent ? `qdrant-agents-${hash}` : `qdrant-${hash}`,
    shared: true,

    upsert: (records) => (records.length === 0 ? Effect.void : upsert(records).pipe(Effect.mapError(toStoreError))),

    // From the agent's collections and every shared one, listed anew, of either layout.
    remove: (agentId, entryIds) =>
      entryIds.length === 0
        ? Effect.void
        : Effect.gen(function* () {
            const ids = entryIds.map((entryId) => pointId(agentId, entryId))
            const listed = yield* listCollections(true)
            for (const { name } of [...listed.shared.values(), ...collectionsOf(listed, agentId)])
              for (const batch of chunks(ids, batchSize))
                yield* write(`delete from ${name}`, () => client.delete(name, { wait: true, points: [...batch] })).pipe(
                  orIfMissing(null),
                )
            forget([agentId])
          }).pipe(Effect.mapError(toStoreError)),

    // Listed anew, whichever model wrote them: the agent's own collections are deleted, its points in a
    // shared one deleted by a filter on the agent, without listing them first.
    removeAgent: (agentId) =>
      Effect.gen(function* () {
        const listed = yield* listCollections(true)
        const own = collectionsOf(listed, agentId)
        for (const { name } of [...listed.shared.values()])
          yield* write(`delete ${agentId}'s points from ${name}`, () =>
            client.delete(name, { wait: true, filter: agentFilter(agentId) }),
          ).pipe(orIfMissing(null))
        for (const { name } of own) {
          // Qdrant answers once the collection is gone from its catalog; it removes the directory then.
          yield* call(`delete collection ${name}`, () => client.deleteCollection(name)).pipe(orIfMissing(false))
          dropped(name)
        }
        forget([agentId])
      }).pipe(Effect.mapError(toStoreError)),

    searchDense: (agentId, model, vector, limit, filter) => {
      const must = filterConditions(agentId, filter)
      if (must === null || limit <= 0 || (perAgent && !isSubjectToken(agentId))) return Effect.succeed([])
      const name = targetOf(agentId, model)
      return Effect.gen(function* () {
        const response = yield* call(`query ${name}`, () =>
          client.query(name, {
            query: Array.from(vector),
            filter: { must },
            limit,
            with_payload: true,
            with_vector: false,
          }),
        ).pipe(orIfMissing(null))
        if (response === null) return []
        const hits: Hit[] = []
        for (const point of response.points)
          hits.push({ payload: yield* decode(name, point.id, point.payload), score: point.score })
        return hits.sort(byScoreThenEntry)
      }).pipe(Effect.mapError(toStoreError))
    },

    // Without an agent (a thread across agents), every collection of the layout: per agent, each agent's.
    list: (query) => {
      const must = filterConditions(query.agentId, query)
      if (must === null) return Effect.succeed([])
      return Effect.gen(function* () {
        const pages = yield* Effect.forEach(
          holding(yield* collections, query.agentId),
          ({ name }) =>
            Effect.flatMap(scrollAll(name, must), (points) =>
              Effect.forEach(points, (point) => decode(name, point.id, point.payload)),
            ),
          { concurrency: 4 },
        )
        return pages.flat().sort(byTimeThenEntry)
      }).pipe(Effect.mapError(toStoreError))
    },

    get: (agentId, entryIds) =>
      entryIds.length === 0
        ? Effect.succeed([])
        : Effect.gen(function* () {
            const ids = entryIds.map((entryId) => pointId(agentId, entryId))
            const out: LongTermPayload[] = []
            for (const { name } of holding(yield* collections, agentId)) {
              const points = yield* call(`retrieve from ${name}`, () =>
                client.retrieve(name, { ids, with_payload: true, with_vector: false }),
              ).pipe(orIfMissing([]))
              for (const point of points) out.push(yield* decode(name, point.id, point.payload))
            }
            return out
          }).pipe(Effect.mapError(toStoreError)),

    models: (agentId) =>
      Effect.gen(function* () {
        const cached = modelsCache.get(agentId)
        const at = yield* Clock.currentTimeMillis
        if (cached !== undefined && at - cached.at < ttl) return cached.models
        const listed = yield* collections
        const present = perAgent
          ? // One point of each of the agent's collections, for its model: a collection holds one model.
            yield* Effect.forEach(
              collectionsOf(listed, agentId),
              ({ name }) =>
                call(`sample ${name}`, () =>
                  client.scroll(name, {
                    filter: agentFilter(agentId),
                    limit: 1,
                    with_payload: ["model"],
                    with_vector: false,
                  }),
                ).pipe(
                  orIfMissing(null),
                  Effect.map((page) => {
                    const model = field(page?.points[0]?.payload, "model")
                    return typeof model === "string" && targetOf(agentId, model) === name ? [model] : []
                  }),
                ),
              { concurrency: 4 },
            )
          : yield* Effect.forEach(
              [...listed.shared.values()],
              ({ name, model }) =>
                call(`scroll ${name}`, () =>
                  client.scroll(name, {
                    filter: agentFilter(agentId),
                    limit: 1,
                    with_payload: false,
                    with_vector: false,
                  }),
                ).pipe(
                  orIfMissing(null),
                  Effect.map((page) => (page !== null && page.points.length > 0 ? [model] : [])),
                ),
              { concurrency: 4 },
            )
        const models = present.flat().sort()
        modelsCache.set(agentId, { at, models })
        return models
      }).pipe(Effect.mapError(toStoreError)),
  }
}

export const qdrantStoreLayer = (config: QdrantStoreConfig): Layer.Layer<LongTermStore> =>
  Layer.sync(LongTermStore, () => makeQdrantStore(config))
