/**
 * System speed side by side with raw JetStream, in one run on one
 * nats-server: ingest through the API against raw windowed publishes,
 * warm-up replay against a raw ordered consumer, and the working service's
 * peak memory; then the context build latency of a full 12k-token view,
 * merged retrieval latency at 100k long-term records, records and queries
 * under load, and the agent loop's steps at 1, 10 and 100 agents.
 *
 *   npm run bench:speed [-- --out bench/results/speed.json] [--quick] [--rounds 3]
 *                       [--services processes|embedded|in-process]
 *                       [--only context,server,retrieval,load,steps] [--records 100000] [--profile DIR]
 *                       [--step-agents 1,10,100] [--step-seconds 40] [--step-embedders minilm,offline]
 *                       [--step-longterm disk|memory]
 *
 * --only, --records and --profile are for iterating: the committed figures
 * come from one full run, or, for the steps phase, from `--only steps`. With
 * --only, the figures of the phases that did not run are kept from the --out
 * file. --profile writes a CPU profile of the memory services during the
 * retrieval phase into DIR, and one of the services' main thread for each
 * agent count of the steps phase. --step-embedders measures the steps phase once
 * per embedder, each on a system of its own (default: WM_EMBEDDER's);
 * --step-longterm memory keeps its long-term records in memory instead of on
 * disk (where `npm start` keeps them).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { mergeFigures, parseSpeedArgs } from "./speed/options.ts"
import { formatReport } from "./speed/report.ts"
import { runSpeedBench, SPEED_PHASES } from "./speed/run.ts"

const args = parseSpeedArgs(process.argv.slice(2))

const report = await runSpeedBench({
  quick: args.quick,
  ...(args.phases !== undefined ? { phases: args.phases } : {}),
  ...(args.records !== undefined ? { records: args.records } : {}),
  ...(args.profile !== undefined ? { profileDir: args.profile } : {}),
  services: args.services,
  ...(args.rounds !== undefined ? { rounds: args.rounds } : {}),
  ...(args.stepAgents !== undefined ? { stepAgents: args.stepAgents } : {}),
  ...(args.stepSeconds !== undefined ? { stepSeconds: args.stepSeconds } : {}),
  ...(args.stepEmbedders !== undefined ? { stepEmbedders: args.stepEmbedders } : {}),
  ...(args.stepLongTerm !== undefined ? { stepLongTerm: args.stepLongTerm } : {}),
  log: (line) => console.log(line),
})
console.log("")
console.log(formatReport(report))
if (args.out !== undefined) {
  const figures = report.figures as Readonly<Record<string, unknown>>
  const written =
    args.phases !== undefined && existsSync(args.out)
      ? mergeFigures(JSON.parse(readFileSync(args.out, "utf8")) as Record<string, unknown>, figures, args.phases)
      : mergeFigures(undefined, figures, SPEED_PHASES)
  writeFileSync(args.out, `${JSON.stringify(written, null, 2)}\n`)
  console.log(
    `\nwrote ${args.out}${args.phases !== undefined ? ` (${args.phases.join(", ")}; other figures kept)` : ""}`,
  )
}
