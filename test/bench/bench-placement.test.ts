/**
 * The placement simulation (`npm run bench:placement`): three replicas dividing seeded fleets by the leases'
 * own functions. Dividing by agents and taking five at once leaves a smaller largest share than keeping
 * partitions by preference alone and taking as many as are lacking.
 */
import { describe, expect, it } from "vitest"
import { placementRow } from "../../bench/placement/simulate.ts"

describe("bench:placement", () => {
  it("reports shares between a third and one, the largest share smaller than before", () => {
    const row = placementRow(100, 300)
    for (const figures of [row.before, row.now]) {
      expect(figures.meanLargestShare).toBeGreaterThanOrEqual(1 / 3)
      expect(figures.worstLargestShare).toBeLessThanOrEqual(1)
      expect(figures.withinTarget).toBeGreaterThanOrEqual(0)
    }
    expect(row.now.meanLargestShare).toBeLessThan(row.before.meanLargestShare)
    expect(row.now.withinTarget).toBeGreaterThan(row.before.withinTarget)
  })
})
