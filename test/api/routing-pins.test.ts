/**
 * A pinned tenant's requests: the server maps them over the shared partitions (contracts/routing.ts) and the
 * replica answering for the slot forwards each, once, to the replica answering for the tenant's partition.
 * The placement is this process's environment, set before anything reads it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { deploymentPlacement, partitionCount, partitionOf } from "../../contracts/partitions.ts"
import { partitionOfSlot, slotCount, slotOf } from "../../contracts/routing.ts"
import { eventually } from "../support/eventually.ts"
import { AGENTS, type RoutedSystem, received, startRoutedSystem, stepEach, subscriptions } from "../support/routing.ts"

const PINNED = Array.from({ length: 12 }, (_, i) => `acme-${i}`)
process.env.WM_TENANTS = `acme=${PINNED.join(",")}`
process.env.WM_PARTITION_PINS = "acme=0-1"

describe("a pinned tenant's requests", () => {
  let system: RoutedSystem
  beforeAll(async () => {
    system = await startRoutedSystem(["pins-a", "pins-b"])
  })
  afterAll(() => system?.stop())

  it("are mapped over the shared partitions and forwarded once to the tenant's partition", async () => {
    const { replicas, client, monitorUrl } = system
    await eventually("the partitions split between the two replicas", () =>
      replicas.every((r) => r.working.answeringPartitions().length === partitionCount() / 2) ? true : undefined,
    )
    const placement = deploymentPlacement()
    expect(placement.shared).not.toContain(0)
    await stepEach(client, [...PINNED, ...AGENTS.slice(0, 10)])

    const subs = await subscriptions(monitorUrl)
    const forwarded = subs
      .filter((s) => s.subject.startsWith(`wm.route.${partitionCount()}.p`) && s.subject.endsWith(".context.build"))
      .reduce((n, s) => n + (s.msgs ?? 0), 0)
    // Each pinned agent's build was mapped to a shared partition's slot; when another replica answers for that
    // slot, it was forwarded to partition 0 or 1.
    const ownerOf = (partition: number) => replicas.find((r) => r.working.answeringPartitions().includes(partition))
    const crossing = PINNED.filter(
      (id) => ownerOf(partitionOfSlot(placement, slotOf(id, slotCount(placement)))) !== ownerOf(partitionOf(id)),
    )
    expect(crossing.length).toBeGreaterThan(0)
    expect(forwarded).toBeGreaterThanOrEqual(crossing.length)
    for (const id of PINNED) expect([0, 1]).toContain(partitionOf(id))
    for (const r of replicas) expect(received(subs, r.replicaId).unrouted).toBe(0)
  })
})
