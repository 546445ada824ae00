/**
 * A deliberately slow projection, run as its own process by the
 * back-pressure scenario: it follows the event log like any service, but
 * each event takes SLOW_APPLY_MS to apply (the thread sleeps, it does not
 * spin). It prints how far it got, so the scenario can watch it lag and
 * catch up. Environment: NATS_URL, SLOW_APPLY_MS, and HOLD_FILE: while that
 * file exists the projection is held on the event it reached (it prints
 * `held <seq>` and applies nothing), so the scenario knows for certain that
 * a consumer is stuck for as long as it needs, whatever the machine's speed.
 */

import { existsSync } from "node:fs"
import { NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { runProjection } from "../../../services/platform/log/projection.ts"
import { NatsSettings } from "../../../services/platform/nats/settings.ts"
import { foundation } from "../../../services/system.ts"

const delayMs = Number(process.env.SLOW_APPLY_MS ?? 2)
const holdFile = process.env.HOLD_FILE
const sleeper = new Int32Array(new SharedArrayBuffer(4))

const program = Effect.gen(function* () {
  let applied = 0
  const projection = yield* runProjection({
    name: "slow",
    apply: (_event, record) => {
      if (holdFile !== undefined && existsSync(holdFile)) {
        // stdout is a pipe: written synchronously, before the thread blocks.
        process.stdout.write(`held ${record.seq}\n`)
        while (existsSync(holdFile)) Atomics.wait(sleeper, 0, 0, 20)
      }
      Atomics.wait(sleeper, 0, 0, delayMs)
      applied++
    },
  })
  while (true) {
    process.stdout.write(`applied ${projection.appliedSeq()} ${applied}\n`)
    yield* Effect.sleep("100 millis")
  }
})

NodeRuntime.runMain(program.pipe(Effect.scoped, Effect.provide(foundation(NatsSettings.fromEnv("wm-slow-projection")))))
