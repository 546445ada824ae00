/**
 * The position-proof benchmark (`npm run bench:positions`) at a small size: both proofs are asked of every
 * partition of a log laid out as the events stream's, and each answers.
 */
import { describe, expect, it } from "vitest"
import { measurePositions } from "../../bench/positions/measure.ts"

describe("bench:positions", () => {
  it("times a partition's last record, its next record and a consumer's position on the same log", async () => {
    const figures = await measurePositions({ events: 3_000, agents: 20, payloadBytes: 200, requests: 32, since: 100 })
    expect(figures.events).toBe(3_000)
    // Each agent's step subject and one subject per entry.
    expect(figures.subjects).toBeGreaterThan(20)
    for (const cost of [figures.partitionLastRecord, figures.partitionNextRecord, figures.consumerPosition]) {
      expect(cost.p50Ms).toBeGreaterThan(0)
      expect(cost.p99Ms).toBeGreaterThanOrEqual(cost.p50Ms)
      if (cost.serverCpuMs !== null) expect(cost.serverCpuMs).toBeGreaterThanOrEqual(0)
    }
  }, 60_000)
})
