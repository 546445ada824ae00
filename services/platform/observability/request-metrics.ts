/**
 * `wm_request_duration_seconds` around a handled API request: from receiving it to its answer, labelled
 * with the operation and its outcome (`ok`, the error's tag, or `defect` for an unexpected failure, which
 * also counts in `wm_errors_total`).
 */
import { Cause, Effect, Exit } from "effect"
import { type MetricsShape, serviceLabel } from "./metrics.ts"

const outcomeOf = (exit: Exit.Exit<unknown, unknown>): string => {
  if (Exit.isSuccess(exit)) return "ok"
  const failure = exit.cause.reasons.find(Cause.isFailReason)
  if (failure !== undefined) {
    const error = failure.error
    return typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
      ? error._tag
      : "error"
  }
  return Cause.hasInterruptsOnly(exit.cause) ? "interrupted" : "defect"
}

export const measureRequest = (metrics: MetricsShape, servedBy: string, operation: string) => {
  const service = serviceLabel(servedBy)
  return <A, E, R>(request: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const started = performance.now()
      return Effect.onExit(request, (exit) =>
        Effect.sync(() => {
          const outcome = outcomeOf(exit)
          metrics.requestDuration.observe({ service, operation, outcome }, (performance.now() - started) / 1000)
          if (outcome === "defect") metrics.errors.inc({ service, kind: "defect" })
        }),
      )
    })
}
