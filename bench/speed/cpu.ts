/**
 * CPU time of processes, from /proc (Linux only; elsewhere nothing is
 * reported): where a throughput figure's CPU goes, per process.
 */
import { readdirSync, readFileSync } from "node:fs"

/** Clock ticks per second of /proc/<pid>/stat times; 100 on Linux. */
const TICKS_PER_SECOND = 100

/** User + system CPU milliseconds a process has used so far, or undefined when unknown. */
export const cpuMillis = (pid: number): number | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // The command name may contain spaces; the fields after it are fixed.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    const utime = Number(fields[11])
    const stime = Number(fields[12])
    return Number.isFinite(utime) && Number.isFinite(stime) ? ((utime + stime) * 1000) / TICKS_PER_SECOND : undefined
  } catch {
    return undefined
  }
}

/** The first process whose command line contains every one of `parts`. */
export const findPid = (...parts: ReadonlyArray<string>): number | undefined => {
  let entries: string[]
  try {
    entries = readdirSync("/proc")
  } catch {
    return undefined
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ")
      if (parts.every((p) => cmdline.includes(p))) return Number(entry)
    } catch {
      // The process ended meanwhile.
    }
  }
  return undefined
}

export type CpuSample = ReadonlyMap<string, number>

/** CPU milliseconds of each named process now (those that cannot be read are left out). */
export const sampleCpu = (pids: ReadonlyMap<string, number>): CpuSample => {
  const out = new Map<string, number>()
  for (const [name, pid] of pids) {
    const ms = cpuMillis(pid)
    if (ms !== undefined) out.set(name, ms)
  }
  return out
}

/** CPU microseconds per operation of each process between two samples. */
export const cpuPerOperation = (before: CpuSample, after: CpuSample, operations: number): Map<string, number> => {
  const out = new Map<string, number>()
  for (const [name, end] of after) {
    const start = before.get(name)
    if (start !== undefined) out.set(name, ((end - start) * 1000) / operations)
  }
  return out
}
