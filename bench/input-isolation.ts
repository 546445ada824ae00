/**
 * One agent's worst-case input against another agent's latency. The whole
 * system runs in this process (the embedded default, where a stall in any
 * service stalls them all). A "victim" agent records short entries one at a
 * time, on its own connection; meanwhile a "heavy" agent sends a burst of
 * 64 KiB entries of one unbroken run (each a single pre-token, the
 * tokenizer's worst case) every second, several at once, each different so
 * no cache helps, whether or not the previous burst was answered. Prints
 * the victim's p50/p99/max per phase.
 *
 *   node bench/input-isolation.ts [--seconds 8] [--burst 4] [--every 1000] [--content run|prose] [--out file.json]
 */
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { MAX_CONTENT_BYTES } from "../contracts/api.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import { startTestSystem } from "../test/support/system.ts"
import { percentile } from "./speed/stats.ts"

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "8" },
    burst: { type: "string", default: "4" },
    every: { type: "string", default: "1000" },
    out: { type: "string" },
    /** "run": one unbroken run per entry (the worst case); "prose": ordinary sentences of the same size. */
    content: { type: "string", default: "run" },
  },
})
const seconds = Number(values.seconds)
const burst = Number(values.burst)
const every = Number(values.every)

const ALPHABET = "abcdefghijklmnopqrstuvwxyz"
/** 64 KiB of one letter, or of two letters alternating: one pre-token, and a different text each time. */
const pathological = (i: number) => {
  const a = ALPHABET[i % 26]!
  const b = ALPHABET[(i * 7 + 3) % 26]!
  return i % 2 === 0 ? a.repeat(MAX_CONTENT_BYTES - (i % 97)) : (a + b).repeat(MAX_CONTENT_BYTES / 2 - (i % 97))
}

const PROSE = "The delivery was moved to Thursday because the warehouse in Porto closed early for the holiday. "
/** 64 KiB of ordinary sentences, different each time. */
const prose = (i: number) =>
  `Report ${i}. ${PROSE.repeat(Math.ceil(MAX_CONTENT_BYTES / PROSE.length))}`.slice(0, MAX_CONTENT_BYTES - (i % 97))
const attackContent = values.content === "prose" ? prose : pathological

const system = await startTestSystem()
try {
  const victimClient = await WorkingMemoryClient.connect({ servers: system.server.url })
  const victim = victimClient.agent("victim")
  const attacker = system.client.agent("attacker")
  await victim.register({ role: "main" })
  await attacker.register({ role: "supervisor" })

  let sent = 0
  const victimPhase = async (label: string, attack: boolean) => {
    const latencies: number[] = []
    let victimFailures = 0
    let attacks = 0
    let refused = 0
    let running = true
    const writes: Promise<unknown>[] = []
    const bursts = attack
      ? (async () => {
          while (running) {
            for (let k = 0; k < burst; k++) {
              writes.push(
                attacker.record({ origin: "USER", content: attackContent(sent++) }).then(
                  () => attacks++,
                  () => refused++,
                ),
              )
            }
            await new Promise((r) => setTimeout(r, every))
          }
        })()
      : Promise.resolve()
    const end = performance.now() + seconds * 1000
    for (let i = 0; performance.now() < end; i++) {
      const t = performance.now()
      const ok = await victim
        .record({ origin: "USER", content: `Short note number ${i} about the plan for today.` })
        .then(
          () => true,
          () => false,
        )
      if (ok) latencies.push(performance.now() - t)
      else victimFailures++
    }
    running = false
    await bursts
    await Promise.allSettled(writes)
    const row = {
      phase: label,
      victimRecords: latencies.length,
      victimFailures,
      p50: latencies.length > 0 ? percentile(latencies, 50) : null,
      p99: latencies.length > 0 ? percentile(latencies, 99) : null,
      max: latencies.length > 0 ? Math.max(...latencies) : null,
      heavyRecorded: attacks,
      heavyRefused: refused,
    }
    const ms = (x: number | null) => (x === null ? "–" : `${x.toFixed(1)} ms`)
    console.log(
      `${label.padEnd(34)} victim ${row.victimRecords} answered, ${victimFailures} unanswered  p50 ${ms(row.p50)}  p99 ${ms(row.p99)}  max ${ms(row.max)}` +
        (attack ? `  heavy ${attacks} recorded, ${refused} refused` : ""),
    )
    return row
  }

  await victimPhase("warm-up", false)
  const rows = [
    await victimPhase("alone", false),
    await victimPhase(
      `${burst} × 64 KiB ${values.content === "prose" ? "prose" : "unbroken run"} every ${every} ms`,
      true,
    ),
  ]
  if (values.out)
    writeFileSync(
      values.out,
      JSON.stringify({ at: new Date().toISOString(), content: values.content, seconds, burst, every, rows }, null, 2),
    )
  await victimClient.close()
} finally {
  await system.stop()
}
