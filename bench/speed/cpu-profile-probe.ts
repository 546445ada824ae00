/**
 * Preloaded into a service process (`node --import bench/speed/cpu-profile-probe.ts …`) so that the
 * benchmark can ask it, over the IPC channel, to record a CPU profile of its main thread between two
 * messages: `cpuProfileStart`, then `cpuProfileStop`, answered with the path of the profile written
 * (a .cpuprofile file in the system's temporary directory), with beside it the garbage collections meanwhile
 * (`<profile>.gc.json`: count and milliseconds by kind, and the heap at the end) and a sample of what was allocated
 * (`<profile>.heapprofile`). Changes nothing else.
 */
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { constants, PerformanceObserver } from "node:perf_hooks"

let session: Session | undefined
/** Garbage collections while profiling, by kind: count and milliseconds (written beside the profile). */
const collections = new Map<string, { count: number; ms: number }>()
const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weak callbacks",
}
const gcObserver = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = GC_KINDS[(entry as { detail?: { kind?: number } }).detail?.kind ?? 0] ?? "other"
    const seen = collections.get(kind) ?? { count: 0, ms: 0 }
    seen.count++
    seen.ms += entry.duration
    collections.set(kind, seen)
  }
})

process.on("message", async (message: unknown) => {
  if (message === "cpuProfileStart") {
    session = new Session()
    session.connect()
    await session.post("Profiler.enable")
    await session.post("Profiler.start")
    // Every allocation sampled, also those collected since: what the collector had to do.
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 32_768,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    })
    collections.clear()
    gcObserver.observe({ entryTypes: ["gc"] })
    process.send?.({ cpuProfile: "started" })
  } else if (message === "cpuProfileStop" && session !== undefined) {
    const { profile } = await session.post("Profiler.stop")
    const { profile: allocations } = await session.post("HeapProfiler.stopSampling")
    session.disconnect()
    session = undefined
    const path = join(tmpdir(), `wm-bench-steps-${process.pid}-${Date.now()}.cpuprofile`)
    writeFileSync(path, JSON.stringify(profile))
    writeFileSync(`${path}.heapprofile`, JSON.stringify(allocations))
    gcObserver.disconnect()
    const { heapUsed, heapTotal, rss } = process.memoryUsage()
    writeFileSync(
      `${path}.gc.json`,
      JSON.stringify({ collections: Object.fromEntries(collections), heapUsed, heapTotal, rss }, null, 2),
    )
    process.send?.({ cpuProfile: path })
  }
})
// Do not keep a process alive that would otherwise exit.
process.channel?.unref()
