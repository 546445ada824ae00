/**
 * The dashboard's page, built by Vite into dashboard/dist:
 *
 *   npm run build:dashboard         builds it
 *   ensureDashboardBundle()         builds it only when it is missing or older than its sources
 *                                   (what npm start and the browser tests call)
 *
 * A build goes to a directory of its own and is then renamed into place, so a page is never served
 * half written and two builds at once (two npm starts) do not mix their files.
 */
import { existsSync, readdirSync, renameSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"

export const DASHBOARD_DIR = import.meta.dirname
export const BUNDLE_DIR = join(DASHBOARD_DIR, "dist")
const SOURCES = [join(DASHBOARD_DIR, "src"), join(DASHBOARD_DIR, "index.html"), join(DASHBOARD_DIR, "vite.config.ts")]
const INDEX = join(BUNDLE_DIR, "index.html")

const newestMtime = (path: string): number => {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((name) => newestMtime(join(path, name))))
}

/** Whether the built page is missing or older than any of its sources. */
export const bundleIsStale = (): boolean =>
  !existsSync(INDEX) || statSync(INDEX).mtimeMs < Math.max(...SOURCES.map(newestMtime))

/** Builds the page into dashboard/dist. */
export const buildDashboardBundle = async (): Promise<void> => {
  const { build } = await import("vite")
  const staging = join(DASHBOARD_DIR, `.dist-${process.pid}-${Date.now()}`)
  try {
    await build({ configFile: join(DASHBOARD_DIR, "vite.config.ts"), build: { outDir: staging, emptyOutDir: true } })
    rmSync(BUNDLE_DIR, { recursive: true, force: true })
    try {
      renameSync(staging, BUNDLE_DIR)
    } catch (error) {
      // Another build put its page in place first: theirs is as good as this one.
      if (!existsSync(INDEX)) throw error
    }
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

/** Builds the page when it is missing or stale; says whether it did. */
export const ensureDashboardBundle = async (): Promise<boolean> => {
  if (!bundleIsStale()) return false
  await buildDashboardBundle()
  return true
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await buildDashboardBundle()
  console.log(`Built the dashboard's page into ${BUNDLE_DIR}`)
}
