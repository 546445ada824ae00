/**
 * One list of settings (contracts/settings.ts): the configuration table (docs/configuration.md) names
 * exactly the variables it declares, with the same defaults, and the code reads no variable it does not declare.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { ConfigProvider, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { settings } from "../../contracts/settings.ts"
import { DEFAULT_FADE_CONFIG } from "../../domain/fade-score.ts"
import { FadeWorkerSettings } from "../../services/fade/fade-worker.ts"
import { DEFAULT_COLLECTION_PREFIX } from "../../services/memory/longterm/qdrant-store.ts"
import { sentenceModel } from "../../services/platform/embedding/sentence-models.ts"
import { DEFAULT_CACHED_KEYS } from "../../services/platform/keys/key-store.ts"
import { PartitionSettings, partitionSettingsFromConfig } from "../../services/platform/partitions/settings.ts"

const root = join(import.meta.dirname, "..", "..")
const declared = Object.values(settings)
const plain = (cell: string) => cell.replaceAll("`", "").trim()

/** The rows of the configuration table (docs/configuration.md): variable → default. */
const documentedTable = (): Map<string, string> => {
  const rows = readFileSync(join(root, "docs", "configuration.md"), "utf8")
    .split("\n")
    .filter((line) => line.startsWith("| `"))
  return new Map(
    rows.map((row) => {
      const [variable, defaultCell] = row.split("|").slice(1, 3).map(plain)
      return [variable!, defaultCell!]
    }),
  )
}

const sourceFiles = (dir: string): string[] =>
  readdirSync(join(root, dir), { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sourceFiles(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : [],
  )

/** Every variable the product's code reads: through process.env, or a Config named by a literal. */
const variablesRead = (): Set<string> => {
  const names = new Set<string>()
  for (const file of ["contracts", "domain", "services", "cli", "infra", "sdk"].flatMap(sourceFiles)) {
    const text = readFileSync(join(root, file), "utf8")
    for (const m of text.matchAll(/process\.env\.([A-Z][A-Z0-9_]*)/g)) names.add(m[1]!)
    for (const m of text.matchAll(/Config\.[A-Za-z]+\(\s*"([A-Z][A-Z0-9_]*)"/g)) names.add(m[1]!)
  }
  return names
}

describe("the settings", () => {
  it("are the configuration table of docs/configuration.md, row for row, with the same defaults", () => {
    const table = documentedTable()
    expect([...table.keys()].sort()).toEqual(declared.map((s) => s.name).sort())
    for (const setting of declared) expect(table.get(setting.name), setting.name).toBe(plain(setting.default))
  })

  it("cover every variable the code reads", () => {
    const undeclared = [...variablesRead()].filter((name) => !(name in settings))
    expect(undeclared).toEqual([])
  })

  it("have the defaults the code falls back to", () => {
    expect(Number(settings.WM_FADE_TAU.default)).toBe(DEFAULT_FADE_CONFIG.tau)
    // The default embedder is the sentence model `npm run models:fetch` sets up.
    expect(sentenceModel(plain(settings.WM_EMBEDDER.default))?.id).toBe("minilm-int8")
    expect(plain(settings.WM_QDRANT_COLLECTION_PREFIX.default)).toBe(DEFAULT_COLLECTION_PREFIX)
    expect(Number(settings.WM_KEY_CACHE_SIZE.default)).toBe(DEFAULT_CACHED_KEYS)
  })

  it("refuse a value that does not parse, naming the variable and the reason", async () => {
    const withEnv = (env: Record<string, string>) =>
      Effect.runPromiseExit(
        Effect.scoped(
          Effect.provide(Effect.void, FadeWorkerSettings.fromEnv()).pipe(
            Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))),
          ),
        ),
      )
    const tau = await withEnv({ WM_FADE_TAU: "most" })
    expect(Exit.isFailure(tau) && String(tau.cause)).toMatch(/WM_FADE_TAU/)
    const interval = await withEnv({ WM_FADE_INTERVAL_MS: "soon" })
    expect(Exit.isFailure(interval) && String(interval.cause)).toMatch(/WM_FADE_INTERVAL_MS/)
    for (const value of ["1", "lots"]) {
      const cache = await Effect.runPromiseExit(
        settings.WM_KEY_CACHE_SIZE.config.pipe(
          Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: { WM_KEY_CACHE_SIZE: value } }))),
        ),
      )
      expect(Exit.isFailure(cache) && String(cache.cause)).toMatch(/WM_KEY_CACHE_SIZE/)
    }
  })

  it("of a partitioned replica default to the documented values, and refuse one out of range, naming it", async () => {
    const read = (env: Record<string, string>) =>
      Effect.runPromiseExit(
        partitionSettingsFromConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))),
      )
    const documented = {
      partitions: Number(settings.WM_PARTITIONS.default),
      leaseTtlMs: Number(settings.WM_LEASE_TTL_MS.default),
      leaseSettleMs: Number(settings.WM_LEASE_SETTLE_MS.default),
      snapshotIntervalMs: Number(settings.WM_SNAPSHOT_INTERVAL_MS.default),
    }
    const defaults = await read({})
    expect(Exit.isSuccess(defaults) && defaults.value).toMatchObject(documented)
    // What a test builds without the environment starts from the same values.
    const made = await Effect.runPromise(
      Effect.gen(function* () {
        return yield* PartitionSettings
      }).pipe(Effect.provide(PartitionSettings.make())),
    )
    expect(made).toMatchObject(documented)
    /** The refusal of `value` for `variable`: it must name both the variable and the reason. */
    const refusal = async (variable: string, value: string) => {
      const exit = await read({ [variable]: value })
      const text = Exit.isFailure(exit) ? String(exit.cause) : "accepted"
      expect(text).toContain(`"${variable}"`)
      return text
    }
    expect(await refusal("WM_LEASE_TTL_MS", "500")).toContain("must be at least 1000 ms")
    expect(await refusal("WM_LEASE_SETTLE_MS", "-1")).toContain("must be at least 0 ms")
    expect(await refusal("WM_SNAPSHOT_INTERVAL_MS", "often")).toMatch(/integer|number/i)
    expect(await refusal("WM_PARTITIONS", "0")).toContain("must be an integer from 1 to 1024")
  })
})
