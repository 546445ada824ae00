/**
 * Warm-up: how long a restarted working service takes to rebuild every view
 * by replaying the log, at 10k and 100k events.
 *
 *   npm run bench:warmup [-- --out bench/results/warmup.json]
 */

import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { connect } from "@nats-io/transport-node"
import { ManagedRuntime } from "effect"
import { startNatsServer } from "../infra/nats-server.ts"
import { NatsSettings } from "../services/platform/nats/settings.ts"
import { workingService } from "../services/system.ts"
import { Working } from "../services/working/working.ts"
import { createBenchTopology } from "./speed/services.ts"
import { fillLog } from "./support/synthetic-log.ts"

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    sizes: { type: "string", default: "10000,100000" },
    runs: { type: "string", default: "3" },
  },
})
const sizes = values.sizes!.split(",").map(Number)
const runs = Number(values.runs)
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const results: Record<string, { events: number; medianMs: number; eventsPerSec: number; runsMs: number[] }> = {}
for (const size of sizes) {
  const server = await startNatsServer()
  const nc = await connect({ servers: server.url })
  await createBenchTopology(nc, server.url, 120_000)
  await fillLog(nc, size)
  const times: number[] = []
  for (let r = 0; r < runs; r++) {
    const runtime = ManagedRuntime.make(
      workingService(NatsSettings.make({ servers: [server.url], name: "bench-working" })),
    )
    const t = performance.now()
    const working = await runtime.runPromise(Working)
    times.push(performance.now() - t)
    if (working.warmUp.events !== size) throw new Error(`replayed ${working.warmUp.events}, expected ${size}`)
    await runtime.dispose()
  }
  const ms = median(times)
  results[String(size)] = {
    events: size,
    medianMs: Math.round(ms),
    eventsPerSec: Math.round(size / (ms / 1000)),
    runsMs: times.map(Math.round),
  }
  console.log(
    `warm-up over ${size} events: median ${Math.round(ms)} ms (${results[String(size)]!.eventsPerSec} events/s) runs ${times.map(Math.round).join(", ")} ms`,
  )
  await nc.close()
  await server.stop()
}
if (values.out) writeFileSync(values.out, `${JSON.stringify(results, null, 2)}\n`)
