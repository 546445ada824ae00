/**
 * What a cluster scenario checks once the log has settled: every acknowledged record stored exactly once,
 * no event stored twice, and the working and gateway views — once their replicas answer for every agent
 * again — equal to the views rebuilt from the log.
 */
import { expect } from "vitest"
import type { GatewayShape } from "../../../services/gateway/gateway.ts"
import type { WorkingShape } from "../../../services/working/working.ts"
import { eventually } from "../../support/eventually.ts"
import { duplicateEvents, entryRecordCounts, type RawRecord, rebuildViews, snapshotOf } from "./audit.ts"
import type { CallStats } from "./driver.ts"

/** Returns how many EntryRecorded events each entry has (all 1 when it passes). */
export const expectEachAcknowledgedOnce = (
  log: ReadonlyArray<RawRecord>,
  { stats, acknowledged, sent }: { readonly stats: CallStats; readonly acknowledged: number; readonly sent: number },
): Map<string, number> => {
  const counts = entryRecordCounts(log)
  expect(stats.failures).toEqual([])
  expect(acknowledged).toBe(sent)
  expect(counts.size).toBe(sent)
  expect([...counts.values()].every((n) => n === 1)).toBe(true)
  expect(duplicateEvents(log)).toBe(0)
  return counts
}

export const expectViewsEqualRebuild = async (
  log: ReadonlyArray<RawRecord>,
  lastSeq: number,
  agents: ReadonlyArray<string>,
  { working, gateway }: { readonly working: WorkingShape; readonly gateway: GatewayShape },
): Promise<void> => {
  // Leases that lapsed during the elections are the replicas' again: they answer for every agent.
  await eventually(
    "the working and gateway replicas to answer for every agent",
    async () => agents.every((id) => working.owns(id) && gateway.owns(id)) || undefined,
    60_000,
    100,
  )
  const rebuilt = rebuildViews(log, lastSeq)
  for (const id of agents) {
    expect(snapshotOf(working.view(id)), `working ${id}`).toEqual(snapshotOf(rebuilt.get(id)))
    expect(snapshotOf(gateway.view(id)), `gateway ${id}`).toEqual(snapshotOf(rebuilt.get(id)))
  }
}
