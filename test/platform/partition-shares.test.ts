/**
 * How many partitions a replica takes at once, and which it keeps when others join (services/platform/partitions/shares.ts).
 */
import { describe, expect, it } from "vitest"
import { firstTake, partitionsToKeep } from "../../services/platform/partitions/shares.ts"

const SPLIT = { partitions: 16, replicas: 3 }
const ALL = Array.from({ length: 16 }, (_, p) => p)
const agentsIn = (counts: ReadonlyArray<number>) => (p: number) => counts[p] ?? 0
const sum = (ps: ReadonlyArray<number>, weight: (p: number) => number) => ps.reduce((s, p) => s + weight(p), 0)

describe("firstTake", () => {
  it("is the smaller share: 16 partitions over 3 replicas take 5 at once, over 2 take 8, alone all 16", () => {
    expect(firstTake(16, 3)).toBe(5)
    expect(firstTake(16, 2)).toBe(8)
    expect(firstTake(16, 1)).toBe(16)
    expect(firstTake(2, 3)).toBe(1)
  })
})

describe("partitionsToKeep", () => {
  it("keeps the first of its order of preference when it knows no agent, or holds no more than its share", () => {
    const order = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4]
    expect(partitionsToKeep(order, 6, () => 0, SPLIT)).toEqual([5, 6, 7, 8, 9, 10])
    expect(partitionsToKeep([3, 1], 6, () => 7, SPLIT)).toEqual([3, 1])
  })

  it("holding the most partitions, it keeps the lighter ones: 100 agents, 6 or 7 a partition", () => {
    const counts = [6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 6, 7, 7, 6, 7]
    const weight = agentsIn(counts)
    const kept = partitionsToKeep(ALL, 6, weight, SPLIT)
    expect(kept).toHaveLength(6)
    expect(sum(kept, weight)).toBe(36)
    // The other two replicas share 10 partitions holding 64 agents: at most 4 × 7 + 6 = 34 for either.
    expect(kept.every((p) => counts[p] === 6)).toBe(true)
  })

  it("brings heavier partitions in while that comes closer to a fair third", () => {
    // Six partitions of 10 agents, ten empty: a third is 20 agents, two loaded partitions.
    const counts = ALL.map((p) => (p % 3 === 0 ? 10 : 0))
    const weight = agentsIn(counts)
    const kept = partitionsToKeep(ALL, 6, weight, SPLIT)
    expect(kept).toHaveLength(6)
    expect(sum(kept, weight)).toBe(20)
  })

  it("returns what it keeps in its own order of preference", () => {
    const order = [9, 2, 14, 0, 7, 11, 3, 5, 12, 1, 8, 15, 4, 10, 6, 13]
    const weight = (p: number) => p
    const kept = partitionsToKeep(order, 6, weight, SPLIT)
    expect(kept).toEqual(order.filter((p) => kept.includes(p)))
    // A third of 120 agents is 40: the six lightest hold 15, the swaps bring it to the fair part or just past it.
    expect(Math.abs(sum(kept, weight) - 40)).toBeLessThanOrEqual(5)
  })

  it("judges a part of the partitions as if the others weighed the same on average", () => {
    // Holding 8 of 16 (its peer left, then came back with a third): the fair part is 8 × 16 / (8 × 3) per agent.
    const held = [0, 1, 2, 3, 4, 5, 6, 7]
    const weight = (p: number) => (p < 4 ? 9 : 3)
    const kept = partitionsToKeep(held, 6, weight, SPLIT)
    expect(kept).toHaveLength(6)
    // 48 agents in 8 partitions: a replica's fair part of 16 such partitions is 32.
    expect(sum(kept, weight)).toBe(30)
  })
})
