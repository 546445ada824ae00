/**
 * The scale benchmark at a smoke size, on a real three-node cluster with
 * working replicas as processes: every figure is reported, and the takeover
 * loses no acknowledged write and answers no read from a stale view. No
 * timing is asserted: benchmarks are not tests.
 */
import { expect, it } from "vitest"
import { runScaleBench } from "../../bench/scale/run.ts"

it("bench:scale at a smoke size reports every figure, with no acknowledged write lost and no stale answer", async () => {
  const report = await runScaleBench({
    agents: 20,
    events: 2_000,
    replicas: [1, 2],
    leaseTtlMs: 2_000,
    takeoverWrites: 3,
    log: () => undefined,
  })
  expect(report.replicas).toEqual([1, 2])
  expect(report.eventsConsumedShare).toHaveLength(2)
  expect(report.eventsConsumedShare[0]).toBe(1)
  expect(report.eventsConsumedShare[1]).toBeLessThan(1)
  expect(report.rssPerReplicaMB.every((mb) => mb > 0)).toBe(true)
  for (const ms of [report.restartMsSnapshot, report.restartMsFullReplay, report.takeoverMs])
    expect(Number.isFinite(ms) && ms > 0).toBe(true)
  // The restarted replica said when its modules were loaded and when it was ready.
  for (const phases of [
    report.restartPhases.fromSnapshot,
    report.restartPhases.fromSnapshotNoSettle,
    report.restartPhases.fullReplay,
  ])
    expect(phases.readyMs > phases.modulesMs && phases.modulesMs > 0).toBe(true)
  expect({ lostAcked: report.lostAcked, wrongAnswers: report.wrongAnswers }).toEqual({ lostAcked: 0, wrongAnswers: 0 })
}, 600_000)
