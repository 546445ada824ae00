/**
 * The speed benchmark runs end to end at tiny sizes and reports every figure
 * as a finite positive number. No timing is asserted: benchmarks are not tests.
 */
import { describe, expect, it } from "vitest"
import { runSpeedBench } from "../../bench/speed/run.ts"

const KEYS = [
  "ingestPerSec",
  "ingestManyPerSec",
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
const STEP_KEYS = ["steps", "stepsByAgents", "stepP99Over50Ms", "stepProfile", "fanOut", "stepsByEmbedder"]

const positive = (value: unknown, key: string) => {
  expect(typeof value, key).toBe("number")
  expect(Number.isFinite(value), key).toBe(true)
  expect(value as number, key).toBeGreaterThan(0)
}

describe("bench:speed --quick", () => {
  it("reports exactly the expected figures, each a finite positive number", { timeout: 300_000 }, async () => {
    const report = await runSpeedBench({ quick: true })
    const json = JSON.parse(JSON.stringify(report.figures)) as Record<string, unknown>
    expect(Object.keys(json).sort()).toEqual([...KEYS, ...STEP_KEYS].sort())
    for (const key of KEYS) positive(json[key], key)
    const steps = json.steps as Record<string, unknown>
    for (const key of ["agents", "stepsPerSec", "p50Ms", "p99Ms", "buildP50Ms", "buildP99Ms", "recordP99Ms"])
      positive(steps[key], `steps.${key}`)
    const rows = json.stepsByAgents as Array<Record<string, unknown>>
    expect(rows.map((r) => r.agents)).toEqual([1, 2])
    for (const row of rows) positive(row.p99Ms, "stepsByAgents.p99Ms")
    const fanOut = json.fanOut as Record<string, unknown>
    expect(fanOut.replicas).toBe(2)
    positive(fanOut.maxShareReceived, "fanOut.maxShareReceived")
    expect(typeof fanOut.settled).toBe("boolean")
    const profile = json.stepProfile as { rows: unknown[]; wire: Array<{ kind: string; perStep: number }> }
    expect(profile.rows.length).toBeGreaterThan(0)
    expect(profile.wire.find((w) => w.kind === "API requests")?.perStep).toBeGreaterThan(0)
    // What the services' main thread did while each kind of call was in flight.
    for (const result of Object.values(json.stepsByEmbedder as Record<string, Record<string, unknown>>)) {
      const inCalls = result.servicesCpuInCalls as Array<{ call: string; inFlightMs: number; pieces: unknown[] }>
      expect(inCalls.map((c) => c.call).sort()).toEqual(
        ["beginStep", "buildContext", "endStep", "record", "reference"].sort(),
      )
      for (const c of inCalls) positive(c.inFlightMs, `servicesCpuInCalls.${c.call}.inFlightMs`)
      expect(inCalls.find((c) => c.call === "buildContext")?.pieces.length).toBeGreaterThan(0)
    }
  })
})
