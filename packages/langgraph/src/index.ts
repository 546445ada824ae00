/**
 * Working memory for LangGraph.js: a `BaseStore` over agents' memories.
 *
 *   const store = new WorkingMemoryStore({ client: wm, agents: ["alice"] })
 *   const graph = builder.compile({ store })
 *   await store.put(["alice", "memories"], "cat", { text: "My cat is called Miso." })
 *   await store.search(["alice", "memories"], { query: "What is my cat called?" })
 *
 * A namespace's first label is the agent that holds the item; the labels after it are the item's namespace
 * within the agent, carried as tags (one per prefix) and as the correlation id of the exact namespace. Every
 * put is a new entry of the agent — the item's new version — so the item fades and moves to long-term like any
 * memory and is found by the merged retrieval (`memory.query`) that `search` runs. The log is append-only:
 * `delete` records that the item is deleted, after which the store no longer serves it; its versions stay in
 * the log (erasing them is the operator's `forget`).
 */
import { createHash, randomBytes } from "node:crypto"
import {
  BaseStore,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchOperation,
} from "@langchain/langgraph"
import {
  AgentAlreadyRegistered,
  type AgentClient,
  type RequestOf,
  type ResponseOf,
  ValidationError,
  type WorkingMemoryClient,
} from "@working-memory/client"

export interface WorkingMemoryStoreOptions {
  readonly client: WorkingMemoryClient
  /** The agents whose memories the store holds: the first label of every namespace names one of them. */
  readonly agents: ReadonlyArray<string>
  /**
   * How the agents are registered on first use (default `{ role: "main" }`); `false` when they are registered
   * already. An agent registered before with another configuration keeps it.
   */
  readonly register?: Omit<RequestOf<"registerAgent">, "requestId"> | false
}

export type SearchItem = Item & { score?: number }

/** The tag every item version carries; each prefix of the item's namespace within the agent adds its own. */
export const STORE_TAG = "lgs"
/** The correlation id of the records that list an agent's namespaces. */
export const NAMESPACES = "lgs-namespaces"
const NAMESPACE_TAG = "lgs-namespace"
const PUT = "lgp-"
const DELETE = "lgd-"
const REGISTRY = "lgn-"
/** How many of the best matches of each agent a search with a query considers. */
const QUERY_DEPTH = 200
const MAX_TAGS = 32

type Thread = ResponseOf<"thread">["entries"]
type Raw = ResponseOf<"getRaw">
interface Version {
  readonly entryId: string
  readonly timestamp: number
  readonly deleted: boolean
}

const hash = (text: string, length: number) => createHash("sha256").update(text).digest("base64url").slice(0, length)
const characters = (text: string) => [...text].length

/** `lgs:["a","b"]` while it fits in `max` characters, else a hash of it. */
const named = (path: ReadonlyArray<string>, max: number) => {
  const readable = `${STORE_TAG}:${JSON.stringify(path)}`
  return characters(readable) <= max ? readable : `${STORE_TAG}#${hash(JSON.stringify(path), 32)}`
}
/** The correlation id of a namespace within its agent: what lists its items (`memory.thread`). */
export const correlationOf = (path: ReadonlyArray<string>) => named(path, 200)
/** The tag of a namespace prefix within its agent: what a search under it filters on (`memory.query`). */
export const tagOf = (path: ReadonlyArray<string>) => (path.length === 0 ? STORE_TAG : named(path, 64))
const tagsOf = (path: ReadonlyArray<string>) => path.map((_, i) => tagOf(path.slice(0, i + 1)))

/** The part of an item version's entry id that names the item. */
const itemHash = (path: ReadonlyArray<string>, key: string) => hash(JSON.stringify([path, key]), 16)
const itemOfEntry = (entryId: string) => entryId.slice(PUT.length, PUT.length + 16)
const isVersion = (entryId: string) => entryId.startsWith(PUT) || entryId.startsWith(DELETE)

const isOperators = (filter: unknown): filter is Record<string, unknown> =>
  typeof filter === "object" &&
  filter !== null &&
  !Array.isArray(filter) &&
  Object.keys(filter).length > 0 &&
  Object.keys(filter).every((k) => ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"].includes(k))

const same = (a: unknown, b: unknown) =>
  a === b || (typeof a === "object" && typeof b === "object" && JSON.stringify(a) === JSON.stringify(b))

/** A value's field against a filter's: equal, or every operator holds (`$eq`, `$ne`, `$gt`… `$in`, `$nin`). */
const matches = (value: unknown, filter: unknown): boolean => {
  if (!isOperators(filter)) return same(value, filter)
  return Object.entries(filter).every(([op, operand]) => {
    switch (op) {
      case "$eq":
        return same(value, operand)
      case "$ne":
        return !same(value, operand)
      case "$gt":
        return Number(value) > Number(operand)
      case "$gte":
        return Number(value) >= Number(operand)
      case "$lt":
        return Number(value) < Number(operand)
      case "$lte":
        return Number(value) <= Number(operand)
      case "$in":
        return Array.isArray(operand) && operand.some((o) => same(value, o))
      default:
        return !Array.isArray(operand) || !operand.some((o) => same(value, o))
    }
  })
}

const matchesCondition = (condition: MatchCondition, namespace: ReadonlyArray<string>) => {
  const { path } = condition
  if (path.length > namespace.length) return false
  const from = condition.matchType === "prefix" ? 0 : namespace.length - path.length
  return path.every((label, i) => label === "*" || label === namespace[from + i])
}

export class WorkingMemoryStore extends BaseStore {
  readonly #client: WorkingMemoryClient
  readonly #agentIds: ReadonlyArray<string>
  readonly #register: Omit<RequestOf<"registerAgent">, "requestId"> | false
  readonly #agents = new Map<string, Promise<AgentClient>>()
  /** Entries never change once recorded: their raw text is read once. */
  readonly #raws = new Map<string, Promise<Raw>>()
  readonly #knownNamespaces = new Set<string>()
  #clock = 0

  constructor(options: WorkingMemoryStoreOptions) {
    super()
    this.#client = options.client
    this.#agentIds = [...options.agents]
    this.#register = options.register ?? { role: "main" }
  }

  /** The agent's client (one per agent, so reads wait for this store's writes), registered on first use. */
  #agent(agentId: string): Promise<AgentClient> {
    let agent = this.#agents.get(agentId)
    if (agent === undefined) {
      const client = this.#client.agent(agentId)
      const register = this.#register
      agent = (
        register === false
          ? Promise.resolve()
          : client.register(register).catch((error: unknown) => {
              if (!(error instanceof AgentAlreadyRegistered)) throw error
            })
      ).then(
        () => client,
        (error: unknown) => {
          this.#agents.delete(agentId)
          throw error
        },
      )
      this.#agents.set(agentId, agent)
    }
    return agent
  }

  /** The agent a namespace names, and the namespace within it; a namespace of no agent of the store is refused. */
  async #place(namespace: unknown): Promise<{ readonly agent: AgentClient; readonly path: string[] }> {
    if (!Array.isArray(namespace) || namespace.some((label) => typeof label !== "string" || label.length === 0))
      throw ValidationError.one("namespace", "must be an array of non-empty strings")
    const [agentId, ...path] = namespace as string[]
    if (agentId === undefined)
      throw ValidationError.one("namespace", "is empty: its first label names the agent that holds the item")
    if (!this.#agentIds.includes(agentId))
      throw ValidationError.one(
        "namespace",
        `'${agentId}' is not one of this store's agents (${this.#agentIds.join(", ")}): a namespace's first label names the agent`,
      )
    if (path.length >= MAX_TAGS)
      throw ValidationError.one("namespace", `has ${namespace.length} labels; at most ${MAX_TAGS} are taken`)
    return { agent: await this.#agent(agentId), path }
  }

  #raw(agent: AgentClient, entryId: string): Promise<Raw> {
    let raw = this.#raws.get(entryId)
    if (raw === undefined) {
      raw = agent.raw(entryId)
      this.#raws.set(entryId, raw)
      raw.catch(() => this.#raws.delete(entryId))
    }
    return raw
  }

  async #thread(agent: AgentClient, correlationId: string): Promise<Thread> {
    const { entries } = await agent.thread(correlationId)
    return entries.filter((e) => e.agentId === agent.agentId)
  }

  /** Every version of every item of a namespace (by its correlation id), by item. */
  async #versions(agent: AgentClient, correlationId: string): Promise<Map<string, Version[]>> {
    const byItem = new Map<string, Version[]>()
    for (const e of await this.#thread(agent, correlationId)) {
      if (!isVersion(e.entryId)) continue
      const item = itemOfEntry(e.entryId)
      const version = { entryId: e.entryId, timestamp: e.timestamp, deleted: e.entryId.startsWith(DELETE) }
      byItem.set(item, [...(byItem.get(item) ?? []), version])
    }
    return byItem
  }

  /** The item's latest version: the latest timestamp, and of versions recorded in one millisecond the last logged. */
  async #latest(agent: AgentClient, versions: ReadonlyArray<Version>): Promise<Version | undefined> {
    const newest = Math.max(...versions.map((v) => v.timestamp))
    const tied = versions.filter((v) => v.timestamp === newest)
    if (tied.length <= 1) return tied[0]
    const seqs = await Promise.all(tied.map(async (v) => (await this.#raw(agent, v.entryId)).seq))
    return tied[seqs.indexOf(Math.max(...seqs))]
  }

  /** The item as its versions make it: null when it has none or its latest is a deletion. */
  async #item(agent: AgentClient, versions: ReadonlyArray<Version> | undefined): Promise<Item | null> {
    if (versions === undefined || versions.length === 0) return null
    const latest = await this.#latest(agent, versions)
    if (latest === undefined || latest.deleted) return null
    const stored = JSON.parse((await this.#raw(agent, latest.entryId)).content) as {
      namespace: string[]
      key: string
      value: Record<string, unknown>
    }
    // Created by the first put after the last deletion before the latest version.
    let createdAt = latest.timestamp
    for (const v of [...versions].sort((a, b) => b.timestamp - a.timestamp)) {
      if (v.timestamp > latest.timestamp || v.entryId === latest.entryId) continue
      if (v.deleted) break
      createdAt = v.timestamp
    }
    return {
      namespace: [agent.agentId, ...stored.namespace],
      key: stored.key,
      value: stored.value,
      createdAt: new Date(createdAt),
      updatedAt: new Date(latest.timestamp),
    }
  }

  /** A time for the next version: now, and later than any version this store recorded before. */
  #now(): number {
    this.#clock = Math.max(Date.now(), this.#clock + 1)
    return this.#clock
  }

  async #get(op: GetOperation): Promise<Item | null> {
    const { agent, path } = await this.#place(op.namespace)
    const versions = await this.#versions(agent, correlationOf(path))
    return this.#item(agent, versions.get(itemHash(path, String(op.key))))
  }

  /** Records that the agent has the namespace (once: the record's id is the namespace's), for listNamespaces. */
  async #keepNamespace(agent: AgentClient, path: ReadonlyArray<string>) {
    const known = `${agent.agentId}\n${JSON.stringify(path)}`
    if (this.#knownNamespaces.has(known)) return
    await agent.record({
      requestId: `${REGISTRY}${hash(JSON.stringify(path), 32)}`,
      origin: "SYSTEM",
      content: JSON.stringify({ namespace: path }),
      tags: [NAMESPACE_TAG],
      correlationId: NAMESPACES,
    })
    this.#knownNamespaces.add(known)
  }

  async #put(op: PutOperation): Promise<void> {
    const { agent, path } = await this.#place(op.namespace)
    if (typeof op.key !== "string") throw ValidationError.one("key", "must be a string")
    const key = op.key
    const version = `${itemHash(path, key)}-${randomBytes(12).toString("base64url")}`
    const common = { correlationId: correlationOf(path), tags: [STORE_TAG, ...tagsOf(path)] }
    if (op.value === null) {
      // Deleting what is not there records nothing.
      if ((await this.#get({ namespace: op.namespace, key })) === null) return
      await agent.record({
        ...common,
        requestId: `${DELETE}${version}`,
        origin: "SYSTEM",
        content: JSON.stringify({ namespace: path, key, deleted: true }),
        timestamp: this.#now(),
      })
      return
    }
    if (typeof op.value !== "object" || Array.isArray(op.value))
      throw ValidationError.one("value", "must be an object (or null to delete the item)")
    let content: string
    try {
      content = JSON.stringify({ namespace: path, key, value: op.value })
    } catch (error) {
      throw ValidationError.one("value", `is not JSON: ${error instanceof Error ? error.message : String(error)}`)
    }
    await this.#keepNamespace(agent, path)
    await agent.record({
      ...common,
      requestId: `${PUT}${version}`,
      origin: "INTERNAL",
      content,
      timestamp: this.#now(),
    })
  }

  /** The agents a namespace prefix covers: all of them for the empty prefix. */
  async #agentsUnder(prefix: ReadonlyArray<string>) {
    if (prefix.length > 0) return [await this.#place(prefix)]
    return Promise.all(this.#agentIds.map(async (id) => ({ agent: await this.#agent(id), path: [] as string[] })))
  }

  async #search(op: SearchOperation): Promise<SearchItem[]> {
    const limit = op.limit ?? 10
    const offset = op.offset ?? 0
    const filter = op.filter ?? {}
    const places = await this.#agentsUnder(op.namespacePrefix)
    const kept = (item: Item) => Object.entries(filter).every(([field, f]) => matches(item.value[field], f))
    const found: SearchItem[] = []
    if (op.query) {
      // The merged retrieval over both tiers, then each hit checked against its item: only an item's latest
      // version stands for it (an earlier version or a deleted item's is passed over).
      const hits = (
        await Promise.all(
          places.map(async ({ agent, path }) => {
            const query = op.query ?? ""
            const { results } = await agent.query(query, { limit: QUERY_DEPTH, filter: { tags: [tagOf(path)] } })
            return results.map((hit) => ({ agent, hit }))
          }),
        )
      )
        .flat()
        .sort((a, b) => b.hit.relevance - a.hit.relevance)
      const namespaces = new Map<string, Promise<Map<string, Version[]>>>()
      const seen = new Set<string>()
      for (const { agent, hit } of hits) {
        if (found.length >= offset + limit) break
        if (!hit.entryId.startsWith(PUT) || hit.correlationId === null) continue
        const namespace = `${agent.agentId}\n${hit.correlationId}`
        let versions = namespaces.get(namespace)
        if (versions === undefined) {
          versions = this.#versions(agent, hit.correlationId)
          namespaces.set(namespace, versions)
        }
        const itemVersions = (await versions).get(itemOfEntry(hit.entryId)) ?? []
        const latest = await this.#latest(agent, itemVersions)
        if (latest?.entryId !== hit.entryId || seen.has(`${namespace}\n${hit.entryId}`)) continue
        seen.add(`${namespace}\n${hit.entryId}`)
        const item = await this.#item(agent, itemVersions)
        if (item !== null && kept(item)) found.push({ ...item, score: hit.relevance })
      }
      return found.slice(offset, offset + limit)
    }
    // No query: every item under the prefix, the latest updated first.
    for (const { agent, path } of places) {
      for (const namespace of await this.#namespacesOf(agent)) {
        if (!path.every((label, i) => namespace[i] === label)) continue
        const versions = await this.#versions(agent, correlationOf(namespace))
        for (const itemVersions of versions.values()) {
          const item = await this.#item(agent, itemVersions)
          if (item !== null && kept(item)) found.push(item)
        }
      }
    }
    found.sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime())
    return found.slice(offset, offset + limit)
  }

  /** The namespaces (within the agent) the store has put items in. */
  async #namespacesOf(agent: AgentClient): Promise<string[][]> {
    const records = (await this.#thread(agent, NAMESPACES)).filter((e) => e.entryId.startsWith(REGISTRY))
    const namespaces = await Promise.all(
      records.map(
        async (e) => (JSON.parse((await this.#raw(agent, e.entryId)).content) as { namespace: string[] }).namespace,
      ),
    )
    return namespaces
  }

  async #listNamespaces(op: ListNamespacesOperation): Promise<string[][]> {
    let namespaces = (
      await Promise.all(
        this.#agentIds.map(async (id) => {
          const agent = await this.#agent(id)
          return (await this.#namespacesOf(agent)).map((path) => [id, ...path])
        }),
      )
    ).flat()
    const conditions = op.matchConditions ?? []
    namespaces = namespaces.filter((ns) => conditions.every((c) => matchesCondition(c, ns)))
    if (op.maxDepth !== undefined) {
      const depth = op.maxDepth
      namespaces = [
        ...new Map(namespaces.map((ns) => [JSON.stringify(ns.slice(0, depth)), ns.slice(0, depth)])).values(),
      ]
    }
    namespaces.sort((a, b) => a.join(":").localeCompare(b.join(":")))
    const offset = op.offset ?? 0
    return namespaces.slice(offset, offset + (op.limit ?? namespaces.length))
  }

  /** The operations in their order, each seeing the writes of those before it. */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = []
    for (const op of operations) {
      if ("namespacePrefix" in op) results.push(await this.#search(op))
      else if ("value" in op) results.push(await this.#put(op))
      else if ("key" in op) results.push(await this.#get(op))
      else results.push(await this.#listNamespaces(op))
    }
    return results as OperationResults<Op>
  }
}
