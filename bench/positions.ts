/**
 * What proving a partition complete up to the log's end costs the server, on a long log: the partition's
 * last record (a wildcard `last_by_subj` get), its next record after a recent sequence (`next_by_subj`) and
 * its consumer's position (a consumer info), side by side on one nats-server (bench/positions/measure.ts).
 *
 *   npm run bench:positions [-- --events 300000 --agents 100 --payload 1000 --requests 300
 *                            --since 1000 --out bench/results/positions.json]
 */
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { measurePositions } from "./positions/measure.ts"

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "300000" },
    agents: { type: "string", default: "100" },
    payload: { type: "string", default: "1000" },
    requests: { type: "string", default: "300" },
    since: { type: "string", default: "1000" },
    out: { type: "string" },
  },
})

const figures = await measurePositions(
  {
    events: Number(values.events),
    agents: Number(values.agents),
    payloadBytes: Number(values.payload),
    requests: Number(values.requests),
    since: Number(values.since),
  },
  console.log,
)
const row = (name: string, cost: (typeof figures)["consumerPosition"]) =>
  `${name.padEnd(34)} ${String(cost.p50Ms).padStart(7)} / ${String(cost.p99Ms).padStart(7)} ms   ${cost.serverCpuMs ?? "?"} ms`
console.log(
  `nats-server ${figures.natsServer ?? "?"}: ${figures.events} events, ${figures.subjects} subjects, ` +
    `${(figures.bytes / 1e6).toFixed(0)} MB`,
)
console.log(`${"proof".padEnd(34)} p50 / p99 round trip   server CPU a request`)
console.log(row("partition's last record (wildcard)", figures.partitionLastRecord))
console.log(row(`its next record after last-${values.since}`, figures.partitionNextRecord))
console.log(row("consumer position (consumer info)", figures.consumerPosition))
if (values.out !== undefined) {
  writeFileSync(values.out, `${JSON.stringify(figures, null, 2)}\n`)
  console.log(`wrote ${values.out}`)
}
