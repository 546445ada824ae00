/**
 * The process's operations port (WM_METRICS_HOST:WM_METRICS_PORT; port 0 turns it off):
 *
 * - `/metrics`: the registry of `Metrics` in Prometheus text format;
 * - `/healthz`: 200 while the process runs;
 * - `/readyz`: 200 when no part of the process has a reason not to be ready (`Readiness`), else 503 with
 *   the reasons, one a line.
 */
import { createServer, type Server } from "node:http"
import { Context, Effect, Layer } from "effect"
import { settings } from "../../../contracts/settings.ts"
import { Metrics } from "./metrics.ts"
import { Readiness } from "./readiness.ts"

export interface OpsServerSettings {
  readonly port: number
  readonly host: string
}

export interface OpsServerShape {
  /** Where it serves, e.g. `http://127.0.0.1:9464`; undefined when turned off (port 0). */
  readonly url: string | undefined
}

const PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"

const listen = (server: Server, { port, host }: OpsServerSettings) =>
  Effect.callback<number, Error>((resume) => {
    const failed = (error: Error) =>
      resume(
        Effect.fail(
          new Error(`the metrics port cannot listen on ${host}:${port} (WM_METRICS_PORT): ${error.message}`, {
            cause: error,
          }),
        ),
      )
    server.once("error", failed)
    server.listen(port, host, () => {
      server.off("error", failed)
      const address = server.address()
      resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : port))
    })
  })

const serve = (options: OpsServerSettings) =>
  Effect.gen(function* () {
    if (options.port === 0) return { url: undefined } satisfies OpsServerShape
    const metrics = yield* Metrics
    const readiness = yield* Readiness
    const runPromise = Effect.runPromiseWith(yield* Effect.context<never>())
    const server = createServer((request, response) => {
      const path = new URL(request.url ?? "/", "http://localhost").pathname
      const reply = (status: number, body: string, type = "text/plain; charset=utf-8") =>
        response.writeHead(status, { "content-type": type }).end(body)
      if (request.method !== "GET" && request.method !== "HEAD") return reply(405, "method not allowed\n")
      if (path === "/healthz") return reply(200, "ok\n")
      if (path === "/readyz") {
        const reasons = readiness.reasons()
        return reasons.length === 0 ? reply(200, "ready\n") : reply(503, `${reasons.join("\n")}\n`)
      }
      if (path === "/metrics")
        return void runPromise(metrics.scrape).then(
          (text) => reply(200, text, PROMETHEUS_TEXT),
          (error: unknown) => reply(500, `scrape failed: ${String(error)}\n`),
        )
      return reply(404, "not found: /metrics, /healthz and /readyz are served here\n")
    })
    const port = yield* Effect.acquireRelease(listen(server, options), () =>
      Effect.promise(
        () =>
          new Promise<void>((resolve) => {
            server.close(() => resolve())
            server.closeAllConnections()
          }),
      ),
    )
    const host = options.host.includes(":") ? `[${options.host}]` : options.host
    return { url: `http://${host}:${port}` } satisfies OpsServerShape
  })

export const opsServerSettingsFromConfig = Effect.gen(function* () {
  return {
    port: yield* settings.WM_METRICS_PORT.config,
    host: yield* settings.WM_METRICS_HOST.config,
  } satisfies OpsServerSettings
})

export class OpsServer extends Context.Service<OpsServer, OpsServerShape>()("wm/OpsServer") {
  static readonly fromEnv = Layer.effect(
    OpsServer,
    Effect.flatMap(opsServerSettingsFromConfig.pipe(Effect.orDie), serve),
  )
  static readonly make = (options: OpsServerSettings) => Layer.effect(OpsServer, serve(options))
}
