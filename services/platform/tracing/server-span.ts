/**
 * The span a service handles a request in: a server span named after the operation, whose parent is
 * the caller's span when the request carries a `traceparent`. The caller's sampling decision is kept;
 * a request without one starts its own trace, sampled only when this service exports its spans. No
 * stack trace is captured: every request's span starts at the same place.
 */
import type { MsgHdrs } from "@nats-io/transport-node"
import { Effect } from "effect"
import { parentOfHeaders, TracesExported } from "./trace-context.ts"

export const withServerSpan =
  (name: string, headers: MsgHdrs | undefined, attributes: Record<string, unknown>) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(TracesExported, (exported) => {
      const parent = parentOfHeaders(headers)
      return Effect.withSpan(
        self,
        name,
        parent === undefined
          ? { kind: "server", root: true, sampled: exported, attributes, captureStackTrace: false }
          : { kind: "server", parent, sampled: parent.sampled, attributes, captureStackTrace: false },
      )
    })
