/**
 * The check a partitioned service makes of the event log before it takes any partition: the log must be
 * of this deployment's layout (WM_PARTITIONS, WM_PARTITION_PINS), or agents would be routed to
 * partitions whose events are elsewhere; `wm migrate` moves them.
 */
import { Effect } from "effect"
import { allPartitions, deploymentPlacement } from "../../../contracts/partitions.ts"
import {
  ALL_EVENTS,
  agentEventsInAnyPartition,
  EVENTS_STREAM,
  partitionEvents,
  relocatedSubject,
  upgradeLegacySubject,
} from "../../../contracts/subjects.ts"
import { Nats } from "../nats/connection.ts"

/**
 * The log must be of this deployment's layout: a log of the layout before partitions needs
 * `wm migrate`, and one written with another WM_PARTITIONS or WM_PARTITION_PINS would route agents to
 * partitions whose events are elsewhere (`wm migrate` moves them). Checked on the last record of the
 * log, of each partition and of each pinned agent, one direct get each: a change of the count or of the
 * pins moves some partition's last writer, or a pinned agent, unless the log has no events of them.
 */
export const checkLogLayout = (partitions: number) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    const lastOf = (filter: string) =>
      Effect.tryPromise(() => jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: filter })).pipe(
        Effect.map((m) => m?.subject ?? null),
        Effect.orElseSucceed(() => null),
      )
    const last = yield* lastOf(ALL_EVENTS)
    if (last === null) return
    if (upgradeLegacySubject(last) !== null)
      return yield* Effect.die(
        new Error(`the event log is of the layout before partitions (${last}): run \`wm migrate\` first`),
      )
    const placement = deploymentPlacement(partitions)
    const filters = [
      ...allPartitions(partitions).map(partitionEvents),
      ...placement.pinnedAgents.map(agentEventsInAnyPartition),
    ]
    const subjects = [last, ...(yield* Effect.forEach(filters, lastOf, { concurrency: 16 }))]
    const misplaced = subjects.find((subject) => subject !== null && relocatedSubject(subject) !== null)
    if (misplaced !== undefined && misplaced !== null) {
      const pins = placement.pins.map((p) => `${p.tenant}=${p.partitions.join(",")}`).join(";") || "none"
      return yield* Effect.die(
        new Error(
          `the event log was written with another placement than WM_PARTITIONS=${partitions}, WM_PARTITION_PINS=${pins} (${misplaced} belongs in ${relocatedSubject(misplaced)}): run \`wm migrate\` first`,
        ),
      )
    }
  })
