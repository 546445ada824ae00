/** The terminal table of the speed benchmark. */
import type { SpeedReport } from "./run.ts"

const thousands = (n: number) => Math.round(n).toLocaleString("en-US").replace(/,/g, " ")
const ms = (n: number) => `${n < 1 ? n.toFixed(3) : n.toFixed(2)} ms`
const pct = (x: number) => `${(x * 100).toFixed(1)}%`
const verdict = (ok: boolean) => (ok ? "pass" : "MISS")

export const formatReport = ({ figures: f, details: d }: SpeedReport): string => {
  const ingestRatio = f.ingestPerSec / f.rawPublishPerSec
  const replayRatio = f.replayPerSec / f.rawConsumePerSec
  const rows: string[][] = [
    ["figure", "system", "raw JetStream", "ratio", "target", ""],
    [
      "ingest (entries/s)",
      thousands(f.ingestPerSec),
      thousands(f.rawPublishPerSec),
      pct(ingestRatio),
      "≥ 70% of raw",
      verdict(ingestRatio >= 0.7),
    ],
    [
      "replay (events/s)",
      thousands(f.replayPerSec),
      thousands(f.rawConsumePerSec),
      pct(replayRatio),
      "≥ 50% of raw",
      verdict(replayRatio >= 0.5),
    ],
    ["context build p50", ms(f.contextBuildP50Ms), "", "", "", ""],
    ["context build p99", ms(f.contextBuildP99Ms), "", "", "< 1 ms", verdict(f.contextBuildP99Ms < 1)],
    f.retrievalP99Ms === undefined
      ? ["retrieval p99", "not yet built", "", "", "< 20 ms", ""]
      : ["retrieval p99", ms(f.retrievalP99Ms), "", "", "< 20 ms", verdict(f.retrievalP99Ms < 20)],
    ["peak RSS (working)", `${f.peakRssMb.toFixed(1)} MB`, "", "", "", ""],
  ]
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)))
  const line = (r: string[]) =>
    r
      .map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
      .join("  ")
      .trimEnd()
  const s = d.sizes
  const notes = [
    `medians of ${s.rounds} interleaved round(s); services: ${d.services}; ${d.machine} at start, ` +
      `${d.loadAtEnd.map((l) => l.toFixed(2)).join(" ")} at end`,
    `ingest: ${s.ingestEntries} entries over ${s.ingestAgents} agents, ${s.window} in flight, ${Math.round(d.ingest.payloadBytes)}-byte events; ` +
      `system ${d.ingest.systemMs.map((x) => x.toFixed(0)).join("/")} ms, raw ${d.ingest.rawMs.map((x) => x.toFixed(0)).join("/")} ms`,
    `replay: ${d.replay.events} events; working ${d.replay.systemMs.map((x) => x.toFixed(0)).join("/")} ms, ` +
      `raw ${d.replay.rawMs.map((x) => x.toFixed(0)).join("/")} ms; working process peak RSS ${d.workingProcess.map((w) => w.peakRssMb.toFixed(1)).join("/")} MB`,
    `context build: ${d.contextBuild.rounds.length} × ${d.contextBuild.iterations} builds of a ${d.contextBuild.entries}-entry view ` +
      `(${d.contextBuild.usage} tokens held, step focus set), ${d.contextBuild.served.items} entries / ${d.contextBuild.served.tokens} tokens served; ` +
      `p99 per round ${d.contextBuild.rounds.map((r) => r.p99Ms.toFixed(3)).join("/")} ms`,
  ]
  if (typeof d.retrieval === "object") {
    const r = d.retrieval
    notes.push(
      `retrieval: ${r.queries} memory.query requests (working + long-term, top 10) over ${r.records} long-term records ` +
        `(${r.model}; the memory services rebuilt them from the log in ${(r.warmUpMs / 1000).toFixed(1)} s); p50 ${ms(r.p50Ms)}`,
    )
  }
  const cpu = (c: Readonly<Record<string, number>>) =>
    Object.entries(c)
      .map(([name, us]) => `${name} ${us}`)
      .join(", ")
  if (Object.keys(d.ingest.systemCpuUs).length > 0) {
    notes.push(
      `CPU µs per entry, system ingest: ${cpu(d.ingest.systemCpuUs)}; raw publish: ${cpu(d.ingest.rawCpuUs)}`,
      `CPU µs per event, working replay (in the bench process): ${cpu(d.replay.systemCpuUs)}; raw consume: ${cpu(d.replay.rawCpuUs)}`,
    )
  }
  return [line(rows[0]!), ...rows.slice(1).map(line), "", ...notes].join("\n")
}
