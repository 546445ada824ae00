/**
 * The speed benchmark's command line: flags read and checked, and the figures an `--only` run writes
 * next to the ones it keeps. No benchmark runs here.
 */
import { describe, expect, it } from "vitest"
import { mergeFigures, parseSpeedArgs } from "../../bench/speed/options.ts"
import { p99Crossing } from "../../bench/speed/steps.ts"

describe("bench:speed options", () => {
  it("reads nothing given as the defaults", () => {
    expect(parseSpeedArgs([])).toEqual({ quick: false, services: "processes" })
  })

  it("reads every flag", () => {
    expect(
      parseSpeedArgs([
        "--out",
        "x.json",
        "--quick",
        "--rounds",
        "2",
        "--services",
        "embedded",
        "--only",
        "steps, load",
        "--records",
        "500",
        "--profile",
        "prof",
        "--step-agents",
        "1,10,100",
        "--step-seconds",
        "30",
        "--step-embedders",
        "minilm,offline",
        "--step-longterm",
        "memory",
      ]),
    ).toEqual({
      out: "x.json",
      quick: true,
      rounds: 2,
      services: "embedded",
      phases: ["steps", "load"],
      records: 500,
      profile: "prof",
      stepAgents: [1, 10, 100],
      stepSeconds: 30,
      stepEmbedders: ["minilm", "offline"],
      stepLongTerm: "memory",
    })
  })

  it.each([
    [["--step-agents", "1,0"], "--step-agents must be a positive integer"],
    [["--step-agents", "1,2.5"], "--step-agents must be a positive integer"],
    [["--step-agents", "ten"], "--step-agents must be a positive integer"],
    [["--step-agents", ","], "--step-agents takes agent counts"],
    [["--step-seconds=-3"], "--step-seconds must be a positive integer"],
    [["--step-embedders", " , "], "--step-embedders takes WM_EMBEDDER names"],
    [["--only", "steps,nothing"], "--only takes some of"],
    [["--only", ""], "--only takes some of"],
    [["--rounds", "0"], "--rounds must be a positive integer"],
    [["--step-longterm", "cloud"], "--step-longterm must be one of"],
    [["--services", "cloud"], "--services must be one of"],
  ])("refuses %j", (args, message) => {
    expect(() => parseSpeedArgs(args)).toThrow(message)
  })

  it("refuses a flag it does not know", () => {
    expect(() => parseSpeedArgs(["--step-agent", "3"])).toThrow()
  })
})

describe("bench:speed --only writes", () => {
  it("the figures of the phases that ran, and keeps the others'", () => {
    const existing = { ingestPerSec: 1, steps: { p99Ms: 9 }, stepsByEmbedder: { offline: {} }, fanOut: { x: 1 } }
    expect(mergeFigures(existing, { steps: { p99Ms: 7 }, stepsByAgents: [] }, ["steps"])).toEqual({
      ingestPerSec: 1,
      steps: { p99Ms: 7 },
      stepsByAgents: [],
    })
  })

  it("everything fresh when there is no file yet", () => {
    expect(mergeFigures(undefined, { recordP99Ms: 3 }, ["load"])).toEqual({ recordP99Ms: 3 })
  })
})

describe("the step rate at which p99 passes 50 ms", () => {
  it("is interpolated between the rates on each side", () => {
    expect(
      p99Crossing([
        { stepsPerSec: 10, p99Ms: 40 },
        { stepsPerSec: 1, p99Ms: 20 },
        { stepsPerSec: 100, p99Ms: 140 },
      ]),
    ).toEqual({ stepsPerSec: 19, how: "interpolated" })
  })

  it("is not a number when no measured rate is on one side", () => {
    expect(p99Crossing([{ stepsPerSec: 1, p99Ms: 60 }])).toEqual({
      stepsPerSec: null,
      how: "above 50 ms at every rate measured",
    })
    expect(p99Crossing([{ stepsPerSec: 100, p99Ms: 49 }])).toEqual({
      stepsPerSec: null,
      how: "below 50 ms at every rate measured",
    })
  })
})
