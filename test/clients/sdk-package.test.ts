/**
 * The SDK as a user installs it: the package built (packages/client) and packed by `npm pack`, `npm install` of the
 * tarball into a fresh project outside the repository, and the README's SDK example run there as plain
 * JavaScript — on the machine's Node (20 here) and on the repository's Node 22 — against a running
 * system found through NATS_URL. A TypeScript project type-checks the same example against the
 * package's declarations.
 */
import { execFile, execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const REPO = fileURLToPath(new URL("../..", import.meta.url))
const TSC = join(REPO, "node_modules", ".bin", "tsc")

/** PATH as outside npm scripts: without the repository's node_modules/.bin (whose `node` is Node 22). */
const userPath = (process.env.PATH ?? "")
  .split(delimiter)
  .filter((dir) => !dir.includes("node_modules"))
  .join(delimiter)
const userEnv = { ...process.env, PATH: userPath }

const readmeExample = (): string => {
  const readme = readFileSync(join(REPO, "README.md"), "utf8")
  const section = readme.slice(readme.indexOf("## TypeScript SDK\n"))
  const block = /```js\n([\s\S]*?)```/.exec(section)
  if (block?.[1] === undefined) throw new Error("README: no ```js block in the TypeScript SDK section")
  return block[1]
}

/** The example registers "planner"; each run gets its own agent so both runs register afresh. */
const exampleFor = (agentId: string): string => {
  const example = readmeExample()
  expect(example).toContain(`wm.agent("planner")`)
  return example.replace(`wm.agent("planner")`, `wm.agent(${JSON.stringify(agentId)})`)
}

const run = (command: string, args: ReadonlyArray<string>, cwd: string): string =>
  execFileSync(command, args, { cwd, env: userEnv, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

describe("the SDK package", () => {
  let project: string
  let system: TestSystem

  beforeAll(async () => {
    project = mkdtempSync(join(tmpdir(), "wm-sdk-package-"))
    run("npm", ["run", "build", "-w", "packages/client"], REPO)
    // Built just above: the pack skips its prepack build.
    run("npm", ["pack", "-w", "packages/client", "--pack-destination", project, "--ignore-scripts", "--silent"], REPO)
    const tarball = readdirSync(project).find((name) => name.endsWith(".tgz"))
    if (tarball === undefined) throw new Error(`npm pack wrote no tarball into ${project}`)
    run("npm", ["init", "-y"], project)
    run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", join(project, tarball)], project)
    system = await startTestSystem()
  }, 240_000)

  afterAll(async () => {
    await system?.stop()
    if (project !== undefined) rmSync(project, { recursive: true, force: true })
  })

  it("ships compiled JavaScript and declarations only", () => {
    const installed = join(project, "node_modules", "@working-memory", "client")
    const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"))
    // The source condition is the repository's own (tsconfig, vitest, the example scripts): it names a file the
    // package does not ship, and no installation sets it.
    expect(manifest.exports["."]).toEqual({
      "working-memory-source": "./source.ts",
      types: "./dist/sdk/index.d.ts",
      import: "./dist/sdk/index.js",
    })
    const files = readdirSync(installed, { recursive: true, encoding: "utf8" })
    expect(files).toContain(join("dist", "sdk", "index.js"))
    expect(files).toContain(join("dist", "sdk", "index.d.ts"))
    expect(files.filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))).toEqual([])
  })

  const nodes = [
    { name: "the machine's node", command: "node", agentId: "planner-machine-node" },
    { name: "the repository's node 22", command: process.execPath, agentId: "planner-node-22" },
  ]

  for (const node of nodes) {
    // Asynchronously: the system's services run in this process and must go on answering.
    it(`runs the README example on ${node.name}, connecting through NATS_URL`, async () => {
      const script = join(project, `${node.agentId}.mjs`)
      writeFileSync(script, exampleFor(node.agentId))
      const version = run(node.command, ["--version"], project).trim()
      const result = await promisify(execFile)(node.command, [script], {
        cwd: project,
        env: { ...userEnv, NATS_URL: system.server.url },
        encoding: "utf8",
        timeout: 60_000,
      }).catch((error: Error) => {
        throw new Error(`${version}: ${error.message}`)
      })
      expect(result.stdout).toContain("Ship the report by Friday.")
    }, 90_000)
  }

  it("type-checks the README example in a TypeScript project against the package's declarations", () => {
    writeFileSync(join(project, "example.mts"), exampleFor("planner-typed"))
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "nodenext",
          target: "es2022",
          strict: true,
          noEmit: true,
          typeRoots: [join(REPO, "node_modules", "@types")],
          types: ["node"],
        },
        files: ["example.mts"],
      }),
    )
    const result = spawnSync(TSC, ["-p", "."], { cwd: project, env: userEnv, encoding: "utf8" })
    expect(result.status, result.stdout + result.stderr).toBe(0)
  }, 60_000)
})
