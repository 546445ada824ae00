/** The operations port of services started in a test: a free port, scraped and asked for readiness. */
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import type { Layer } from "effect"
import { freePort } from "../../infra/nats-server.ts"
import { observability, processMetrics } from "../../services/platform/observability/observability.ts"
import { OpsServer } from "../../services/platform/observability/ops-server.ts"

/** Metrics, readiness and the operations port of one process, on a free port. */
export const observedOnFreePort = async (service: string) => {
  const port = await freePort()
  const layer: Layer.Layer<OpsServer, Error> = observability(
    service,
    processMetrics(),
    OpsServer.make({ port, host: "127.0.0.1" }),
  )
  return { layer, url: `http://127.0.0.1:${port}` }
}

export const scrape = async (url: string): Promise<string> => {
  const response = await fetch(`${url}/metrics`)
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`)
  return response.text()
}

export const readyz = async (url: string) => {
  const response = await fetch(`${url}/readyz`)
  return { status: response.status, body: await response.text() }
}

/** The value of one series of a scrape (`name{labels}`, labels in any order), undefined when absent. */
export const sample = (text: string, name: string, labels: Record<string, string> = {}): number | undefined => {
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null || match[1] !== name) continue
    const found = Object.fromEntries(
      [...(match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    )
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3])
  }
  return undefined
}

const CI_CACHE = process.env.WM_CI_CACHE ?? "/var/cache/working-memory-ci"

/** promtool, as `npm run tools:fetch` installs it (or WM_PROMTOOL). */
export const promtool = (): string => {
  const path = process.env.WM_PROMTOOL ?? join(CI_CACHE, "tools", "promtool-v0.316.0", "promtool")
  if (!existsSync(path))
    throw new Error(`promtool is not at ${path}: run \`npm run tools:fetch\` (or set WM_PROMTOOL to a promtool binary)`)
  return path
}

/** What `promtool check metrics` says of a scrape: empty when it passes. */
export const promtoolProblems = (text: string): string => {
  try {
    execFileSync(promtool(), ["check", "metrics"], { input: text, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"] })
    return ""
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string }
    return `${failed.stdout ?? ""}${failed.stderr ?? ""}` || failed.message
  }
}
