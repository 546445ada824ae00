/**
 * The layering ARCHITECTURE.md describes, checked on every import of the tree:
 * contracts at the ground, the pure domain above them, the shared platform
 * plumbing, then the runnable services, which meet one another only
 * through the stream and the API subjects, never by importing each other,
 * and reach NATS only through the platform.
 */
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, normalize, relative } from "node:path"
import { describe, expect, it } from "vitest"

const root = join(import.meta.dirname, "..")
const sourceFiles = (dir: string): string[] =>
  readdirSync(join(root, dir), { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sourceFiles(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : [],
  )
const importsOf = (file: string): string[] =>
  [...readFileSync(join(root, file), "utf8").matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)].map((m) =>
    normalize(relative(root, join(root, dirname(file), m[1]!))),
  )

/** The part of the tree a file belongs to: `contracts`, `domain`, `platform`, or `service:<name>`. */
const layerOf = (file: string): string => {
  const [top, second] = file.split("/")
  if (top === "services")
    return second === "platform" ? "platform" : second?.endsWith(".ts") ? "composition" : `service:${second}`
  return top!
}

const allowed: Record<string, (target: string) => boolean> = {
  contracts: (t) => t === "contracts",
  domain: (t) => t === "contracts" || t === "domain",
  platform: (t) => t === "contracts" || t === "domain" || t === "platform",
}

type SourceFile = { readonly file: string; readonly imports: ReadonlyArray<string> }

const isAllowed = (file: string, target: string): boolean => {
  const from = layerOf(file)
  const to = layerOf(target)
  const rule = allowed[from]
  if (rule !== undefined) return rule(to)
  // A service's entry point starts it from the composition of all services' layers.
  if (from.startsWith("service:"))
    return allowed.platform!(to) || to === from || (file.endsWith("/main.ts") && to === "composition")
  return true
}

const violations = (files: ReadonlyArray<SourceFile>) =>
  files.flatMap(({ file, imports }) => imports.filter((t) => !isAllowed(file, t)).map((t) => `${file} → ${t}`))

const tree = (dirs: string[]): SourceFile[] =>
  dirs.flatMap(sourceFiles).map((file) => ({ file, imports: importsOf(file) }))

/** The packages a file imports, by name: `@nats-io/jetstream`, `effect`, `node:fs`. */
const packagesOf = (file: string): string[] =>
  [...readFileSync(join(root, file), "utf8").matchAll(/(?:from|import)\s*\(?\s*"([^."][^"]*)"/g)].map((m) => m[1]!)

/** Ids, not a connection: any service may make them. */
const NATS_IDS = "@nats-io/nuid"

/** A service's imports of the NATS client: it reaches NATS through `services/platform/` only. */
const natsImports = (files: ReadonlyArray<SourceFile>) =>
  files.flatMap(({ file, imports }) =>
    layerOf(file).startsWith("service:")
      ? imports.filter((p) => p.startsWith("@nats-io/") && p !== NATS_IDS).map((p) => `${file} → ${p}`)
      : [],
  )

/**
 * Services and the domain take the time from Effect's Clock (`Clock.currentTimeMillis`, or the Clock taken
 * when a service is built), so they run under a TestClock: the files that use `Date.now`, called or passed
 * on, which reads the wall clock behind it. Timing real work (performance.now()) is not reading the time.
 */
const wallClockReads = (files: ReadonlyArray<{ readonly file: string; readonly text: string }>) =>
  files.filter(({ text }) => /\bDate\.now\b/.test(text)).map(({ file }) => file)

describe("the layout", () => {
  it("keeps contracts, domain and platform below the services", () => {
    expect(violations(tree(["contracts", "domain", "services/platform"]))).toEqual([])
  })

  it("lets a service import only contracts, domain, platform and its own modules", () => {
    expect(violations(tree(["services"]))).toEqual([])
  })

  it("lets a service reach NATS only through the platform", () => {
    const services = sourceFiles("services").map((file) => ({ file, imports: packagesOf(file) }))
    expect(natsImports(services)).toEqual([])
  })

  it("names every service module that imports the NATS client", () => {
    expect(
      natsImports([
        { file: "services/dashboard/dashboard.ts", imports: ["@nats-io/jetstream", "effect"] },
        { file: "services/gateway/gateway.ts", imports: ["@nats-io/nuid"] },
        { file: "services/platform/log/event-log.ts", imports: ["@nats-io/jetstream"] },
        { file: "services/system.ts", imports: ["effect"] },
      ]),
    ).toEqual(["services/dashboard/dashboard.ts → @nats-io/jetstream"])
  })

  it("lets services and the domain read the time only from Effect's Clock, never from Date.now()", () => {
    const files = [...sourceFiles("services"), ...sourceFiles("domain")].map((file) => ({
      file,
      text: readFileSync(join(root, file), "utf8"),
    }))
    expect(wallClockReads(files)).toEqual([])
  })

  it("names every file that reads the wall clock", () => {
    expect(
      wallClockReads([
        { file: "services/gateway/gateway.ts", text: "const at = Date.now()" },
        { file: "services/working/working.ts", text: "const at = yield* Clock.currentTimeMillis" },
        { file: "domain/fade-plan.ts", text: "const now = Date.now" },
      ]),
    ).toEqual(["services/gateway/gateway.ts", "domain/fade-plan.ts"])
  })

  it("names every arrow that breaks the rule", () => {
    expect(
      violations([
        {
          file: "services/gateway/gateway.ts",
          imports: ["services/working/working.ts", "services/platform/log/event-log.ts"],
        },
        { file: "domain/context.ts", imports: ["services/platform/nats/connection.ts", "contracts/api.ts"] },
        { file: "services/platform/log/projection.ts", imports: ["services/substrate/substrate.ts"] },
        { file: "services/fade/fade-worker.ts", imports: ["services/system.ts"] },
      ]),
    ).toEqual([
      "services/gateway/gateway.ts → services/working/working.ts",
      "domain/context.ts → services/platform/nats/connection.ts",
      "services/platform/log/projection.ts → services/substrate/substrate.ts",
      "services/fade/fade-worker.ts → services/system.ts",
    ])
  })
})
