/**
 * `npm start` (node cli/start.ts) serves the dashboard beside the services and prints its address:
 * on WM_DASHBOARD_PORT, behind the NATS credentials when it logs in with some, and when the port is
 * taken it says so and serves the API all the same.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { natsAuth } from "../../infra/auth.ts"
import { freePort, type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"

const REPO = fileURLToPath(new URL("../..", import.meta.url))
const NODE = join(REPO, "node_modules", ".bin", "node")

const cleanups: Array<() => Promise<unknown> | unknown> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const nats = async (config?: string): Promise<NatsServerProcess> => {
  const server = await startNatsServer(config === undefined ? {} : { config })
  cleanups.push(() => server.stop())
  return server
}

const npmStart = (env: Record<string, string>) => {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("NATS_") && !k.startsWith("WM_")),
  )
  const child: ChildProcess = spawn(NODE, ["cli/start.ts", "--no-demo"], {
    cwd: REPO,
    // No metrics port: another process of the run may listen on the default 9464.
    env: { ...inherited, WM_EMBEDDER: "offline", WM_METRICS_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let out = ""
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()))
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()))
  const exited = new Promise((resolve) => child.once("exit", resolve))
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill("SIGTERM")
    await exited
  })
  return {
    waitFor: (pattern: RegExp) =>
      new Promise<RegExpExecArray>((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(out)
          if (match) return resolve(match)
          if (child.exitCode !== null) return reject(new Error(`npm start exited before ${pattern}:\n${out}`))
          setTimeout(check, 50)
        }
        check()
      }),
  }
}

const DASHBOARD = /Dashboard on (http:\/\/\S+)/
/** The first npm start on a machine builds the page and derives the embedder's cache: on a loaded machine, slowly. */
const FIRST_START = 180_000

describe("npm start's dashboard", () => {
  it(
    "prints the dashboard's address and serves the page and its API there",
    async () => {
      const server = await nats()
      const port = await freePort()
      const start = npmStart({ NATS_URL: server.url, WM_DASHBOARD_PORT: String(port) })
      const [, url] = await start.waitFor(DASHBOARD)
      expect(url).toBe(`http://127.0.0.1:${port}/`)
      await start.waitFor(/Serving on /)
      const page = await fetch(url!)
      expect(page.status).toBe(200)
      expect(await page.text()).toContain('<div id="app"></div>')
      expect(await (await fetch(`${url}api/agents`)).json()).toEqual({ agents: [], lastSeq: 0 })
    },
    FIRST_START,
  )

  it(
    "asks for NATS_USER and NATS_PASS when it logs in with them",
    async () => {
      const auth = natsAuth({ agents: ["planner"], admin: { user: "operator", password: "operator-secret" } })
      const server = await nats(auth.config)
      const port = await freePort()
      const start = npmStart({
        NATS_URL: server.url,
        NATS_USER: "operator",
        NATS_PASS: "operator-secret",
        WM_DASHBOARD_PORT: String(port),
      })
      const [line, url] = await start.waitFor(/Dashboard on (http:\/\/\S+).*/)
      expect(line).toContain("(log in with NATS_USER / NATS_PASS)")
      expect((await fetch(`${url}api/agents`)).status).toBe(401)
      const basic = `Basic ${Buffer.from("operator:operator-secret").toString("base64")}`
      expect((await fetch(`${url}api/agents`, { headers: { authorization: basic } })).status).toBe(200)
    },
    FIRST_START,
  )

  it(
    "says so when its port is taken, and serves the API all the same",
    async () => {
      const server = await nats()
      const taken = createServer()
      await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
      cleanups.push(() => new Promise((resolve) => taken.close(resolve)))
      const port = (taken.address() as { port: number }).port
      const start = npmStart({ NATS_URL: server.url, WM_DASHBOARD_PORT: String(port) })
      const [line] = await start.waitFor(/Dashboard not started: .*/)
      expect(line).toContain(`127.0.0.1:${port}`)
      await start.waitFor(/Serving on /)
    },
    FIRST_START,
  )
})
