/**
 * Broker-enforced isolation: generates the `authorization { users: [...] }`
 * block of a nats-server configuration in which
 *
 * - each agent is a user that may only request its own API subjects
 *   (`wm.api.<agent>.>`) and receive replies on its own inbox prefix
 *   (`_INBOX_<agent>.>`, never the shared `_INBOX.>`). It has no right on the
 *   JetStream API at all (`$JS.API.>`): it reads its own events through the
 *   API too (`view.events`, served by the working service), so no consumer,
 *   stream or bucket request of an agent ever reaches JetStream;
 * - each tenant (a named group of agents) may be given a user with the
 *   union of its agents' rights, for a console acting for all of them;
 * - each service is a user with the rights its work needs: serving its
 *   operations in its queue group, appending the events it decides, reading
 *   the log, its KV buckets, dead letters, and replying to requesters;
 * - `audit` is a read-only user for the operator CLI (`npm run wm`).
 *
 *   const auth = natsAuth({ agents: ["planner", "critic"] })
 *   const server = await startNatsServer({ config: auth.config })
 *   const wm = await WorkingMemoryClient.connect({ servers: server.url, ...auth.agent("planner") })
 *
 * See SECURITY.md for the model, its limits and production settings.
 */
import { randomBytes } from "node:crypto"
import { operations } from "../contracts/api.ts"
import {
  CHECKPOINT_BUCKET,
  KEY_BUCKET,
  LEASE_BUCKET,
  LEGACY_SUBSTRATE_BUCKET,
  REQUEST_BUCKET,
  SNAPSHOT_BUCKET,
} from "../contracts/buckets.ts"
import { isSubjectToken } from "../contracts/ids.ts"
import { agentInboxPrefix, tenantInboxPrefix } from "../contracts/inboxes.ts"
import { PARTITIONED_SERVICES, ROUTE_ROOT } from "../contracts/routing.ts"
import {
  ALL_AGENT_CONFIG,
  ALL_ENTRIES,
  ALL_STEPS,
  API_ROOT,
  DEAD_LETTER_ROOT,
  DEAD_LETTER_STREAM,
  EVENTS_STREAM,
  MEMORY_PEERS_ROOT,
  replicaQueues,
  UNKNOWN_OPERATIONS_QUEUE,
} from "../contracts/subjects.ts"
import { formatTenants } from "../services/platform/access/sharing.ts"

export interface SubjectRules {
  readonly allow: ReadonlyArray<string>
  readonly deny: ReadonlyArray<string>
}

export interface Permissions {
  readonly publish: SubjectRules
  readonly subscribe: SubjectRules
  /** May publish once to the reply subject of each request it received (services). */
  readonly allowResponses: boolean
}

export interface UserEntry {
  readonly user: string
  readonly password: string
  /** Absent: every subject (the administrator). */
  readonly permissions?: Permissions
}

export interface AgentAccount {
  readonly id: string
  /** Generated (24 random bytes, base64url) when omitted. */
  readonly password?: string
}

export interface TenantAccount {
  readonly name: string
  readonly agents: ReadonlyArray<string>
  /** When given, the tenant gets a user acting for all its agents. */
  readonly password?: string
}

/**
 * `memory` is long-term and retrieval in one process, as `systemLayer`
 * composes them; deployed apart they are `long-term` and `retrieval`.
 */
export type ServiceName = "gateway" | "working" | "fade" | "long-term" | "substrate" | "retrieval" | "memory" | "audit"

/** What one service does on NATS; the permissions are derived from it. */
export interface ServiceSpec {
  readonly name: string
  /** API subject suffixes it serves for every agent (`wm.api.*.<subject>`), each in its queue group. */
  readonly serves: ReadonlyArray<{ readonly subject: string; readonly queue: string; readonly routed?: boolean }>
  /** Event subjects it appends to (patterns under `wm.evt`). */
  readonly appends: ReadonlyArray<string>
  /** Reads the event log (consumers, direct get). */
  readonly readsEvents: boolean
  /** Creates and updates the event and dead-letter streams at start (every service does, through EventLog). */
  readonly managesStreams: boolean
  /** Publishes undecodable records to `wm.dlq.<projection>`. */
  readonly deadLetters: boolean
  /** KV buckets it creates, reads and writes. */
  readonly buckets: ReadonlyArray<string>
  /** KV buckets it only reads. */
  readonly readsBuckets: ReadonlyArray<string>
  /** API subjects it sends requests to (e.g. `wm.api.*.view.get`). */
  readonly requests: ReadonlyArray<string>
  /** Streams whose messages it reads and erases in place (the forget eraser). */
  readonly erases?: ReadonlyArray<string>
  /** Subjects its replicas ask one another on (publish and subscribe; e.g. `wm.peer.memory.>`). */
  readonly peers?: ReadonlyArray<string>
  readonly password?: string
}

export interface AuthSpec {
  readonly agents: ReadonlyArray<string | AgentAccount>
  readonly tenants?: ReadonlyArray<TenantAccount>
  /** Default: every known service, with the default specs below. */
  readonly services?: ReadonlyArray<ServiceName | ServiceSpec>
  /** An unrestricted user (default: `admin` with a generated password); false for none. */
  readonly admin?: { readonly user?: string; readonly password?: string } | false
  /**
   * API operations (subject suffixes, e.g. `memory.thread`) agents may not
   * call even on their own subject: for operations that answer across agents.
   */
  readonly denyAgentOperations?: ReadonlyArray<string>
}

export interface Credentials {
  readonly user: string
  readonly pass: string
}

export interface AgentCredentials extends Credentials {
  readonly inboxPrefix: string
}

export interface NatsAuth {
  /** The configuration text: pass it to `startNatsServer({ config })` or write it to a file. */
  readonly config: string
  readonly users: ReadonlyArray<UserEntry>
  /** Connection options for an agent: `WorkingMemoryClient.connect({ servers, ...auth.agent(id) })`. */
  readonly agent: (agentId: string) => AgentCredentials
  readonly tenant: (name: string) => AgentCredentials
  /** Accepts `gateway`, `wm-gateway`, `long-term`, `longterm`… */
  readonly service: (name: string) => Credentials
  readonly admin: Credentials | undefined
  /** The tenants as the services read them (WM_TENANTS): who shares a thread with whom. */
  readonly tenantsVariable: string
}

// ---------------------------------------------------------------------------
// Subjects

const JS = "$JS.API"
export const agentUser = (agentId: string) => `agent-${agentId}`
export const tenantUser = (tenant: string) => `tenant-${tenant}`
export const serviceUser = (service: string) => `svc-${normaliseService(service)}`

const kvStream = (bucket: string) => `KV_${bucket}`

const bucketRights = (bucket: string, write: boolean): string[] => {
  const stream = kvStream(bucket)
  const read = [
    `${JS}.STREAM.INFO.${stream}`,
    // Opening a bucket creates it when absent (a reader may start before the writer); creating an
    // existing stream with another configuration is refused by the server, so this cannot alter it.
    `${JS}.STREAM.CREATE.${stream}`,
    `${JS}.STREAM.MSG.GET.${stream}`,
    `${JS}.DIRECT.GET.${stream}`,
    `${JS}.DIRECT.GET.${stream}.>`,
    // Watches, key listings and history are ordered consumers on the bucket's stream.
    `${JS}.CONSUMER.CREATE.${stream}`,
    `${JS}.CONSUMER.CREATE.${stream}.>`,
    `${JS}.CONSUMER.INFO.${stream}.*`,
    `${JS}.CONSUMER.DELETE.${stream}.*`,
    `${JS}.CONSUMER.MSG.NEXT.${stream}.*`,
    `$JS.FC.${stream}.>`,
  ]
  if (!write) return read
  return [...read, `${JS}.STREAM.UPDATE.${stream}`, `${JS}.STREAM.PURGE.${stream}`, `$KV.${bucket}.>`]
}

const readEventRights = (): string[] => [
  `${JS}.STREAM.INFO.${EVENTS_STREAM}`,
  `${JS}.CONSUMER.CREATE.${EVENTS_STREAM}.>`,
  `${JS}.CONSUMER.INFO.${EVENTS_STREAM}.*`,
  `${JS}.CONSUMER.DELETE.${EVENTS_STREAM}.*`,
  `${JS}.CONSUMER.MSG.NEXT.${EVENTS_STREAM}.*`,
  `${JS}.DIRECT.GET.${EVENTS_STREAM}`,
  `${JS}.DIRECT.GET.${EVENTS_STREAM}.>`,
  `${JS}.STREAM.MSG.GET.${EVENTS_STREAM}`,
  `$JS.FC.${EVENTS_STREAM}.>`,
  // Acknowledgements of durable consumers with explicit ack.
  `$JS.ACK.${EVENTS_STREAM}.>`,
]

/** Reading a stream message by message, and erasing messages in place: what completing a forget needs. */
const eraseRights = (stream: string): string[] => [
  `${JS}.STREAM.INFO.${stream}`,
  `${JS}.STREAM.MSG.GET.${stream}`,
  `${JS}.STREAM.MSG.DELETE.${stream}`,
  `${JS}.CONSUMER.CREATE.${stream}`,
  `${JS}.CONSUMER.CREATE.${stream}.>`,
  `${JS}.CONSUMER.INFO.${stream}.*`,
  `${JS}.CONSUMER.DELETE.${stream}.*`,
  `${JS}.CONSUMER.MSG.NEXT.${stream}.*`,
  `$JS.FC.${stream}.>`,
]

const unique = (xs: ReadonlyArray<string>) => Array.from(new Set(xs))

/** The routed form of a request subject `wm.api.<agent>.<operation>` (none for another subject). */
const routedFormOf = (subject: string): string[] =>
  subject.startsWith(`${API_ROOT}.`) ? [`${ROUTE_ROOT}.*.*.${subject.slice(API_ROOT.length + 1)}`] : []

// ---------------------------------------------------------------------------
// Permissions

/**
 * An API subject pattern and the subjects the server routes it to (contracts/routing.ts): the server checks a
 * publication's rights on the subject it delivers, so a right to send a request needs both.
 */
const withRoutes = (agent: string, operation: string): string[] => [
  `${API_ROOT}.${agent}.${operation}`,
  `${ROUTE_ROOT}.*.*.${agent}.${operation}`,
]

/** Rights of one agent over its own memory and nothing else: its API subjects, nothing of JetStream's. */
const agentPublishRights = (agentId: string): string[] => withRoutes(agentId, ">")

const agentDenials = (agentId: string, denyOperations: ReadonlyArray<string>) =>
  denyOperations.flatMap((op) => withRoutes(agentId, op))

export const agentPermissions = (agentId: string, denyOperations: ReadonlyArray<string> = []): Permissions => {
  assertToken("agent id", agentId)
  return {
    publish: { allow: agentPublishRights(agentId), deny: agentDenials(agentId, denyOperations) },
    subscribe: { allow: [`${agentInboxPrefix(agentId)}.>`], deny: ["_INBOX.>"] },
    allowResponses: false,
  }
}

export const tenantPermissions = (tenant: TenantAccount, denyOperations: ReadonlyArray<string> = []): Permissions => {
  assertToken("tenant name", tenant.name)
  for (const a of tenant.agents) assertToken("agent id", a)
  return {
    publish: {
      allow: unique(tenant.agents.flatMap(agentPublishRights)),
      deny: tenant.agents.flatMap((a) => agentDenials(a, denyOperations)),
    },
    subscribe: { allow: [`${tenantInboxPrefix(tenant.name)}.>`], deny: ["_INBOX.>"] },
    allowResponses: false,
  }
}

export const servicePermissions = (spec: ServiceSpec): Permissions => {
  const publish: string[] = [`${JS}.INFO`]
  if (spec.managesStreams) {
    for (const stream of [EVENTS_STREAM, DEAD_LETTER_STREAM]) {
      publish.push(`${JS}.STREAM.INFO.${stream}`, `${JS}.STREAM.CREATE.${stream}`, `${JS}.STREAM.UPDATE.${stream}`)
    }
  }
  if (spec.readsEvents) publish.push(...readEventRights())
  publish.push(...spec.appends)
  if (spec.deadLetters) publish.push(`${DEAD_LETTER_ROOT}.>`)
  for (const b of spec.buckets) publish.push(...bucketRights(b, true))
  for (const b of spec.readsBuckets) publish.push(...bucketRights(b, false))
  publish.push(...spec.requests.flatMap((subject) => [subject, ...routedFormOf(subject)]))
  // A replica forwards a pinned tenant's request to its partition's owner (contracts/routing.ts).
  publish.push(...spec.serves.filter((s) => s.routed).map((s) => `${ROUTE_ROOT}.*.*.*.${s.subject}`))
  for (const stream of spec.erases ?? []) publish.push(...eraseRights(stream))
  publish.push(...(spec.peers ?? []))
  return {
    publish: { allow: unique(publish), deny: [] },
    subscribe: {
      allow: [
        // Replies to its own requests and publish acknowledgements.
        "_INBOX.>",
        // Each operation only in the service's queue group: a second, non-queue
        // subscriber could otherwise read every agent's requests.
        ...spec.serves.map((s) => `${API_ROOT}.*.${s.subject} ${s.queue}`),
        // And, routed by the server, only the requests of the partitions it answers for (the same queue).
        ...spec.serves.filter((s) => s.routed).map((s) => `${ROUTE_ROOT}.*.*.*.${s.subject} ${s.queue}`),
        ...(spec.peers ?? []),
      ],
      deny: [],
    },
    allowResponses: spec.serves.length > 0 || (spec.peers ?? []).length > 0,
  }
}

// ---------------------------------------------------------------------------
// Default service specs

/** The operations of contracts/api.ts a service serves; services/platform/api/serve.ts queues them in `wm-<service>`. */
const servedBy = (service: string) =>
  Object.values(operations)
    .filter((op) => op.servedBy === service)
    // The working service, the gateway and retrieval are partitioned: each replica has a queue of its own and
    // answers for its partitions.
    .map((op) => ({
      subject: op.subject,
      queue: PARTITIONED_SERVICES.has(op.servedBy) ? replicaQueues(op.servedBy) : `wm-${op.servedBy}`,
      routed: PARTITIONED_SERVICES.has(op.servedBy),
    }))

const apiOf = (operation: keyof typeof operations) => `${API_ROOT}.*.${operations[operation].subject}`

const base = (name: string): ServiceSpec => ({
  name,
  serves: servedBy(name),
  appends: [],
  readsEvents: true,
  managesStreams: true,
  deadLetters: true,
  buckets: [],
  // Every reader of the log opens its sealed content with the content keys.
  readsBuckets: [KEY_BUCKET],
  requests: [],
})

export const defaultServiceSpec = (name: ServiceName): ServiceSpec => {
  switch (name) {
    case "gateway":
      // Registration and budgets, entries, steps, focus and references.
      // Quotes are resolved through retrieval and the substrate.
      return {
        ...base(name),
        appends: [ALL_AGENT_CONFIG, ALL_STEPS, ALL_ENTRIES],
        // The request ledger (what each write with a request id was answered), its partition leases and
        // heartbeats, and the snapshots of the partitions it owns.
        // The content keys: a recorded entry's key is made as it is appended.
        buckets: [REQUEST_BUCKET, LEASE_BUCKET, SNAPSHOT_BUCKET, KEY_BUCKET],
        // A rewritten snapshot erases the one it replaces in place, and its key (a forget leaves no copy).
        erases: [kvStream(SNAPSHOT_BUCKET), kvStream(KEY_BUCKET)],
        requests: [apiOf("query"), apiOf("getRaw")],
      }
    case "working":
      // EntriesRead after each build; asks retrieval for the open step's cues.
      return {
        ...base(name),
        appends: [ALL_STEPS],
        // Its partition leases and heartbeats, the snapshots of the partitions it owns and their keys.
        buckets: [REQUEST_BUCKET, LEASE_BUCKET, SNAPSHOT_BUCKET, KEY_BUCKET],
        // A rewritten snapshot erases the one it replaces in place, and its key (a forget leaves no copy).
        erases: [kvStream(SNAPSHOT_BUCKET), kvStream(KEY_BUCKET)],
        requests: [apiOf("recall")],
      }
    case "fade":
      // Rung changes and demotions, each on its entry's subject.
      // It also refuses requests for operations the API does not have (services/platform/api/serve.ts).
      return {
        ...base(name),
        serves: [{ subject: ">", queue: UNKNOWN_OPERATIONS_QUEUE }],
        appends: [ALL_ENTRIES],
        // Its partition leases and heartbeats, the snapshots of the partitions it owns (views and raw texts), and
        // the content keys (an entry recorded before content was sealed gets its key at its first rung change).
        buckets: [LEASE_BUCKET, SNAPSHOT_BUCKET, KEY_BUCKET],
        // A rewritten snapshot erases the one it replaces in place, and its key (a forget leaves no copy).
        erases: [kvStream(SNAPSHOT_BUCKET), kvStream(KEY_BUCKET)],
      }
    case "long-term":
      // Its checkpoints (per partition, for a durable store) and the partition leases of the memory service.
      return { ...base("long-term"), serves: [], buckets: [CHECKPOINT_BUCKET, LEASE_BUCKET] }
    case "substrate":
      // Raw text is read from the log (readsEvents: direct and message get of an entry's first message).
      // The forget eraser runs beside it: it erases forgotten records from the log, the dead letters and the
      // retired wm_substrate bucket of an upgraded deployment (erase rights only: it cannot create it), keeps
      // its checkpoints (one per partition), holds the eraser's partition leases, and reads the snapshot
      // manifests to see a forget confirmed.
      return {
        ...base(name),
        // A forget destroys the content keys first: their marks, then their revisions erased in place.
        buckets: [CHECKPOINT_BUCKET, LEASE_BUCKET, KEY_BUCKET],
        readsBuckets: [SNAPSHOT_BUCKET],
        erases: [EVENTS_STREAM, DEAD_LETTER_STREAM, kvStream(LEGACY_SUBSTRATE_BUCKET), kvStream(KEY_BUCKET)],
      }
    case "retrieval":
      // Cue rehydrated / promoted / dropped on the entry's subject, the step's recall on the step's; recalled raw
      // text is read from the log (the entry's first message), as the substrate reads it.
      // Its partition leases and snapshots (views and indexes); the parts of a thread other replicas hold are
      // asked of them on `wm.peer.memory`.
      return {
        ...base(name),
        appends: [ALL_ENTRIES, ALL_STEPS],
        buckets: [CHECKPOINT_BUCKET, REQUEST_BUCKET, LEASE_BUCKET, SNAPSHOT_BUCKET, KEY_BUCKET],
        // A rewritten snapshot erases the one it replaces in place, and its key (a forget leaves no copy).
        erases: [kvStream(SNAPSHOT_BUCKET), kvStream(KEY_BUCKET)],
        peers: [`${MEMORY_PEERS_ROOT}.>`],
      }
    case "memory":
      return mergeSpecs("memory", defaultServiceSpec("long-term"), defaultServiceSpec("retrieval"))
    case "audit":
      // Read-only: the log (raw text included), the working snapshots, the progress reports in the lease bucket
      // (`wm status`), and the working views through the API.
      return {
        ...base(name),
        serves: [],
        managesStreams: false,
        deadLetters: false,
        readsBuckets: [SNAPSHOT_BUCKET, LEASE_BUCKET, KEY_BUCKET],
        requests: [apiOf("getView"), apiOf("getRaw")],
      }
  }
}

/** One service doing the work of several, in one queue group per operation it serves. */
export const mergeSpecs = (name: string, ...specs: ReadonlyArray<ServiceSpec>): ServiceSpec => ({
  name,
  serves: specs.flatMap((s) => s.serves),
  appends: unique(specs.flatMap((s) => s.appends)),
  readsEvents: specs.some((s) => s.readsEvents),
  managesStreams: specs.some((s) => s.managesStreams),
  deadLetters: specs.some((s) => s.deadLetters),
  buckets: unique(specs.flatMap((s) => s.buckets)),
  readsBuckets: unique(specs.flatMap((s) => s.readsBuckets)).filter((b) => !specs.some((s) => s.buckets.includes(b))),
  peers: unique(specs.flatMap((s) => s.peers ?? [])),
  requests: unique(specs.flatMap((s) => s.requests)),
  erases: unique(specs.flatMap((s) => s.erases ?? [])),
})

export const SERVICE_NAMES: ReadonlyArray<ServiceName> = [
  "gateway",
  "working",
  "fade",
  "long-term",
  "substrate",
  "retrieval",
  "memory",
  "audit",
]

// ---------------------------------------------------------------------------
// Generation

const normaliseService = (name: string) =>
  name
    .toLowerCase()
    .replace(/^(wm-|svc-)/, "")
    .replace(/[^a-z0-9]/g, "")

const assertToken = (what: string, value: string) => {
  if (!isSubjectToken(value)) throw new Error(`${what} '${value}' must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'`)
}

export const generatePassword = () => randomBytes(24).toString("base64url")

const q = (s: string) => JSON.stringify(s)

const renderRules = (rules: SubjectRules, indent: string) => {
  const parts = [`allow: [${rules.allow.map(q).join(", ")}]`]
  if (rules.deny.length > 0) parts.push(`deny: [${rules.deny.map(q).join(", ")}]`)
  return `{\n${indent}  ${parts.join(`\n${indent}  `)}\n${indent}}`
}

/** Renders users as a nats-server `authorization` block. */
export const renderAuthorization = (users: ReadonlyArray<UserEntry>): string => {
  const blocks = users.map((u) => {
    const lines = [`    {`, `      user: ${q(u.user)}`, `      password: ${q(u.password)}`]
    if (u.permissions) {
      lines.push(
        `      permissions: {`,
        `        publish: ${renderRules(u.permissions.publish, "        ")}`,
        `        subscribe: ${renderRules(u.permissions.subscribe, "        ")}`,
      )
      if (u.permissions.allowResponses) lines.push(`        allow_responses: true`)
      lines.push(`      }`)
    }
    lines.push(`    }`)
    return lines.join("\n")
  })
  return [
    "# working-memory: one user per agent, tenant and service (infra/auth.ts; see SECURITY.md).",
    "authorization {",
    "  users: [",
    blocks.join("\n"),
    "  ]",
    "}",
    "",
  ].join("\n")
}

export const natsAuth = (spec: AuthSpec): NatsAuth => {
  const deny = spec.denyAgentOperations ?? []
  const users: UserEntry[] = []
  const agents = new Map<string, AgentCredentials>()
  const tenants = new Map<string, AgentCredentials>()
  const services = new Map<string, Credentials>()

  for (const a of spec.agents) {
    const account = typeof a === "string" ? { id: a } : a
    if (agents.has(account.id)) throw new Error(`agent '${account.id}' is listed twice`)
    const creds = {
      user: agentUser(account.id),
      pass: account.password ?? generatePassword(),
      inboxPrefix: agentInboxPrefix(account.id),
    }
    users.push({ user: creds.user, password: creds.pass, permissions: agentPermissions(account.id, deny) })
    agents.set(account.id, creds)
  }

  for (const tenant of spec.tenants ?? []) {
    for (const a of tenant.agents)
      if (!agents.has(a)) throw new Error(`tenant '${tenant.name}' names agent '${a}', which is not listed`)
    if (tenant.password === undefined) continue
    const creds = { user: tenantUser(tenant.name), pass: tenant.password, inboxPrefix: tenantInboxPrefix(tenant.name) }
    users.push({ user: creds.user, password: creds.pass, permissions: tenantPermissions(tenant, deny) })
    tenants.set(tenant.name, creds)
  }

  for (const s of spec.services ?? SERVICE_NAMES) {
    const serviceSpec = typeof s === "string" ? defaultServiceSpec(s) : s
    const key = normaliseService(serviceSpec.name)
    if (services.has(key)) throw new Error(`service '${serviceSpec.name}' is listed twice`)
    const creds = { user: serviceUser(serviceSpec.name), pass: serviceSpec.password ?? generatePassword() }
    users.push({ user: creds.user, password: creds.pass, permissions: servicePermissions(serviceSpec) })
    services.set(key, creds)
  }

  let admin: Credentials | undefined
  if (spec.admin !== false) {
    admin = { user: spec.admin?.user ?? "admin", pass: spec.admin?.password ?? generatePassword() }
    users.push({ user: admin.user, password: admin.pass })
  }

  const names = new Set<string>()
  for (const u of users) {
    if (names.has(u.user)) throw new Error(`user '${u.user}' would be defined twice`)
    names.add(u.user)
  }

  const lookup = <T>(map: Map<string, T>, key: string, what: string): T => {
    const found = map.get(key)
    if (found === undefined) throw new Error(`no ${what} '${key}' in this configuration`)
    return found
  }

  return {
    config: renderAuthorization(users),
    users,
    agent: (id) => lookup(agents, id, "agent"),
    tenant: (name) => lookup(tenants, name, "tenant user"),
    service: (name) => lookup(services, normaliseService(name), "service"),
    admin,
    tenantsVariable: formatTenants(spec.tenants ?? []),
  }
}

/** The configuration text alone (pass passwords in the spec to know them). */
export const authConfig = (spec: AuthSpec): string => natsAuth(spec).config
