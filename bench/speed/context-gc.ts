/**
 * The context build of the full 12k-token supervisor view, timed build by
 * build with the minor collections counted, in two ways: the same view
 * built again and again (as `npm run bench:speed -- --only context`), and
 * as the working service runs, each build's EntriesRead folded into the
 * view the next build sees. Given several checkouts (for example the code
 * before a change, `git archive <commit> | tar -x -C DIR` with a
 * node_modules link), it runs each in a child process of its own, the
 * rounds interleaved, so before and after meet the same machine.
 *
 *   node bench/speed/context-gc.ts [--rounds 3] [--builds 5000] [checkout ...]
 */
import { execFileSync } from "node:child_process"
import { loadavg } from "node:os"
import { constants, type PerformanceEntry, PerformanceObserver } from "node:perf_hooks"
import { fileURLToPath, pathToFileURL } from "node:url"
import { parseArgs } from "node:util"

interface Timed {
  readonly p50Ms: number
  readonly p99Ms: number
  /** The process's CPU time per build (its threads, GC helpers included): what preemption on a shared machine does not add to. */
  readonly cpuP50Ms: number
  readonly cpuP99Ms: number
  readonly minorGcs: number
}

/** Runs in the child: `builds` timed builds of each kind on the checkout at `root`. */
const measure = async (root: string, builds: number): Promise<{ unchanged: Timed; afterRead: Timed }> => {
  const at = (path: string) => pathToFileURL(`${root}/${path}`).href
  const { fullSupervisorView } = await import(at("bench/support/full-view.ts"))
  const { contextOfView } = await import(at("domain/context-builder.ts"))
  const { evolve } = await import(at("domain/agent-view.ts"))
  let minor = 0
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR)
        minor++
  })
  const settle = () => new Promise((resolve) => setTimeout(resolve, 50))
  const percentile = (samples: Float64Array, p: number) => {
    const sorted = Float64Array.from(samples).sort()
    return sorted[Math.ceil((p / 100) * sorted.length) - 1]!
  }
  let sink = 0
  /** Times `build` alone; `between` runs untimed after each build, its collections counted with the builds'. */
  const run = async (build: () => void, between: () => void = () => {}): Promise<Timed> => {
    for (let i = 0; i < 1_000; i++) {
      build()
      between()
    }
    await settle()
    minor = 0
    observer.observe({ entryTypes: ["gc"] })
    const samples = new Float64Array(builds)
    const cpu = new Float64Array(builds)
    for (let i = 0; i < builds; i++) {
      const cpuStart = process.cpuUsage()
      const start = performance.now()
      build()
      samples[i] = performance.now() - start
      const used = process.cpuUsage(cpuStart)
      cpu[i] = (used.user + used.system) / 1000
      between()
    }
    await settle()
    observer.disconnect()
    return {
      p50Ms: percentile(samples, 50),
      p99Ms: percentile(samples, 99),
      cpuP50Ms: percentile(cpu, 50),
      cpuP99Ms: percentile(cpu, 99),
      minorGcs: minor,
    }
  }
  const view = fullSupervisorView()
  const unchanged = await run(() => {
    sink += contextOfView(view).tokens
  })
  let served = fullSupervisorView()
  let built: { budget: number; tokens: number; items: ReadonlyArray<{ entryId: string; form: string; cue: boolean }> }
  let seq = 1_000_000
  const afterRead = await run(
    () => {
      built = contextOfView(served)
      sink += built.tokens
    },
    () => {
      served = evolve(
        served,
        {
          _tag: "EntriesRead",
          v: 1,
          eventId: `bench-read-${seq}`,
          agentId: served.config.id,
          at: served.lastEventAt,
          causationId: null,
          correlationId: null,
          stepId: served.step?.stepId ?? null,
          budget: built.budget,
          tokens: built.tokens,
          served: built.items.map((i) => ({ entryId: i.entryId, form: i.form, cue: i.cue })),
        },
        { seq: seq++ },
      )
    },
  )
  if (sink <= 0) throw new Error("the builds served nothing")
  return { unchanged, afterRead }
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: "string", default: "3" },
    builds: { type: "string", default: "5000" },
    child: { type: "boolean", default: false },
  },
})
const builds = Number(values.builds)
if (values.child) {
  console.log(JSON.stringify(await measure(positionals[0]!, builds)))
} else {
  const here = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "")
  const roots = positionals.length > 0 ? positionals : [here]
  const self = fileURLToPath(import.meta.url)
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const root of roots) {
      const out = execFileSync(process.execPath, [self, "--child", "--builds", String(builds), root], {
        encoding: "utf8",
      })
      const r = JSON.parse(out) as { unchanged: Timed; afterRead: Timed }
      const show = (t: Timed) =>
        `p50 ${t.p50Ms.toFixed(3)} ms, p99 ${t.p99Ms.toFixed(3)} ms (CPU p50 ${t.cpuP50Ms.toFixed(3)}, p99 ${t.cpuP99Ms.toFixed(3)}), ${t.minorGcs} minor GCs / ${builds}`
      console.log(
        `round ${round} ${root} (load ${loadavg()[0]!.toFixed(2)}): unchanged view ${show(r.unchanged)}; after each read ${show(r.afterRead)}`,
      )
    }
  }
}
