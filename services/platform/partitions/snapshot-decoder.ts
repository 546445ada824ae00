/**
 * The snapshots' lines not used yet, decoded behind the partitions that answer (a views-only service keeps
 * a snapshot's views as their lines, each decoded when its agent is first used): one fiber for them all, a
 * few milliseconds at a time, so requests and events are taken in between. A slice bounds the processor
 * time actually spent, so it is measured on the monotonic timer, not on the Clock (a clock that stands
 * still, as a test's may, would never end one).
 */
import { Effect } from "effect"
import type { PartitionStates } from "./partition-state.ts"

/** Snapshot lines decoded behind the partitions that answer: a batch at a time, for a slice of time at most. */
const DECODE_BATCH = 4
const DECODE_SLICE_MS = 5

/** Forks, in the current scope, the fiber decoding the partitions' snapshot lines. */
export const decodeSnapshotLines = (states: PartitionStates) =>
  Effect.forkScoped(
    Effect.forever(
      Effect.gen(function* () {
        const until = performance.now() + DECODE_SLICE_MS
        let decoding = false
        for (const state of states.values()) {
          if (!state.ready || state.rebuilding) continue
          while (state.views.decodeSome(DECODE_BATCH) > 0 && performance.now() < until) decoding = true
          if (performance.now() >= until) break
        }
        yield* Effect.sleep(decoding ? 0 : 50)
      }),
    ),
  )
