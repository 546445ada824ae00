/**
 * Span export: with OTEL_EXPORTER_OTLP_ENDPOINT set, a service's spans go to `<endpoint>/v1/traces` through
 * Effect's own OTLP tracer (effect/observability), batched and flushed when the service stops, and requests
 * without a trace context start sampled traces. Unset, no exporter is built: Effect's spans stay the
 * in-process ones it makes anyway, and an untraced request's are unsampled.
 *
 * Effect's `OtlpTracer.layerFromConfig` is not used: it also wants OTEL_TRACES_EXPORTER=otlp, where the
 * OpenTelemetry default is that the endpoint alone turns export on.
 */
import { Effect, Layer, Option } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as OtlpSerialization from "effect/observability/OtlpSerialization"
import * as OtlpTracer from "effect/observability/OtlpTracer"
import { invalidSetting, settings } from "../../../contracts/settings.ts"
import { TracesExported } from "./trace-context.ts"

const tracesUrl = (endpoint: string): Effect.Effect<string, ReturnType<typeof invalidSetting>> => {
  try {
    const url = new URL(endpoint)
    url.pathname = `${url.pathname.replace(/\/$/, "")}/v1/traces`
    return Effect.succeed(url.toString())
  } catch {
    return Effect.fail(invalidSetting("OTEL_EXPORTER_OTLP_ENDPOINT", `not a URL: '${endpoint}'`))
  }
}

/** The tracer of one service; `serviceName` is its `service.name` unless OTEL_SERVICE_NAME says otherwise. */
export const tracingLayer = (serviceName: string) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const endpoint = yield* settings.OTEL_EXPORTER_OTLP_ENDPOINT.config
      if (Option.isNone(endpoint)) return Layer.empty
      const url = yield* tracesUrl(endpoint.value)
      const protocol = yield* settings.OTEL_EXPORTER_OTLP_PROTOCOL.config
      const name = Option.getOrElse(yield* settings.OTEL_SERVICE_NAME.config, () => serviceName)
      const tracer = OtlpTracer.layer({ url, resource: { serviceName: name } }).pipe(
        Layer.provide(protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
        Layer.provide(FetchHttpClient.layer),
      )
      return Layer.merge(tracer, Layer.succeed(TracesExported, true))
    }).pipe(Effect.orDie),
  )
