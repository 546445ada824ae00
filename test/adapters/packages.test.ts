/**
 * The adapters as packages: each is built on @working-memory/client alone — its only dependency, so it opens no
 * NATS connection of its own — imports nothing from outside its package but the client, its framework and Node's
 * built-ins (a relative import out of it would compile a copy of the SDK into its build), pins what it names,
 * and builds against the client's declarations, not the repository's sources.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

const root = join(import.meta.dirname, "..", "..")
const adapters = {
  "ai-sdk": { name: "@working-memory/ai-sdk", framework: ["@ai-sdk/provider"] },
  "openai-agents": { name: "@working-memory/openai-agents", framework: ["@openai/agents"] },
  langgraph: { name: "@working-memory/langgraph", framework: ["@langchain/langgraph"] },
} as const

const json = (path: string) => JSON.parse(readFileSync(join(root, path), "utf8"))
const importsOf = (source: string) =>
  [
    ...source.matchAll(
      /(?:^|\n)\s*(?:import|export)(?:[^"';]*?from)?\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']|\brequire\(\s*["']([^"']+)["']/g,
    ),
  ].map((m) => (m[1] ?? m[2] ?? m[3])!)

describe.each(Object.entries(adapters))("packages/%s", (dir, { name, framework }) => {
  const manifest = json(`packages/${dir}/package.json`)

  it("depends on @working-memory/client alone, takes its framework as a pinned peer, and ships its build only", () => {
    expect(manifest.name).toBe(name)
    expect(manifest.dependencies).toEqual({ "@working-memory/client": json("packages/client/package.json").version })
    expect(Object.keys(manifest.peerDependencies)).toEqual([...framework])
    for (const version of Object.values(manifest.peerDependencies)) expect(version).toMatch(/^\d+\.\d+\.\d+$/)
    // The root pins the same versions, so the tests run the framework the package names.
    const pinned = json("package.json").devDependencies
    for (const [peer, version] of Object.entries(manifest.peerDependencies)) expect(pinned[peer]).toBe(version)
    expect(manifest.files).toEqual(["dist"])
    expect(manifest.exports["."]).toEqual({
      "working-memory-source": "./src/index.ts",
      types: "./dist/index.d.ts",
      import: "./dist/index.js",
    })
  })

  it("imports only the client, its framework and Node's built-ins", () => {
    const sources = readdirSync(join(root, "packages", dir, "src")).filter((f) => f.endsWith(".ts"))
    const imports = sources.flatMap((f) => importsOf(readFileSync(join(root, "packages", dir, "src", f), "utf8")))
    expect(imports).toContain("@working-memory/client")
    const allowed = (spec: string) =>
      spec.startsWith("node:") ||
      spec === "@working-memory/client" ||
      framework.some((f) => spec === f || spec.startsWith(`${f}/`)) ||
      (spec.startsWith("./") && !spec.includes(".."))
    expect(imports.filter((spec) => !allowed(spec))).toEqual([])
  })

  it("builds against the client's declarations, not the repository's sources", () => {
    const build = json(`packages/${dir}/tsconfig.build.json`)
    expect(build.compilerOptions.customConditions).toEqual([])
    expect(build.compilerOptions.rootDir).toBe("src")
    expect(build.files).toEqual(["src/index.ts"])
  })
})

it("reads every import and re-export of a source, over several lines too", () => {
  const source =
    'import {\n  a,\n  type B,\n} from "../../sdk/client.ts"\nexport * from "@nats-io/transport-node"\n' +
    'import "../../sdk/own-events.ts"\nconst later = await import("../../contracts/api.ts")\nrequire("node:fs")\n'
  expect(importsOf(source)).toEqual([
    "../../sdk/client.ts",
    "@nats-io/transport-node",
    "../../sdk/own-events.ts",
    "../../contracts/api.ts",
    "node:fs",
  ])
})
