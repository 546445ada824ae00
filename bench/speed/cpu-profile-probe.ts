/**
 * Preloaded into a service process (`node --import bench/speed/cpu-profile-probe.ts …`) so that the
 * benchmark can ask it, over the IPC channel, to record a CPU profile of its main thread between two
 * messages: `cpuProfileStart`, then `cpuProfileStop`, answered with the path of the profile written
 * (a .cpuprofile file in the system's temporary directory). Changes nothing else.
 */
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"

let session: Session | undefined

process.on("message", async (message: unknown) => {
  if (message === "cpuProfileStart") {
    session = new Session()
    session.connect()
    await session.post("Profiler.enable")
    await session.post("Profiler.start")
    process.send?.({ cpuProfile: "started" })
  } else if (message === "cpuProfileStop" && session !== undefined) {
    const { profile } = await session.post("Profiler.stop")
    session.disconnect()
    session = undefined
    const path = join(tmpdir(), `wm-bench-steps-${process.pid}-${Date.now()}.cpuprofile`)
    writeFileSync(path, JSON.stringify(profile))
    process.send?.({ cpuProfile: path })
  }
})
// Do not keep a process alive that would otherwise exit.
process.channel?.unref()
