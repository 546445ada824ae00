/**
 * W3C trace context (`traceparent`) carried in NATS message headers: read from a request or a stored
 * event as the parent of a span, and written from the current span onto a request to another service
 * or onto an event appended to the log.
 */
import { type MsgHdrs, headers as natsHeaders } from "@nats-io/transport-node"
import { Context, Effect, Option, type Tracer } from "effect"
import * as Headers from "effect/http/Headers"
import * as HttpTraceContext from "effect/http/HttpTraceContext"

export const TRACEPARENT = "traceparent"

/** Whether this service exports its spans; the exporter's layer sets it. */
export const TracesExported = Context.Reference<boolean>("wm/TracesExported", { defaultValue: () => false })

/** The span a `traceparent` names, when it is a valid one. */
export const parentOfTraceparent = (traceparent: string | undefined): Tracer.ExternalSpan | undefined =>
  traceparent === undefined
    ? undefined
    : Option.getOrUndefined(HttpTraceContext.w3c(Headers.fromRecordUnsafe({ traceparent })))

/** The caller's span, from a request's headers. */
export const parentOfHeaders = (headers: MsgHdrs | undefined): Tracer.ExternalSpan | undefined =>
  headers === undefined || !headers.has(TRACEPARENT) ? undefined : parentOfTraceparent(headers.get(TRACEPARENT))

export const traceparentOf = (span: Tracer.AnySpan): string =>
  `00-${span.traceId.padStart(32, "0")}-${span.spanId}-${span.sampled ? "01" : "00"}`

export const headersOf = (traceparent: string): MsgHdrs => {
  const h = natsHeaders()
  h.set(TRACEPARENT, traceparent)
  return h
}

/**
 * Headers naming the current span, for a request to another service: sampled or not, the callee follows
 * the caller's decision. Undefined outside any span.
 */
export const requestTraceHeaders: Effect.Effect<MsgHdrs | undefined> = Effect.map(
  Effect.option(Effect.currentParentSpan),
  (span) => (Option.isSome(span) ? headersOf(traceparentOf(span.value)) : undefined),
)

/** Whether the trace of `span` came in from outside: a caller's, or an event's. */
const continuesExternal = (span: Tracer.AnySpan): boolean =>
  span._tag === "ExternalSpan" || (Option.isSome(span.parent) && continuesExternal(span.parent.value))

/**
 * The `traceparent` an appended event keeps: the current span's, when it is sampled and its trace exists
 * somewhere — exported by this service, or continued from a caller who traces.
 */
export const eventTraceparent: Effect.Effect<string | undefined> = Effect.gen(function* () {
  const span = yield* Effect.option(Effect.currentParentSpan)
  if (Option.isNone(span) || !span.value.sampled) return undefined
  if (!(yield* TracesExported) && !continuesExternal(span.value)) return undefined
  return traceparentOf(span.value)
})
