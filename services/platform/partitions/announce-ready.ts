import { Effect } from "effect"
import type { PartitionedServiceInspection } from "./inspection.ts"

/**
 * The line a partitioned service logs once it answers for every partition it took at start: how long
 * after the process started (modules loaded by the first figure), and how each partition was caught up.
 * `modulesLoadedAt` is `performance.now()` read first thing in the service's main module.
 */
export const announceReady = (
  service: string,
  inspection: Pick<PartitionedServiceInspection, "catchUps">,
  modulesLoadedAt: number,
) =>
  Effect.suspend(() => {
    const catchUps = inspection.catchUps()
    const fromSnapshot = catchUps.filter((c) => c.snapshotSeq > 0).length
    const slowest = Math.max(0, ...catchUps.map((c) => c.millis))
    const slowestLoad = Math.max(0, ...catchUps.map((c) => c.snapshotMillis))
    return Effect.log(
      `${service} ready ${Math.round(performance.now())} ms after the process started ` +
        `(modules loaded at ${Math.round(modulesLoadedAt)} ms; ${catchUps.length} partitions, ` +
        `${fromSnapshot} from snapshots, slowest caught up in ${slowest} ms, slowest snapshot read in ${slowestLoad} ms)`,
    )
  })
