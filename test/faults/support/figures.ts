/**
 * The figures each fault scenario reports: printed, and written to
 * bench/results/faults/<scenario>.json with the date, the machine and the
 * versions, so RELIABILITY.md can quote them.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { cpus, totalmem, release, platform } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { natsServerVersion } from "../../../infra/nats-server.ts"

export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url))
export const FIGURES_DIR = join(REPO_ROOT, "bench", "results", "faults")

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
