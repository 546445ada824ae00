/**
 * Requests reach their partition's owner only: the server maps each request's subject to its agent's slot
 * (contracts/routing.ts), each replica subscribes to the routes of the partitions it answers for, and a
 * pinned tenant's request is forwarded once to its partition. Without the mappings every replica receives
 * every request and the system still answers. What each replica received is read from the server's own
 * count per subscription (the monitoring endpoint), not from the services.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { deploymentPlacement, partitionCount, partitionOf } from "../../contracts/partitions.ts"
import { parseRouteSubject, partitionOfSlot } from "../../contracts/routing.ts"
import type { WorkingShape } from "../../services/working/working.ts"
import { eventually } from "../support/eventually.ts"
import { AGENTS, type RoutedSystem, received, startRoutedSystem, stepEach, subscriptions } from "../support/routing.ts"

/** The partition a route subscription serves: its slot's, or the one it is forwarded to. */
const partitionOfRoute = (subject: string): number => {
  const route = parseRouteSubject(subject.replace(".*.", ".x."))
  if (route === undefined) throw new Error(`not a route: ${subject}`)
  return "slot" in route.target ? partitionOfSlot(deploymentPlacement(), route.target.slot) : route.target.partition
}

describe("three working replicas behind a server that routes by partition", () => {
  let system: RoutedSystem
  beforeAll(async () => {
    system = await startRoutedSystem(["route-a", "route-b", "route-c"])
  })
  afterAll(() => system?.stop())

  it("delivers each request only to the replica answering for its agent's partition", async () => {
    const { replicas, client, monitorUrl } = system
    const P = partitionCount()
    const share = Math.ceil(P / replicas.length)
    await eventually("the partitions split between the three replicas", () =>
      replicas.every(
        (r) => r.working.answeringPartitions().length <= share && r.working.answeringPartitions().length > 0,
      ) && replicas.reduce((n, r) => n + r.working.answeringPartitions().length, 0) === P
        ? true
        : undefined,
    )
    const owners = new Map<number, WorkingShape>()
    for (const r of replicas) for (const p of r.working.answeringPartitions()) owners.set(p, r.working)

    await stepEach(client, AGENTS)

    const subs = await subscriptions(monitorUrl)
    let delivered = 0
    for (const r of replicas) {
      const { unrouted, routes } = received(subs, r.replicaId)
      // A routed request never reaches the subscription every replica has for a server that does not route.
      expect(unrouted, `${r.replicaId} received unrouted requests`).toBe(0)
      for (const route of routes) {
        delivered += route.msgs ?? 0
        // Requests arrive only on the routes of partitions this replica answers for.
        if ((route.msgs ?? 0) > 0) expect(owners.get(partitionOfRoute(route.subject))).toBe(r.working)
      }
    }
    // Every build arrived at exactly one replica (a retry after a slow answer may arrive twice).
    expect(delivered).toBeGreaterThanOrEqual(AGENTS.length)
    // And the agents' partitions are spread over all three replicas: each received some.
    const partitionsOfAgents = new Set(AGENTS.map((id) => partitionOf(id)))
    for (const r of replicas)
      if (r.working.answeringPartitions().some((p) => partitionsOfAgents.has(p)))
        expect(received(subs, r.replicaId).routes.some((s) => (s.msgs ?? 0) > 0)).toBe(true)
  })

  it("moves a partition's route with its lease: the replica left answers every agent", async () => {
    const [leaving, ...staying] = system.replicas
    await leaving!.services.stop()
    system.replicas = staying
    await eventually("the survivors to answer for every partition", () =>
      staying.reduce((n, r) => n + r.working.answeringPartitions().length, 0) === partitionCount() ? true : undefined,
    )
    for (const id of AGENTS) {
      const view = await system.client.agent(id).view()
      expect(view.entries.map((e) => e.content)).toContain(`Agent ${id} keeps the routing notes.`)
    }
  })
})

describe("a server without the routing mappings", () => {
  let system: RoutedSystem
  beforeAll(async () => {
    system = await startRoutedSystem(["unrouted"], { routing: false })
  })
  afterAll(() => system?.stop())

  it("is still answered, every replica receiving every request", async () => {
    const [replica] = system.replicas
    await eventually("the replica to answer for every partition", () =>
      replica!.working.answeringPartitions().length === partitionCount() ? true : undefined,
    )
    await stepEach(system.client, AGENTS.slice(0, 5))
  })
})
