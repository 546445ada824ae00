/**
 * The caller's OpenTelemetry span as W3C trace context headers on a request, so the service's span joins
 * the caller's trace. Read through @opentelemetry/api, which answers "no span" at no cost when no
 * OpenTelemetry SDK is registered; then, as outside any span, no header is added.
 */
import { headers, type MsgHdrs } from "@nats-io/transport-node"
import { context, isSpanContextValid, trace } from "@opentelemetry/api"

export const traceHeaders = (): MsgHdrs | undefined => {
  const span = trace.getSpanContext(context.active())
  if (span === undefined || !isSpanContextValid(span)) return undefined
  const h = headers()
  // Written here rather than through the global propagator: the services read W3C trace context, whichever
  // format the application propagates elsewhere.
  h.set("traceparent", `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, "0")}`)
  const state = span.traceState?.serialize()
  if (state) h.set("tracestate", state)
  return h
}
