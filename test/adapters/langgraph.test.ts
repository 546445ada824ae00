/**
 * @working-memory/langgraph against the real system, through LangGraph's own BaseStore methods (put, get,
 * search, delete, listNamespaces, batch): what each records in the agent's log, what it reads back, what
 * delete means on the append-only log, and the typed errors of bad input.
 */
import type { GetOperation, ListNamespacesOperation, PutOperation, SearchOperation } from "@langchain/langgraph"
import { WorkingMemoryStore } from "@working-memory/langgraph"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { Unavailable, ValidationError } from "../../sdk/index.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"
import { agentIdFor, eventsOf, runExample } from "./support.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

const storeFor = (...names: string[]) => {
  const agents = names.map(agentIdFor)
  return { store: new WorkingMemoryStore({ client: system.client, agents }), agents }
}
const recorded = async (agentId: string) =>
  (await eventsOf(system.client, agentId, "EntryRecorded")).map((e) => ({
    origin: e.origin,
    tags: e.tags,
    content: JSON.parse(e.content) as Record<string, unknown>,
  }))

describe("WorkingMemoryStore's put, get and delete", () => {
  it("puts an item as an entry of the namespace's agent and gets it back; a put again is its new version", async () => {
    const { store, agents } = storeFor("lg-put")
    const [alice] = agents as [string]
    const namespace = [alice, "prefs"]
    expect(await store.get(namespace, "theme")).toBeNull()

    await store.put(namespace, "theme", { color: "dark" })
    const first = await store.get(namespace, "theme")
    expect(first).toMatchObject({ namespace, key: "theme", value: { color: "dark" } })
    expect(first!.createdAt).toEqual(first!.updatedAt)

    await store.put(namespace, "theme", { color: "light", contrast: "high" })
    const second = await store.get(namespace, "theme")
    expect(second).toMatchObject({ namespace, key: "theme", value: { color: "light", contrast: "high" } })
    expect(second!.createdAt).toEqual(first!.createdAt)
    expect(second!.updatedAt.getTime()).toBeGreaterThan(first!.updatedAt.getTime())

    const versions = (await recorded(alice)).filter((e) => e.tags.includes("lgs"))
    expect(versions.map((e) => [e.origin, e.content])).toEqual([
      ["INTERNAL", { namespace: ["prefs"], key: "theme", value: { color: "dark" } }],
      ["INTERNAL", { namespace: ["prefs"], key: "theme", value: { color: "light", contrast: "high" } }],
    ])
    expect(versions[0]!.tags).toEqual(["lgs", 'lgs:["prefs"]'])
  })

  it("delete records that the item is deleted: get and search no longer serve it, the log keeps every version", async () => {
    const { store, agents } = storeFor("lg-delete")
    const [alice] = agents as [string]
    const namespace = [alice, "memories"]
    await store.put(namespace, "pet", { text: "My cat is called Miso." })
    await store.delete(namespace, "pet")
    expect(await store.get(namespace, "pet")).toBeNull()
    expect(await store.search(namespace, { query: "cat Miso" })).toEqual([])
    expect(await store.search(namespace)).toEqual([])
    await store.delete(namespace, "pet") // deleting what is not there records nothing
    await store.delete(namespace, "never-there")

    const versions = (await recorded(alice)).filter((e) => e.tags.includes("lgs"))
    expect(versions.map((e) => [e.origin, e.content])).toEqual([
      ["INTERNAL", { namespace: ["memories"], key: "pet", value: { text: "My cat is called Miso." } }],
      ["SYSTEM", { namespace: ["memories"], key: "pet", deleted: true }],
    ])

    // Put again, the item is new: created after the deletion.
    await store.put(namespace, "pet", { text: "My dog is called Rex." })
    const again = await store.get(namespace, "pet")
    expect(again?.value).toEqual({ text: "My dog is called Rex." })
    expect(again!.createdAt).toEqual(again!.updatedAt)
  })

  it("runs a batch in its order, each operation seeing the writes before it", async () => {
    const { store, agents } = storeFor("lg-batch")
    const [alice] = agents as [string]
    const ns = [alice, "notes"]
    const operations: [PutOperation, GetOperation, SearchOperation, ListNamespacesOperation] = [
      { namespace: ns, key: "a", value: { text: "Buy oat milk." } },
      { namespace: ns, key: "a" },
      { namespacePrefix: [alice], limit: 10, offset: 0 },
      { limit: 10, offset: 0 },
    ]
    const [put, got, search, list] = await store.batch(operations)
    expect(put).toBeUndefined()
    expect(got?.value).toEqual({ text: "Buy oat milk." })
    expect(search.map((i) => i.key)).toEqual(["a"])
    expect(list).toEqual([ns])
  })
})

describe("WorkingMemoryStore's search and listNamespaces", () => {
  it("searches with a query over the merged retrieval, under a namespace prefix, the latest version only", async () => {
    const { store, agents } = storeFor("lg-search", "lg-search-other")
    const [alice, bob] = agents as [string, string]
    await store.put([alice, "memories"], "pet", { text: "My dog is called Rex.", kind: "pet" })
    await store.put([alice, "memories"], "pet", { text: "My cat is called Miso.", kind: "pet" })
    await store.put([alice, "memories", "work"], "desk", { text: "My desk is by the window.", kind: "place" })
    await store.put([alice, "recipes"], "soup", { text: "Miso soup needs dashi.", kind: "food" })
    await store.put([bob, "memories"], "pet", { text: "My cat is called Tom.", kind: "pet" })

    const cats = await store.search([alice, "memories"], { query: "What is my cat called?" })
    expect(cats[0]).toMatchObject({
      namespace: [alice, "memories"],
      key: "pet",
      value: { text: "My cat is called Miso." },
    })
    expect(cats[0]!.score).toBeGreaterThan(0)
    // Under the prefix only; the replaced version and the other agent's item are not served.
    expect(cats.map((i) => i.namespace.join("/")).every((ns) => ns.startsWith(`${alice}/memories`))).toBe(true)
    expect(cats.filter((i) => i.key === "pet")).toHaveLength(1)
    expect((await store.search([alice, "memories"], { query: "dog Rex" })).map((i) => i.value.text)).not.toContain(
      "My dog is called Rex.",
    )
    // Across every agent of the store, with a filter on the value.
    const everywhere = await store.search([], { query: "cat called", filter: { kind: "pet" } })
    expect(everywhere.map((i) => i.value.text).sort()).toEqual(["My cat is called Miso.", "My cat is called Tom."])
    expect(
      await store.search([alice], { query: "cat called", filter: { kind: { $ne: "pet" } }, limit: 1 }),
    ).toHaveLength(1)
  })

  it("lists the items under a prefix without a query, latest updated first, with filter, limit and offset", async () => {
    const { store, agents } = storeFor("lg-list")
    const [alice] = agents as [string]
    for (const [i, day] of ["mon", "tue", "wed", "thu"].entries())
      await store.put([alice, "diary", day], "entry", { text: `Day ${i}`, n: i })
    const all = await store.search([alice, "diary"])
    expect(all.map((i) => i.namespace.at(-1))).toEqual(["thu", "wed", "tue", "mon"])
    expect((await store.search([alice, "diary"], { filter: { n: { $gte: 2 } } })).map((i) => i.value.n)).toEqual([3, 2])
    expect((await store.search([alice], { limit: 2, offset: 1 })).map((i) => i.value.n)).toEqual([2, 1])
  })

  it("lists the namespaces of the store's agents, by prefix, suffix and depth", async () => {
    const { store, agents } = storeFor("lg-ns-a", "lg-ns-b")
    const [a, b] = agents as [string, string]
    await store.put([a, "memories"], "k", { text: "one" })
    await store.put([a, "memories", "work"], "k", { text: "two" })
    await store.put([b, "memories"], "k", { text: "three" })
    await store.put([b], "k", { text: "four" })

    expect(await store.listNamespaces()).toEqual(
      [[a, "memories"], [a, "memories", "work"], [b], [b, "memories"]].sort((x, y) =>
        x.join(":").localeCompare(y.join(":")),
      ),
    )
    expect(await store.listNamespaces({ prefix: [a] })).toEqual([
      [a, "memories"],
      [a, "memories", "work"],
    ])
    expect((await store.listNamespaces({ suffix: ["memories"] })).map((ns) => ns[0]).sort()).toEqual([a, b].sort())
    expect(await store.listNamespaces({ prefix: [a], maxDepth: 2 })).toEqual([[a, "memories"]])
    expect(await store.listNamespaces({ prefix: ["*", "memories", "work"] })).toEqual([[a, "memories", "work"]])
    expect(await store.listNamespaces({ limit: 1, offset: 1 })).toHaveLength(1)
  })
})

describe("WorkingMemoryStore on bad input", () => {
  it("refuses a namespace of no agent of the store with ValidationError", async () => {
    const { store } = storeFor("lg-unknown")
    await expect(store.put(["stranger", "memories"], "k", { text: "hi" })).rejects.toBeInstanceOf(ValidationError)
    await expect(store.get(["stranger"], "k")).rejects.toBeInstanceOf(ValidationError)
    await expect(store.search(["stranger"], { query: "hi" })).rejects.toBeInstanceOf(ValidationError)
    await expect(store.batch([{ namespace: [], key: "k" }])).rejects.toBeInstanceOf(ValidationError)
  })

  it("refuses a value above the API's content limit, or not JSON, with ValidationError", async () => {
    const { store, agents } = storeFor("lg-oversized")
    const [alice] = agents as [string]
    await expect(store.put([alice], "big", { text: "a".repeat(70_000) })).rejects.toBeInstanceOf(ValidationError)
    await expect(store.put([alice], "odd", { n: 1n })).rejects.toBeInstanceOf(ValidationError)
    expect(await store.get([alice], "big")).toBeNull()
  })

  it("answers Unavailable at once on a closed connection", async () => {
    const alice = agentIdFor("lg-closed")
    const wm = await WorkingMemoryClient.connect({ servers: system.server.url })
    const store = new WorkingMemoryStore({ client: wm, agents: [alice] })
    await store.put([alice], "k", { text: "hi" })
    await wm.close()
    await expect(store.get([alice], "k")).rejects.toBeInstanceOf(Unavailable)
    await expect(store.put([alice], "k", { text: "again" })).rejects.toBeInstanceOf(Unavailable)
    await expect(store.search([alice], { query: "hi" })).rejects.toBeInstanceOf(Unavailable)
  })
})

it("examples/langgraph.ts prints the store's search on turn 3, which holds Miso", async () => {
  const output = await runExample("langgraph", system.server.url)
  const found = output.slice(output.indexOf("The store's search on turn 3"))
  expect(found).toContain("My cat is called Miso.")
}, 120_000)
