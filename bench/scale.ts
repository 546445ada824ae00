/**
 * Scale benchmark on a three-node loopback cluster (R3): working replicas by
 * partition, snapshots, takeover. See bench/scale/run.ts and BENCHMARKS.md.
 *
 *   npm run bench:scale [-- --out <file.json>] [--agents 1000] [--events 1000000] [--replicas 1,2,3]
 *                       [--lease-ttl-ms 6000] [--takeover-writes 20]
 */
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { runScaleBench } from "./scale/run.ts"

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    agents: { type: "string", default: "1000" },
    events: { type: "string", default: "1000000" },
    replicas: { type: "string", default: "1,2,3" },
    "lease-ttl-ms": { type: "string", default: "6000" },
    "takeover-writes": { type: "string", default: "20" },
  },
})

const positive = (name: string, text: string): number => {
  const n = Number(text)
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, not '${text}'`)
  return n
}

const report = await runScaleBench({
  agents: positive("agents", values.agents),
  events: positive("events", values.events),
  replicas: values.replicas.split(",").map((r) => positive("replicas", r.trim())),
  leaseTtlMs: positive("lease-ttl-ms", values["lease-ttl-ms"]),
  takeoverWrites: positive("takeover-writes", values["takeover-writes"]),
  log: (line) => console.error(line),
})
const json = `${JSON.stringify(report, null, 2)}\n`
if (values.out !== undefined) writeFileSync(values.out, json)
process.stdout.write(json)
