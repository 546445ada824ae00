/**
 * The speed benchmark runs end to end at tiny sizes and reports every figure
 * as a finite positive number. No timing is asserted: benchmarks are not tests.
 */
import { describe, expect, it } from "vitest"
import { runSpeedBench } from "../bench/speed/run.ts"

const KEYS = [
  "ingestPerSec",
  "rawPublishPerSec",
  "replayPerSec",
  "rawConsumePerSec",
  "contextBuildP50Ms",
  "contextBuildP99Ms",
  "peakRssMb",
  "retrievalP50Ms",
  "retrievalP99Ms",
  "retrievalMB",
  "recordP50Ms",
  "recordP99Ms",
  "queryP50MsUnderLoad",
  "queryP99MsUnderLoad",
]

describe("bench:speed --quick", () => {
  it("reports exactly the expected figures, each a finite positive number", { timeout: 180_000 }, async () => {
    const report = await runSpeedBench({ quick: true })
    const json = JSON.parse(JSON.stringify(report.figures)) as Record<string, unknown>
    const expected = KEYS
    expect(Object.keys(json).sort()).toEqual([...expected].sort())
    for (const key of expected) {
      const value = json[key]
      expect(typeof value, key).toBe("number")
      expect(Number.isFinite(value), key).toBe(true)
      expect(value as number, key).toBeGreaterThan(0)
    }
  })
})
