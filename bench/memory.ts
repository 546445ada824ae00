/**
 * Memory per agent and per working entry: the heap the working views retain
 * and the bytes of their snapshots, in process (no nats-server). See
 * bench/memory/run.ts and BENCHMARKS.md.
 *
 *   npm run bench:memory [-- --out <file.json>] [--agents 1000,10000] [--entry-agents 1000]
 *                        [--entries 64] [--history-entries 100000] [--history-steps 10000] [--budget 8000]
 */
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { runMemoryBench } from "./memory/run.ts"

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    agents: { type: "string", default: "1000,10000" },
    "entry-agents": { type: "string", default: "1000" },
    entries: { type: "string", default: "64" },
    "history-entries": { type: "string", default: "100000" },
    "history-steps": { type: "string", default: "10000" },
    budget: { type: "string", default: "8000" },
  },
})

const positive = (name: string, text: string): number => {
  const n = Number(text)
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, not '${text}'`)
  return n
}

const report = runMemoryBench({
  idleAgents: values.agents.split(",").map((a) => positive("agents", a.trim())),
  entryAgents: positive("entry-agents", values["entry-agents"]),
  entriesPerAgent: positive("entries", values.entries),
  historyEntries: positive("history-entries", values["history-entries"]),
  historySteps: positive("history-steps", values["history-steps"]),
  budget: positive("budget", values.budget),
  log: (line) => console.error(line),
})
const json = `${JSON.stringify(report, null, 2)}\n`
if (values.out !== undefined) writeFileSync(values.out, json)
process.stdout.write(json)
