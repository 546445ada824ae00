/**
 * The figures each fault scenario reports: printed, and written with the
 * date, the machine and the versions to <WM_FAULT_FIGURES_DIR>/<scenario>.json
 * (default: a directory under the system's temporary directory, so a test run
 * leaves the work tree as it was). `npm run test:faults:record` writes them to
 * bench/results/faults, the figures RELIABILITY.md quotes.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { cpus, platform, release, tmpdir, totalmem } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { natsServerVersion } from "../../../infra/nats-server.ts"

export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url))
export const RECORDED_FIGURES_DIR = join(REPO_ROOT, "bench", "results", "faults")
export const FIGURES_DIR = process.env.WM_FAULT_FIGURES_DIR ?? join(tmpdir(), "working-memory-fault-figures")

export const machine = () => ({
  cpu: cpus()[0]?.model ?? "unknown",
  cores: cpus().length,
  memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
  os: `${platform()} ${release()}`,
  node: process.version,
  natsServer: natsServerVersion() ?? "unknown",
})

export const recordFigures = (scenario: string, figures: Record<string, unknown>): void => {
  const document = {
    scenario,
    command: "npm run test:faults",
    date: new Date().toISOString(),
    machine: machine(),
    figures,
  }
  mkdirSync(FIGURES_DIR, { recursive: true })
  writeFileSync(join(FIGURES_DIR, `${scenario}.json`), `${JSON.stringify(document, null, 2)}\n`)
  process.stdout.write(`\n[faults] ${scenario}\n${JSON.stringify(figures, null, 2)}\n`)
}

export const round = (x: number, digits = 1): number => Math.round(x * 10 ** digits) / 10 ** digits
