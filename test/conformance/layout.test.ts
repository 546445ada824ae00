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

const root = join(import.meta.dirname, "..", "..")
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

/**
 * A service module builds each service one way: `static readonly make` constructs it (an Effect, or a function
 * of its options returning one) and `layer` is made from it (`Layer.effect(Service, Service.make)`), declared
 * after it, as static initializers run in order. The check is textual: each `Context.Service` class of a file
 * that defines a `layer`, from its declaration to the closing brace at the start of a line.
 *
 * Settings held beside their service are values, not services built from others: their `make` is a Layer of
 * the defaults with the given overrides (`fromEnv`, the same read from Config), so there is nothing for a
 * `layer` to construct. They are the only exceptions, and only while they define no `layer`.
 */
const VALUE_HOLDERS: ReadonlySet<string> = new Set(["FadeWorkerSettings", "DashboardSettings", "RetrievalSettings"])

/** Each `Context.Service` class in `text`: its name and its body, up to its closing brace (or the next class). */
const serviceClasses = (text: string) => {
  const starts = [...text.matchAll(/class (\w+) extends Context\.Service\b/g)]
  return starts.map((m, i) => {
    const next = starts[i + 1]?.index ?? text.length
    const close = text.indexOf("\n}", m.index)
    return { name: m[1]!, body: text.slice(m.index, close < 0 ? next : Math.min(close, next)) }
  })
}

/** Where `static readonly <member>` is declared in a class body, and its initializer up to the next static member. */
const staticMember = (body: string, member: string) => {
  const at = body.search(new RegExp(`\\bstatic readonly ${member}\\b`))
  if (at < 0) return undefined
  const rest = body.slice(at + `static readonly ${member}`.length)
  const next = rest.search(/\bstatic readonly \w+/)
  return { at, initializer: next < 0 ? rest : rest.slice(0, next) }
}

/** The services of files defining a `layer` that are not built as `make`, then `layer` from it. */
const notBuiltFromMake = (files: ReadonlyArray<{ readonly file: string; readonly text: string }>) =>
  files
    .filter(({ text }) => /\bstatic readonly layer\b/.test(text))
    .flatMap(({ file, text }) =>
      serviceClasses(text).flatMap(({ name, body }): string[] => {
        const make = staticMember(body, "make")
        const layer = staticMember(body, "layer")
        if (layer === undefined && VALUE_HOLDERS.has(name)) return []
        if (make === undefined) return [`${file}: ${name} has no make`]
        if (layer === undefined) return [`${file}: ${name} has no layer`]
        if (!layer.initializer.includes(`${name}.make`) && !layer.initializer.includes("this.make"))
          return [`${file}: ${name}.layer is not built from ${name}.make`]
        if (make.at > layer.at) return [`${file}: ${name}.make is declared after ${name}.layer`]
        return []
      }),
    )

/** What ARCHITECTURE.md's layout says of test/: its line and the lines indented under it. */
const testsInLayout = (architecture: string): string => {
  const lines = architecture.split("\n")
  const start = lines.findIndex((line) => line.startsWith("    test/"))
  if (start < 0) return ""
  const end = lines.findIndex((line, i) => i > start && !/^ {5,}\S/.test(line))
  return lines.slice(start, end < 0 ? undefined : end).join("\n")
}

/**
 * The tests are grouped by area: a test file directly under test/, or a folder of test/ the layout does not
 * name, is out of place.
 */
const misplacedTests = (entries: ReadonlyArray<{ readonly name: string; readonly folder: boolean }>, layout: string) =>
  entries.flatMap(({ name, folder }) => {
    if (!folder) return name.endsWith(".test.ts") ? [`test/${name}: in no area's folder`] : []
    return new RegExp(`(^|[\\s(,;])${name}/`).test(layout) ? [] : [`test/${name}/: not in ARCHITECTURE.md's layout`]
  })

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

  it("builds every service's layer from its make", () => {
    const files = sourceFiles("services").map((file) => ({ file, text: readFileSync(join(root, file), "utf8") }))
    expect(notBuiltFromMake(files)).toEqual([])
  })

  it("excuses only value holders that exist and define no layer", () => {
    const classes = sourceFiles("services").flatMap((file) => serviceClasses(readFileSync(join(root, file), "utf8")))
    for (const name of VALUE_HOLDERS) {
      const held = classes.find((c) => c.name === name)
      expect(held, name).toBeDefined()
      expect(staticMember(held!.body, "layer"), name).toBeUndefined()
    }
  })

  it("names every service that is not built from its make", () => {
    const service = (name: string, members: string) =>
      `export class ${name} extends Context.Service<${name}, Shape>()("wm/${name}") {\n${members}\n}\n`
    expect(
      notBuiltFromMake([
        {
          file: "services/good/good.ts",
          text:
            service("FadeWorkerSettings", "  static readonly make = (s = {}) => Layer.succeed(FadeWorkerSettings, s)") +
            service(
              "Good",
              "  static readonly make = Effect.gen(function* () {\n    return {}\n  })\n" +
                "  static readonly layer = Layer.effect(Good, Good.make)",
            ) +
            service(
              "Optioned",
              "  static readonly make = (options: Options) => Effect.succeed({})\n" +
                "  static readonly layer = (options: Options) => Layer.effect(Optioned, Optioned.make(options))",
            ),
        },
        {
          file: "services/bad/bad.ts",
          text:
            service("Inline", "  static readonly layer = Layer.effect(Inline, Effect.gen(function* () {}))") +
            service(
              "Elsewhere",
              "  static readonly make = Effect.succeed({})\n  static readonly layer = Layer.effect(Elsewhere, build)",
            ) +
            service(
              "Late",
              "  static readonly layer = Layer.effect(Late, Late.make)\n  static readonly make = Effect.succeed({})",
            ) +
            service("BadSettings", "  static readonly make = (s = {}) => Layer.succeed(BadSettings, s)"),
        },
        { file: "services/store.ts", text: service("Store", "") },
      ]),
    ).toEqual([
      "services/bad/bad.ts: Inline has no make",
      "services/bad/bad.ts: Elsewhere.layer is not built from Elsewhere.make",
      "services/bad/bad.ts: Late.make is declared after Late.layer",
      "services/bad/bad.ts: BadSettings has no layer",
    ])
  })

  it("keeps every test in the folder of its area, each folder named in ARCHITECTURE.md's layout", () => {
    const entries = readdirSync(join(root, "test"), { withFileTypes: true }).map((d) => ({
      name: d.name,
      folder: d.isDirectory(),
    }))
    const layout = testsInLayout(readFileSync(join(root, "ARCHITECTURE.md"), "utf8"))
    expect(layout).not.toBe("")
    expect(misplacedTests(entries, layout)).toEqual([])
  })

  it("names every test out of its area's folder and every folder the layout leaves out", () => {
    const layout = testsInLayout(
      "    sdk/         the client\n    test/        tests, one folder per area: api/ (the gateway), memory/,\n" +
        "                 forget/; support/: what they share\n    docs/        the documentation of api/\n",
    )
    expect(
      misplacedTests(
        [
          { name: "api", folder: true },
          { name: "forget", folder: true },
          { name: "support", folder: true },
          { name: "fading", folder: true },
          { name: "docs", folder: true },
          { name: "stray.test.ts", folder: false },
          { name: "vitest-setup.ts", folder: false },
        ],
        layout,
      ),
    ).toEqual([
      "test/fading/: not in ARCHITECTURE.md's layout",
      "test/docs/: not in ARCHITECTURE.md's layout",
      "test/stray.test.ts: in no area's folder",
    ])
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
