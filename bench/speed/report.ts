/** The terminal table of the speed benchmark. */
import type { SpeedReport } from "./run.ts"
import type { EmbedderSteps } from "./steps.ts"

const thousands = (n: number) => Math.round(n).toLocaleString("en-US").replace(/,/g, " ")
const ms = (n: number) => `${n < 1 ? n.toFixed(3) : n.toFixed(2)} ms`
const pct = (x: number) => `${(x * 100).toFixed(1)}%`
const verdict = (ok: boolean) => (ok ? "pass" : "MISS")

/** A rate of the system against raw JetStream's, and whether it reaches `least` of it. */
const againstRaw = (figure: string, system: number, raw: number, least: number): string[] => {
  const ratio = system / raw
  return [
    figure,
    thousands(system),
    thousands(raw),
    pct(ratio),
    `≥ ${Math.round(least * 100)}% of raw`,
    verdict(ratio >= least),
  ]
}

export const formatReport = ({ figures: f, details: d }: SpeedReport): string => {
  const rows: string[][] = [["figure", "system", "raw JetStream", "ratio", "target", ""]]
  if (f.ingestPerSec !== undefined && f.rawPublishPerSec !== undefined)
    rows.push(againstRaw("ingest (entries/s)", f.ingestPerSec, f.rawPublishPerSec, 0.7))
  if (f.ingestManyPerSec !== undefined && f.rawPublishPerSec !== undefined)
    rows.push(againstRaw("ingest by entry.recordMany (entries/s)", f.ingestManyPerSec, f.rawPublishPerSec, 0.7))
  if (f.replayPerSec !== undefined && f.rawConsumePerSec !== undefined)
    rows.push(againstRaw("replay (events/s)", f.replayPerSec, f.rawConsumePerSec, 0.5))
  if (f.contextBuildP50Ms !== undefined && f.contextBuildP99Ms !== undefined)
    rows.push(
      ["context build p50", ms(f.contextBuildP50Ms), "", "", "", ""],
      ["context build p99", ms(f.contextBuildP99Ms), "", "", "< 1 ms", verdict(f.contextBuildP99Ms < 1)],
    )
  if (f.retrievalP99Ms !== undefined && f.retrievalP50Ms !== undefined && f.retrievalMB !== undefined)
    rows.push(
      ["retrieval p50", ms(f.retrievalP50Ms), "", "", "", ""],
      ["retrieval p99", ms(f.retrievalP99Ms), "", "", "< 20 ms", verdict(f.retrievalP99Ms < 20)],
      ["retrieval indexes", `${f.retrievalMB.toFixed(1)} MB`, "", "", "", ""],
    )
  if (f.recordP99Ms !== undefined && f.recordP50Ms !== undefined)
    rows.push(
      ["record until visible p50", ms(f.recordP50Ms), "", "", "", ""],
      ["record until visible p99", ms(f.recordP99Ms), "", "", "", ""],
    )
  if (f.queryP99MsUnderLoad !== undefined && f.queryP50MsUnderLoad !== undefined)
    rows.push(
      ["memory.query p50 under load", ms(f.queryP50MsUnderLoad), "", "", "", ""],
      ["memory.query p99 under load", ms(f.queryP99MsUnderLoad), "", "", "", ""],
    )
  if (f.peakRssMb !== undefined) rows.push(["peak RSS (working)", `${f.peakRssMb.toFixed(1)} MB`, "", "", "", ""])
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
  ]
  if (d.ingest)
    notes.push(
      `ingest: ${s.ingestEntries} entries over ${s.ingestAgents} agents, ${s.window} in flight, ${Math.round(d.ingest.payloadBytes)}-byte events; ` +
        `system ${d.ingest.systemMs.map((x) => x.toFixed(0)).join("/")} ms, by recordMany ${(d.ingest.manyMs ?? []).map((x) => x.toFixed(0)).join("/")} ms, raw ${d.ingest.rawMs.map((x) => x.toFixed(0)).join("/")} ms`,
    )
  if (d.replay)
    notes.push(
      `replay: ${d.replay.events} events; working ${d.replay.systemMs.map((x) => x.toFixed(0)).join("/")} ms, ` +
        `raw ${d.replay.rawMs.map((x) => x.toFixed(0)).join("/")} ms; working process peak RSS ${(d.workingProcess ?? []).map((w) => w.peakRssMb.toFixed(1)).join("/")} MB`,
    )
  if (d.contextBuild)
    notes.push(
      `context build: ${d.contextBuild.rounds.length} × ${d.contextBuild.iterations} builds of a ${d.contextBuild.entries}-entry view ` +
        `(${d.contextBuild.usage} tokens held, step focus set), ${d.contextBuild.served.items} entries / ${d.contextBuild.served.tokens} tokens served; ` +
        `p99 per round ${d.contextBuild.rounds.map((r) => r.p99Ms.toFixed(3)).join("/")} ms`,
    )
  if (d.retrieval) {
    const r = d.retrieval
    const m = r.memory
    notes.push(
      `retrieval: ${r.queries} memory.query requests (working + long-term, top 10) over ${r.records} long-term records ` +
        `(${r.model}; the memory services rebuilt them from the log in ${(r.warmUpMs / 1000).toFixed(1)} s); ` +
        `indexes ${m.retrievalMb.toFixed(1)} MB = lexical ${m.lexicalMb.toFixed(1)} MB + dense ${m.denseMb.toFixed(1)} MB ` +
        `(raw vectors ${m.rawVectorMb.toFixed(1)} MB); memory services' RSS ${m.processRssMb.toFixed(0)} MB`,
    )
  }
  if (d.load) {
    const l = d.load
    notes.push(
      `under load: ${l.agents} agents recording at once (${l.records} entries, each timed until the working view holds it), ` +
        `${l.queries} memory.query requests one at a time meanwhile; every service in one process`,
    )
  }
  const cpu = (c: Readonly<Record<string, number>>) =>
    Object.entries(c)
      .map(([name, us]) => `${name} ${us}`)
      .join(", ")
  if (d.ingest && d.replay && Object.keys(d.ingest.systemCpuUs).length > 0) {
    notes.push(
      `CPU µs per entry, system ingest: ${cpu(d.ingest.systemCpuUs)}; by recordMany: ${cpu(d.ingest.manyCpuUs ?? {})}; raw publish: ${cpu(d.ingest.rawCpuUs)}`,
      `CPU µs per event, working replay (in the bench process): ${cpu(d.replay.systemCpuUs)}; raw consume: ${cpu(d.replay.rawCpuUs)}`,
    )
  }
  const stepTables = (d.steps ?? []).map(formatSteps)
  return [line(rows[0]!), ...rows.slice(1).map(line), "", ...notes, ...stepTables].join("\n")
}

const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string[] => {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)))
  return rows.map((r) =>
    r
      .map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
      .join("  ")
      .trimEnd(),
  )
}

/** The steps phase of one embedder: the table by agent count, the crossing, the fan-out and the profile. */
export const formatSteps = (s: EmbedderSteps): string => {
  const cpu = (c: Readonly<Record<string, number>>) =>
    Object.entries(c)
      .map(([name, us]) => `${name} ${(us / 1000).toFixed(1)}`)
      .join(", ")
  const cpuMs = (c: Readonly<Record<string, number>>) =>
    Object.entries(c)
      .map(([name, v]) => `${name} ${v}`)
      .join(", ")
  const lines = [
    "",
    `steps (WM_EMBEDDER=${s.embedder}, long-term ${s.longTerm === "disk" ? "on disk" : "in memory"}): ${s.populate.agents} agents, each with ${s.populate.entriesPerAgent} entries of history ` +
      `(at least ${s.populate.demotedAtLeast} in long-term; populated in ${s.populate.seconds} s, ${s.populate.logEvents} events); ` +
      `entries recorded per step ${s.recordedTokens.join("/")} tokens (user turn, tool output, thought); idle CPU ms/s ${cpuMs(s.idleCpuMsPerSec)}`,
    ...table([
      [
        "agents",
        "steps/s",
        "step p50",
        "step p99",
        "build p50",
        "build p99",
        "record p99",
        "begin p99",
        "ref p99",
        "end p99",
        "cues/items",
        "CPU ms/step",
        "load",
      ],
      ...s.rows.map((r) => [
        String(r.agents),
        r.stepsPerSec.toFixed(1),
        ms(r.p50Ms),
        ms(r.p99Ms),
        ms(r.calls.buildContext.p50Ms),
        ms(r.calls.buildContext.p99Ms),
        ms(r.calls.record.p99Ms),
        ms(r.calls.beginStep.p99Ms),
        ms(r.calls.reference.p99Ms),
        ms(r.calls.endStep.p99Ms),
        `${r.cuesPerBuild}/${r.servedPerBuild}`,
        cpu(r.cpuUsPerStep),
        r.load.join("→"),
      ]),
    ]),
    `step p99 passes 50 ms at ${s.p99Over50Ms.stepsPerSec ?? "—"} steps/s (${s.p99Over50Ms.how})`,
  ]
  if (s.fanOut)
    lines.push(
      `fan-out, ${s.fanOut.replicas} replicas, ${s.fanOut.agents} agents, ${s.fanOut.stepsPerAgent} steps each: ` +
        s.fanOut.services
          .map((f) => `${f.service} sent ${f.sent}, each replica received ${f.received.join("/")}`)
          .join("; ") +
        `; largest share one replica received ${s.fanOut.maxShareReceived}; step p50 ${ms(s.fanOut.stepP50Ms)}, p99 ${ms(s.fanOut.stepP99Ms)}` +
        (s.fanOut.settled ? "" : " (partitions moved during the measurement: not a figure of the division)"),
    )
  const p = s.profile
  lines.push(
    `where a step's time goes (one agent alone, ${p.steps} steps, mean step ${ms(p.stepMs)}; per step):`,
    ...table([
      ["piece", "ms", "share", "round trips"],
      ...p.rows.map((r) => [r.piece, r.ms.toFixed(2), pct(r.share), r.roundTrips > 0 ? r.roundTrips.toFixed(1) : ""]),
    ]),
    `messages on the wire a step, by kind (from the first step's start to the last one's end, pauses included):`,
    ...table([["kind", "a step"], ...p.wire.map((w) => [w.kind, w.perStep.toFixed(1)])]),
    `the services' main thread meanwhile (CPU profile; nearest file of ours on the stack):`,
    ...table([["where", "ms", "share"], ...s.servicesCpu.map((r) => [r.where, r.ms.toFixed(0), pct(r.share)])]),
    `the services' main thread while each call was in flight (CPU profile inside the calls' windows; ms a step):`,
    ...s.servicesCpuInCalls.map(
      (c) =>
        `  ${c.call} (${c.inFlightMs.toFixed(2)} ms in flight a step): ` +
        c.pieces
          .filter((r) => r.ms >= 0.05)
          .map((r) => `${r.piece} ${r.ms.toFixed(2)}`)
          .join("; "),
    ),
    ...p.calls.map(
      (c) =>
        `  ${c.call} (${c.count.toFixed(0)} a step, ${c.ms.toFixed(2)} ms a step): ` +
        c.pieces
          .slice(0, 6)
          .map((r) => `${r.piece} ${r.ms.toFixed(2)} ms${r.roundTrips > 0 ? ` (${r.roundTrips})` : ""}`)
          .join("; "),
    ),
  )
  return lines.join("\n")
}
