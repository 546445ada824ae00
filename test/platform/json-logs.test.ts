/**
 * A service process logs JSON lines with its service, replica, level and message, at WM_LOG_LEVEL and
 * above; a log written inside a span carries the span's trace and span ids.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"
import { Effect, Logger } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort, type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { jsonLogLine } from "../../services/platform/observability/json-logs.ts"
import { eventually } from "../support/eventually.ts"
import { readyz } from "../support/ops.ts"

const REPO = join(import.meta.dirname, "..", "..")
let server: NatsServerProcess
const children: ChildProcess[] = []

beforeAll(async () => {
  server = await startNatsServer()
})
afterAll(async () => {
  for (const child of children) child.kill("SIGTERM")
  await server?.stop()
})

/** Runs the working service alone until it is ready; its standard output, line by line. */
const runWorking = async (level: string) => {
  const port = await freePort()
  const child = spawn(join(REPO, "node_modules", ".bin", "node"), ["services/working/main.ts"], {
    cwd: REPO,
    env: {
      ...process.env,
      NATS_URL: server.url,
      WM_METRICS_PORT: String(port),
      WM_LOG_LEVEL: level,
      WM_REPLICA_ID: `logs-${level}`,
      WM_LEASE_SETTLE_MS: "0",
    },
    stdio: ["ignore", "pipe", "pipe"],
  })
  children.push(child)
  let out = ""
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()))
  await eventually(
    "the working service to be ready",
    async () => ((await readyz(`http://127.0.0.1:${port}`)).status === 200 ? true : undefined),
    60_000,
  )
  child.kill("SIGTERM")
  await new Promise((resolve) => child.once("exit", resolve))
  return out.split("\n").filter((line) => line.trim() !== "")
}

describe("a service's logs", () => {
  it("are JSON lines naming the service and replica, at WM_LOG_LEVEL and above", async () => {
    const info = (await runWorking("info")).map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(info.length).toBeGreaterThan(0)
    for (const entry of info) {
      expect(entry).toMatchObject({ service: "working", replica: "logs-info" })
      expect(typeof entry.time).toBe("string")
      expect(typeof entry.message).toBe("string")
    }
    expect(info.some((e) => e.level === "info" && String(e.message).startsWith("Metrics on http://127.0.0.1:"))).toBe(
      true,
    )

    const warn = (await runWorking("warn")).map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(warn.filter((e) => e.level === "info" || e.level === "debug")).toEqual([])
  })

  it("carry the current span's trace and span ids", async () => {
    const lines: string[] = []
    const capture = Logger.map(jsonLogLine({ service: "working", replica: "r-1" }), (line) => lines.push(line))
    await Effect.runPromise(
      Effect.gen(function* () {
        yield* Effect.log("outside")
        const span = yield* Effect.withSpan(
          Effect.flatMap(Effect.currentSpan, (span) => Effect.as(Effect.logWarning("inside"), span)),
          "operation",
        )
        const [outside, inside] = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
        expect(outside).not.toHaveProperty("traceId")
        expect(inside).toMatchObject({
          level: "warn",
          service: "working",
          replica: "r-1",
          message: "inside",
          traceId: span.traceId,
          spanId: span.spanId,
        })
      }).pipe(Effect.provide(Logger.layer([capture]))),
    )
  })
})
