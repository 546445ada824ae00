/**
 * `npm start` as a process (node cli/start.ts, what the npm script runs) reads the same configuration as every
 * service: the stream it creates has WM_DEDUPE_WINDOW_MS's window, it logs in with NATS_USER / NATS_PASS, and
 * with NATS_URL on a free local port it starts its own nats-server there, saying so and saying that it derives
 * the embedder's cache on a first start.
 */

import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { afterEach, describe, expect, it } from "vitest"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { natsAuth } from "../../infra/auth.ts"
import { freePort, type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { eventually } from "../support/eventually.ts"

const REPO = fileURLToPath(new URL("../..", import.meta.url))
const NODE = join(REPO, "node_modules", ".bin", "node")
const SERVING = /Serving on /

interface Started {
  readonly child: ChildProcess
  readonly output: () => string
  /** Resolves with the output once `pattern` appears; rejects if the process exits first. */
  readonly waitFor: (pattern: RegExp) => Promise<string>
  readonly exited: Promise<number | null>
  readonly stop: () => Promise<number | null>
}

const running: Started[] = []
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const s of running.splice(0)) await s.stop()
  for (const c of cleanups.splice(0)) await c()
})

/** This process's environment without the variables a test sets itself. */
const withoutNatsSettings = (env: NodeJS.ProcessEnv) =>
  Object.fromEntries(
    Object.entries(env).filter(([k]) => !k.startsWith("NATS_") && !k.startsWith("WM_") && k !== "QDRANT_URL"),
  )

const npmStart = (env: Record<string, string>, ...args: string[]): Started => {
  const child = spawn(NODE, ["cli/start.ts", "--no-demo", ...args], {
    cwd: REPO,
    // The offline embedder unless a test names one: these tests are about configuration, not the model. No
    // metrics port unless a test names one: another process of the run may listen on the default 9464.
    env: { ...withoutNatsSettings(process.env), WM_EMBEDDER: "offline", WM_METRICS_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let out = ""
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()))
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const started: Started = {
    child,
    exited,
    output: () => out,
    waitFor: (pattern) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (pattern.test(out)) return resolve(out)
          if (child.exitCode !== null)
            return reject(new Error(`npm start exited (${child.exitCode}) before ${pattern}:\n${out}`))
          setTimeout(check, 50)
        }
        check()
      }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      return exited
    },
  }
  running.push(started)
  return started
}

const server = async (config?: string): Promise<NatsServerProcess> => {
  const s = await startNatsServer(config === undefined ? {} : { config })
  cleanups.push(() => s.stop())
  return s
}

describe("npm start reads the configuration every service reads", () => {
  it("creates the event stream with WM_DEDUPE_WINDOW_MS's window", async () => {
    const nats = await server()
    const start = npmStart({ NATS_URL: nats.url, WM_DEDUPE_WINDOW_MS: "2000" })
    expect(await start.waitFor(SERVING)).toContain(`Using the NATS server at ${nats.url}`)
    const nc = await connect({ servers: nats.url })
    try {
      const info = await (await jetstreamManager(nc)).streams.info(EVENTS_STREAM)
      expect(info.config.duplicate_window).toBe(2_000 * 1_000_000)
    } finally {
      await nc.close()
    }
    expect(await start.stop()).toBe(0)
  })

  it("logs in with NATS_USER and NATS_PASS", async () => {
    const auth = natsAuth({ agents: ["planner"], admin: { user: "operator", password: "operator-secret" } })
    const nats = await server(auth.config)
    const start = npmStart({ NATS_URL: nats.url, NATS_USER: "operator", NATS_PASS: "operator-secret" })
    await start.waitFor(SERVING)
    // The services it runs answer under that login.
    const nc = await connect({ servers: nats.url, user: "operator", pass: "operator-secret" })
    try {
      const reply = await nc.request("wm.api.planner.agent.register", JSON.stringify({ role: "main" }), {
        timeout: 10_000,
      })
      expect(reply.json<{ ok: boolean }>().ok).toBe(true)
    } finally {
      await nc.close()
    }
    expect(await start.stop()).toBe(0)
  })

  it("serves /metrics, /healthz and /readyz on WM_METRICS_PORT for the whole system", async () => {
    const nats = await server()
    const port = await freePort()
    const start = npmStart({ NATS_URL: nats.url, WM_METRICS_PORT: String(port) })
    const out = await start.waitFor(SERVING)
    expect(out).toContain(`Metrics on http://127.0.0.1:${port}/metrics`)
    const ops = `http://127.0.0.1:${port}`
    expect((await fetch(`${ops}/healthz`)).status).toBe(200)
    // Ready once every service's partitions have caught up: on a loaded machine that follows the start.
    await eventually("the system to be ready", async () => (await fetch(`${ops}/readyz`)).status === 200, 60_000)
    const nc = await connect({ servers: nats.url })
    try {
      const reply = await nc.request("wm.api.metered.agent.register", JSON.stringify({ role: "main" }), {
        timeout: 10_000,
      })
      expect(reply.json<{ ok: boolean }>().ok).toBe(true)
    } finally {
      await nc.close()
    }
    const scrape = await (await fetch(`${ops}/metrics`)).text()
    expect(scrape).toMatch(
      /wm_request_duration_seconds_count\{[^}]*operation="registerAgent"[^}]*outcome="ok"[^}]*\} 1/,
    )
    expect(scrape).toMatch(/wm_projection_lag_events\{[^}]*service="working"[^}]*\} \d+/)
    expect(await start.stop()).toBe(0)
  })

  it("says why it cannot log in when the server refuses the credentials", async () => {
    const auth = natsAuth({ agents: ["planner"], admin: { user: "operator", password: "operator-secret" } })
    const nats = await server(auth.config)
    const start = npmStart({ NATS_URL: nats.url, NATS_USER: "operator", NATS_PASS: "wrong" })
    expect(await start.exited).toBe(1)
    expect(start.output()).toContain(`The NATS server at ${nats.url} refused the login of NATS_USER 'operator'`)
    expect(start.output()).not.toContain("not found")
  })

  it("with NATS_URL on a free local port, starts nats-server there and says it derives the embedder's cache", async () => {
    const port = await freePort()
    const dataDir = mkdtempSync(join(tmpdir(), "wm-start-"))
    const cacheDir = mkdtempSync(join(tmpdir(), "wm-start-cache-"))
    cleanups.push(
      () => rmSync(dataDir, { recursive: true, force: true }),
      () => rmSync(cacheDir, { recursive: true, force: true }),
    )
    const start = npmStart({ NATS_URL: `nats://127.0.0.1:${port}`, WM_CACHE_DIR: cacheDir }, "--data-dir", dataDir)
    const out = await start.waitFor(SERVING)
    expect(out).not.toContain("not found")
    expect(out).toContain(`Nothing answered at nats://127.0.0.1:${port}: started nats-server`)
    expect(out).toContain(`Deriving the offline embedder's word-vector cache in ${cacheDir}`)
    expect(await start.stop()).toBe(0)
    // Its server stopped with it.
    await expect(connect({ servers: `nats://127.0.0.1:${port}`, reconnect: false, timeout: 1_000 })).rejects.toThrow()
  }, 240_000)

  it("with the default sentence model not set up, refuses at once, naming the setup command and the offline embedder", async () => {
    const port = await freePort()
    const modelsDir = mkdtempSync(join(tmpdir(), "wm-start-models-"))
    cleanups.push(() => rmSync(modelsDir, { recursive: true, force: true }))
    const env = { NATS_URL: `nats://127.0.0.1:${port}`, WM_MODELS_DIR: modelsDir }
    // WM_EMBEDDER left unset (withoutNatsSettings drops every WM_ variable): the default.
    const child = spawn(NODE, ["cli/start.ts", "--no-demo"], {
      cwd: REPO,
      env: { ...withoutNatsSettings(process.env), ...env },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let out = ""
    child.stdout!.on("data", (c: Buffer) => (out += c.toString()))
    child.stderr!.on("data", (c: Buffer) => (out += c.toString()))
    expect(await new Promise((resolve) => child.once("exit", resolve))).toBe(1)
    expect(out).toContain(
      `The sentence model 'minilm-int8' (WM_EMBEDDER) is not set up in ${join(modelsDir, "minilm-int8")}`,
    )
    expect(out).toContain("run `npm run models:fetch` once")
    expect(out).toContain("WM_EMBEDDER=offline")
    // It refused before starting anything: no server on the port it was given.
    await expect(connect({ servers: `nats://127.0.0.1:${port}`, reconnect: false, timeout: 1_000 })).rejects.toThrow()
  })

  it("with NATS_URL on another machine that does not answer, says so instead of starting a server", async () => {
    const start = npmStart({ NATS_URL: "nats://192.0.2.1:4222" })
    expect(await start.exited).toBe(1)
    expect(start.output()).toContain(
      "No NATS server answers at nats://192.0.2.1:4222. npm start runs its own nats-server only for a single URL on this machine",
    )
  })
})

describe("a service run alone reads the same configuration", () => {
  it("a fade worker with a malformed WM_FADE_INTERVAL_MS stops at once, naming it", async () => {
    const nats = await server()
    const child = spawn(NODE, ["services/fade/main.ts"], {
      cwd: REPO,
      // No metrics port: on 9464 another process of the run may already listen, and that refusal would come first.
      env: {
        ...withoutNatsSettings(process.env),
        NATS_URL: nats.url,
        WM_METRICS_PORT: "0",
        WM_FADE_INTERVAL_MS: "soon",
      },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let out = ""
    child.stdout.on("data", (c: Buffer) => (out += c.toString()))
    child.stderr.on("data", (c: Buffer) => (out += c.toString()))
    const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)))
    expect(code).not.toBe(0)
    expect(out).toContain("WM_FADE_INTERVAL_MS")
  })
})
