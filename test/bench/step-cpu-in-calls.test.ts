/**
 * The step benchmark's CPU inside the calls (bench/speed/step-profile.ts, `cpuInCalls`): a CPU profile's samples
 * that fall while a call was in flight are given to that call, by what their stack ran; samples between calls are
 * left out. A profile made by hand, on a clock 5 s ahead of the client's.
 */
import { expect, it } from "vitest"
import type { TimedStep } from "../../bench/speed/step-loop.ts"
import { type CpuProfile, cpuInCalls } from "../../bench/speed/step-profile.ts"

const ROOT = "/repo/"
const frame = (functionName: string, path = "") => ({
  functionName,
  url: path === "" ? "" : `file://${ROOT}${path}`,
})
const OFFSET_US = 5_000_000

/** Samples every millisecond from the client's 0 ms, each of the given node. */
const profileOf = (nodes: ReadonlyArray<number>): CpuProfile => ({
  nodes: [
    { id: 1, callFrame: frame("(root)"), children: [2, 3, 4, 5, 7] },
    { id: 2, callFrame: frame("(idle)") },
    { id: 3, callFrame: frame("recallCues", "services/memory/retrieval/cue-recall.ts"), children: [6] },
    { id: 6, callFrame: frame("open", "services/platform/keys/aead.ts") },
    { id: 4, callFrame: frame("dispatch", "services/platform/log/shared-follow.ts"), children: [8] },
    { id: 8, callFrame: frame("advanceTo", "services/platform/log/sequence-gate.ts"), children: [9] },
    { id: 9, callFrame: frame("decideAndAppend", "services/platform/log/command-handler.ts") },
    { id: 5, callFrame: frame("writeBuffer") },
    { id: 7, callFrame: frame("runLoop", "node_modules/effect/dist/internal/effect.js") },
  ],
  samples: nodes,
  timeDeltas: nodes.map(() => 1_000),
  startTime: OFFSET_US - 1_000,
  endTime: OFFSET_US + nodes.length * 1_000,
})

const stepOf = (calls: TimedStep["calls"]): TimedStep => ({
  agent: "a",
  start: calls[0]!.start,
  end: calls.at(-1)!.end,
  calls,
  served: 0,
  cues: 0,
  contextTokens: 0,
  recalled: true,
  recordedTokens: [0, 0, 0],
})

it("gives each sample inside a call to that call, by what its stack ran, and leaves out the time between calls", () => {
  // Sample k is taken at the client's k ms and stands for the millisecond after it.
  const profile = profileOf([4, 5, 2, 3, 6, 6, 4, 2, 7, 7])
  const steps = [
    stepOf([
      { call: "record", start: 0, end: 2.5 },
      { call: "buildContext", start: 3, end: 6.5 },
    ]),
  ]
  const byCall = new Map(cpuInCalls(profile, steps, OFFSET_US, ROOT).map((c) => [c.call, c]))
  expect(byCall.get("record")).toEqual({
    call: "record",
    inFlightMs: 2.5,
    pieces: [
      { piece: "the log's records applied by the process's projections", ms: 1 },
      { piece: "socket writes", ms: 1 },
      { piece: "idle (waiting for a reply or a delivery)", ms: 1 },
    ],
  })
  // The recall's own opening of a sealed text is the recall's; samples 7 to 9 came after the build answered.
  expect(byCall.get("buildContext")).toEqual({
    call: "buildContext",
    inFlightMs: 3.5,
    pieces: [
      { piece: "the recall (ranking, choosing and reading its cues)", ms: 3 },
      { piece: "the log's records applied by the process's projections", ms: 1 },
    ],
  })
})

it("divides by the steps: two steps give the mean a step", () => {
  const profile = profileOf([3, 2, 3, 2])
  const steps = [
    stepOf([{ call: "buildContext", start: 0, end: 0.5 }]),
    stepOf([{ call: "buildContext", start: 2, end: 2.5 }]),
  ]
  const [build] = cpuInCalls(profile, steps, OFFSET_US, ROOT)
  expect(build).toEqual({
    call: "buildContext",
    inFlightMs: 0.5,
    pieces: [{ piece: "the recall (ranking, choosing and reading its cues)", ms: 1 }],
  })
})

it("gives a request resumed inside a delivery, once its projection reached the sequence it waited for, to the request", () => {
  const profile = profileOf([9, 4, 2])
  const [record] = cpuInCalls(profile, [stepOf([{ call: "record", start: 0, end: 1.5 }])], OFFSET_US, ROOT)
  expect(record?.pieces).toEqual([
    { piece: "the request's own handling (decide, append, ledger)", ms: 1 },
    { piece: "the log's records applied by the process's projections", ms: 1 },
  ])
})
