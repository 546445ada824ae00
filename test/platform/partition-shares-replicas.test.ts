/**
 * Two replicas joining, together, a replica that holds every partition: it keeps the partitions whose agents
 * come closest to a third of them, and the two that join take five partitions each, so that no replica holds
 * six of the heavier ones. Real nats-server, a gateway and working replicas in process (test/support/routing.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { partitionCount, partitionOf } from "../../contracts/partitions.ts"
import { preferenceOrder } from "../../services/platform/partitions/leases.ts"
import { eventually } from "../support/eventually.ts"
import { type RoutedSystem, startReplica, startRoutedSystem } from "../support/routing.ts"

const FIRST = "share-first"
/** Longer than the default half second: two replicas built side by side on a loaded machine announce apart. */
const JOINERS_SETTLE_MS = 2_500
const P = partitionCount()
/** The partitions the first replica prefers most: the ones it kept first before it weighed their agents. */
const HEAVY = preferenceOrder(FIRST, P).slice(0, 4)

/** Four agents in each of its four preferred partitions, one in each other: 28 agents over 16 partitions. */
const agentsPlaced = (): string[] => {
  const wanted = new Map(Array.from({ length: P }, (_, p) => [p, HEAVY.includes(p) ? 4 : 1]))
  const ids: string[] = []
  for (let i = 0; [...wanted.values()].some((n) => n > 0); i++) {
    const id = `share-agent-${i}`
    const p = partitionOf(id)
    if ((wanted.get(p) ?? 0) > 0) {
      ids.push(id)
      wanted.set(p, wanted.get(p)! - 1)
    }
  }
  return ids
}

describe("replicas that join divide the partitions by their agents", () => {
  let system: RoutedSystem
  const agents = agentsPlaced()
  beforeAll(async () => {
    system = await startRoutedSystem([FIRST])
    await eventually("the first replica to answer for every partition", () =>
      system.replicas[0]!.working.answeringPartitions().length === P ? true : undefined,
    )
    for (const id of agents) await system.client.agent(id).register({ role: "main" })
  }, 120_000)
  afterAll(() => system?.stop())

  it("keeps about a third of the agents at the first replica and five partitions at each that joined", async () => {
    // Started together, as a deployment scaled from one replica to three starts them, each waiting long enough
    // once announced to see the other (replicas that join one after the other can still end 6, 6 and 4).
    system.replicas.push(
      ...(await Promise.all([
        startReplica(system.server.url, "share-second", JOINERS_SETTLE_MS),
        startReplica(system.server.url, "share-third", JOINERS_SETTLE_MS),
      ])),
    )
    const agentsOf = (partitions: ReadonlyArray<number>) => agents.filter((id) => partitions.includes(partitionOf(id)))
    // A third of 28 is 9.3: one of the four heavy partitions and five light ones. Keeping its first six
    // partitions, as it did before, it held all four heavy ones (18 agents), and one joiner took six at once.
    // Polled: a lease that lapses for a moment on a loaded machine shows as a partition missing.
    await eventually(
      "6, 5 and 5 partitions, 9 agents at the first replica",
      () => {
        const held = system.replicas.map((r) => r.working.answeringPartitions())
        const counts = held.map((ps) => ps.length).join(", ")
        const firstAgents = agentsOf(held[0]!).length
        if (counts !== "6, 5, 5" || firstAgents !== 9)
          throw new Error(`partitions ${counts}; agents at the first replica ${firstAgents}`)
        return true
      },
      30_000,
    )
    // Every agent still answered, from whichever replica holds it now.
    for (const id of agents) expect((await system.client.agent(id).view()).agent.id).toBe(id)
  }, 120_000)
})

describe("a replica that joins after another has taken its share", () => {
  let system: RoutedSystem
  beforeAll(async () => {
    system = await startRoutedSystem(["late-first"])
    await eventually("the first replica to answer for every partition", () =>
      system.replicas[0]!.working.answeringPartitions().length === P ? true : undefined,
    )
  }, 120_000)
  afterAll(() => system?.stop())

  it("is given partitions back until the three hold 6, 5 and 5", async () => {
    const counts = () =>
      system.replicas
        .map((r) => r.working.answeringPartitions().length)
        .sort((a, b) => a - b)
        .join(", ")
    system.replicas.push(await startReplica(system.server.url, "late-second"))
    await eventually("the two replicas to hold 8 partitions each", () => (counts() === "8, 8" ? true : undefined))
    // The first two give two partitions each up and hold their share of 6: the third finds 4 free. Before, it
    // stayed at 4, below the 5 it takes at once, and the others at 6.
    system.replicas.push(await startReplica(system.server.url, "late-third"))
    await eventually(
      "6, 5 and 5 partitions",
      () => {
        const now = counts()
        if (now !== "5, 5, 6") throw new Error(`partitions ${now}`)
        return true
      },
      30_000,
    )
  }, 120_000)
})
