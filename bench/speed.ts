/**
 * System speed side by side with raw JetStream, in one run on one
 * nats-server: ingest through the API against raw windowed publishes,
 * warm-up replay against a raw ordered consumer, and the working service's
 * peak memory; then the context build latency of a full 12k-token view and
 * merged retrieval latency at 100k long-term records.
 *
 *   npm run bench:speed [-- --out bench/results/speed.json] [--quick] [--rounds 3]
 *                       [--services processes|embedded|in-process]
 *                       [--only context,server,retrieval,load] [--records 100000] [--profile DIR]
 *
 * --only, --records and --profile are for iterating: the committed figures
 * come from one full run. --profile writes a CPU profile of the memory
 * services during the retrieval phase into DIR.
 */
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { SERVICES_MODES, type ServicesMode } from "./speed/ingest.ts"
import { formatReport } from "./speed/report.ts"
import { runSpeedBench, SPEED_PHASES, type SpeedPhase } from "./speed/run.ts"

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    quick: { type: "boolean", default: false },
    rounds: { type: "string" },
    services: { type: "string", default: "processes" },
    only: { type: "string" },
    records: { type: "string" },
    profile: { type: "string" },
  },
})

const services = values.services as ServicesMode
if (!SERVICES_MODES.includes(services)) throw new Error(`--services must be one of ${SERVICES_MODES.join(", ")}`)
const rounds = values.rounds === undefined ? undefined : Number(values.rounds)
if (rounds !== undefined && !(Number.isInteger(rounds) && rounds > 0))
  throw new Error("--rounds must be a positive integer")

const phases = values.only?.split(",").map((p) => p.trim()) as SpeedPhase[] | undefined
for (const p of phases ?? [])
  if (!SPEED_PHASES.includes(p)) throw new Error(`--only takes some of ${SPEED_PHASES.join(", ")}`)
const records = values.records === undefined ? undefined : Number(values.records)
if (records !== undefined && !(Number.isInteger(records) && records > 0))
  throw new Error("--records must be a positive integer")

const report = await runSpeedBench({
  quick: values.quick ?? false,
  ...(phases !== undefined ? { phases } : {}),
  ...(records !== undefined ? { records } : {}),
  ...(values.profile !== undefined ? { profileDir: values.profile } : {}),
  services,
  ...(rounds !== undefined ? { rounds } : {}),
  log: (line) => console.log(line),
})
console.log("")
console.log(formatReport(report))
if (values.out !== undefined) {
  writeFileSync(values.out, `${JSON.stringify(report.figures, null, 2)}\n`)
  console.log(`\nwrote ${values.out}`)
}
