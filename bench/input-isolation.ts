/**
 * One agent's worst-case input against another agent's latency. The whole
 * system runs in this process (the embedded default, where a stall in any
 * service stalls them all). A "victim" agent records short entries one at a
 * time; meanwhile an "attacker" agent records 64 KiB entries of one unbroken
 * run (each a single pre-token, the tokenizer's worst case), several at
 * once, each different so no cache helps. Prints the victim's p50/p99/max
 * per phase, and the attacker's records/s.
 *
 *   node bench/input-isolation.ts [--seconds 8] [--concurrency 4] [--out bench/results/input-isolation.json]
 */
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { MAX_CONTENT_BYTES } from "../contracts/api.ts"
import { startTestSystem } from "../test/support/system.ts"
import { percentile } from "./speed/stats.ts"

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "8" },
    concurrency: { type: "string", default: "4" },
    out: { type: "string" },
    /** "run": one unbroken run per entry (the worst case); "prose": ordinary sentences of the same size. */
    content: { type: "string", default: "run" },
  },
})
const seconds = Number(values.seconds)
const concurrency = Number(values.concurrency)

const ALPHABET = "abcdefghijklmnopqrstuvwxyz"
/** 64 KiB of one letter, or of two letters alternating: one pre-token, and a different text each time. */
const pathological = (i: number) => {
  const a = ALPHABET[i % 26]!
  const b = ALPHABET[(i * 7 + 3) % 26]!
  return i % 2 === 0 ? a.repeat(MAX_CONTENT_BYTES - (i % 97)) : (a + b).repeat(MAX_CONTENT_BYTES / 2 - (i % 97))
}

const PROSE = "The delivery was moved to Thursday because the warehouse in Porto closed early for the holiday. "
/** 64 KiB of ordinary sentences, different each time. */
const prose = (i: number) => `Report ${i}. ${PROSE.repeat(Math.ceil(MAX_CONTENT_BYTES / PROSE.length))}`.slice(0, MAX_CONTENT_BYTES - (i % 97))
const attackContent = values.content === "prose" ? prose : pathological

const system = await startTestSystem()
try {
  const victim = system.client.agent("victim")
  const attacker = system.client.agent("attacker")
  await victim.register({ role: "main" })
  await attacker.register({ role: "supervisor" })

  const victimPhase = async (label: string, attack: boolean) => {
    const latencies: number[] = []
    let attacks = 0
    let refused = 0
    let running = true
    const attackers = attack
      ? Array.from({ length: concurrency }, async (_, w) => {
          for (let i = w; running; i += concurrency) {
            await attacker.record({ origin: "USER", content: attackContent(i) }).then(
              () => attacks++,
              () => refused++,
            )
          }
        })
      : []
    const end = performance.now() + seconds * 1000
    for (let i = 0; performance.now() < end; i++) {
      const t = performance.now()
      await victim.record({ origin: "USER", content: `Short note number ${i} about the plan for today.` })
      latencies.push(performance.now() - t)
    }
    running = false
    await Promise.all(attackers)
    const row = {
      phase: label,
      victimRecords: latencies.length,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      max: Math.max(...latencies),
      attackerRecords: attacks,
      attackerRefused: refused,
      attackerPerSecond: attacks / seconds,
    }
    console.log(
      `${label.padEnd(28)} victim ${row.victimRecords} records  p50 ${row.p50.toFixed(1)} ms  p99 ${row.p99.toFixed(1)} ms  max ${row.max.toFixed(1)} ms` +
        (attack ? `  attacker ${attacks} recorded, ${refused} refused` : ""),
    )
    return row
  }

  await victimPhase("warm-up", false)
  const rows = [await victimPhase("alone", false), await victimPhase(`with ${concurrency} ${values.content === "prose" ? "prose" : "unbroken-run"} writers`, true)]
  if (values.out) writeFileSync(values.out, JSON.stringify({ at: new Date().toISOString(), content: values.content, seconds, concurrency, rows }, null, 2))
} finally {
  await system.stop()
}
