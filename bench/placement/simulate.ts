/** The placement simulation of `npm run bench:placement` (bench/placement.ts says what it models). */
import { fnv1a32 } from "../../contracts/partitions.ts"
import { fairShare, preferenceOrder } from "../../services/platform/partitions/leases.ts"
import { firstTake, partitionsToKeep } from "../../services/platform/partitions/shares.ts"

export const PARTITIONS = 16
export const REPLICAS = 3
/** At most 1/3 + 0.05 of the requests at one of three replicas. */
export const TARGET = 1 / REPLICAS + 0.05

/** A small seeded generator (mulberry32), so that every run draws the same fleets. */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) >>> 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

type Rule = "before" | "now"

/** The partitions each of the three replicas ends with. */
const divide = (rule: Rule, agents: ReadonlyArray<number>, ids: readonly [string, string, string]) => {
  const [first, ...joiners] = ids.map((id) => preferenceOrder(id, PARTITIONS))
  const share = fairShare(PARTITIONS, REPLICAS)
  const kept =
    rule === "before"
      ? first!.slice(0, share)
      : partitionsToKeep(first!, share, (p) => agents[p] ?? 0, { partitions: PARTITIONS, replicas: REPLICAS })
  const taken = new Set(kept)
  const atOnce = rule === "before" ? share : firstTake(PARTITIONS, REPLICAS)
  const held = joiners.map((order) => {
    const mine = order.filter((p) => !taken.has(p)).slice(0, atOnce)
    for (const p of mine) taken.add(p)
    return mine
  })
  return [kept, ...held]
}

/** The largest share of `fleet` agents at one replica, over `trials` fleets, by each rule. */
export const placementRow = (fleet: number, trials: number) => {
  const random = seeded(fleet)
  const figures = Object.fromEntries(
    (["before", "now"] as const).map((rule) => [rule, { sum: 0, worst: 0, within: 0 }]),
  ) as Record<Rule, { sum: number; worst: number; within: number }>
  for (let t = 0; t < trials; t++) {
    const agents = new Array<number>(PARTITIONS).fill(0)
    for (let a = 0; a < fleet; a++) agents[fnv1a32(`agent-${random()}`) % PARTITIONS]!++
    const ids = [0, 1, 2].map((r) => `replica-${r}-${random()}`) as [string, string, string]
    for (const rule of ["before", "now"] as const) {
      const largest = Math.max(...divide(rule, agents, ids).map((ps) => ps.reduce((s, p) => s + agents[p]!, 0) / fleet))
      const f = figures[rule]
      f.sum += largest
      f.worst = Math.max(f.worst, largest)
      if (largest <= TARGET + 1e-9) f.within++
    }
  }
  const summary = (f: { sum: number; worst: number; within: number }) => ({
    meanLargestShare: Number((f.sum / trials).toFixed(3)),
    worstLargestShare: Number(f.worst.toFixed(3)),
    withinTarget: Number((f.within / trials).toFixed(3)),
  })
  return { fleet, before: summary(figures.before), now: summary(figures.now) }
}
