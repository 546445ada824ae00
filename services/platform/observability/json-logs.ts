/**
 * The services' logs: one JSON object a line on standard output, with `time`, `level`, `service`,
 * `replica` and `message`, the current span's `traceId` and `spanId` when there is one, the cause of a
 * failure, and the log's other annotations. Entries below WM_LOG_LEVEL are not written.
 *
 * `service` is the one a log annotation names (each service's layer in one process says its own,
 * `serviceLogs`), else the process's.
 */
import { hostname } from "node:os"
import { inspect } from "node:util"
import { Cause, Context, Effect, Layer, Logger, type LogLevel, References, Tracer } from "effect"
import { type LogLevelName, settings } from "../../../contracts/settings.ts"

export interface LogIdentity {
  /** The process's service (gateway, working, …), unless a log's annotation names another. */
  readonly service: string
  readonly replica: string
}

const EFFECT_LEVELS: Record<LogLevelName, LogLevel.LogLevel> = {
  trace: "Trace",
  debug: "Debug",
  info: "Info",
  warn: "Warn",
  error: "Error",
}

const textOf = (part: unknown): string => (typeof part === "string" ? part : inspect(part, { breakLength: Infinity }))

/** The JSON line of one log entry. */
export const jsonLogLine = (identity: LogIdentity) =>
  Logger.make((options): string => {
    const { service, ...annotations } = options.fiber.getRef(References.CurrentLogAnnotations)
    const span = Context.getOption(options.fiber.context, Tracer.ParentSpan)
    const parts = Array.isArray(options.message) ? options.message : [options.message]
    return JSON.stringify({
      time: options.date.toISOString(),
      level: options.logLevel.toLowerCase(),
      service: typeof service === "string" ? service : identity.service,
      replica: identity.replica,
      message: parts.map(textOf).join(" "),
      ...(span._tag === "Some" ? { traceId: span.value.traceId, spanId: span.value.spanId } : {}),
      ...(options.cause.reasons.length === 0 ? {} : { cause: Cause.pretty(options.cause) }),
      ...annotations,
    })
  })

/** JSON lines on the console at `level` and above, in place of the default logger. */
export const jsonLogs = (identity: LogIdentity, level: LogLevelName) =>
  Layer.merge(
    Logger.layer([Logger.withConsoleLog(jsonLogLine(identity))]),
    Layer.succeed(References.MinimumLogLevel, EFFECT_LEVELS[level]),
  )

/** The replica's name in logs: WM_REPLICA_ID, else the host's name and the process id. */
export const replicaOfProcess = Effect.map(settings.WM_REPLICA_ID.config, (id) =>
  id._tag === "Some" ? id.value : `${hostname()}-${process.pid}`,
)

/** JSON logs as WM_LOG_LEVEL and WM_REPLICA_ID say, for the process running `service`. */
export const jsonLogsFromEnv = (service: string) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const level = yield* settings.WM_LOG_LEVEL.config
      const replica = yield* replicaOfProcess
      return jsonLogs({ service, replica }, level)
    }).pipe(Effect.orDie),
  )

/** Logs written while building `service`'s layer (and by what it starts) name that service. */
export const serviceLogs = (service: string) => Layer.succeed(References.CurrentLogAnnotations, { service })
