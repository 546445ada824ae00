/**
 * Requests between replicas of one service, for the part of an answer another replica holds (a partition
 * it owns): `askPeer` sends one and waits for its reply; `servePeerRequests` receives them on every replica,
 * and the replica that holds the part answers while the others stay silent. Bodies are JSON; the request
 * carries the caller's trace context.
 */
import { Effect, FiberSet, type Scope } from "effect"
import { Unavailable } from "../../../contracts/errors.ts"
import { Nats } from "../nats/connection.ts"
import { RequestsFirst } from "../scheduling/requests-first.ts"
import { withServerSpan } from "../tracing/server-span.ts"
import { requestTraceHeaders } from "../tracing/trace-context.ts"

/** Sends `body` to whichever peer answers on `subject`; `Unavailable` with `unanswered` when none does in time. */
export const askPeer = (
  subject: string,
  body: unknown,
  options: { readonly timeoutMs: number; readonly unanswered: string },
) =>
  Effect.gen(function* () {
    const { nc } = yield* Nats
    const headers = yield* requestTraceHeaders
    const reply = yield* Effect.tryPromise({
      try: () =>
        nc.request(subject, JSON.stringify(body), {
          timeout: options.timeoutMs,
          ...(headers !== undefined ? { headers } : {}),
        }),
      catch: () => new Unavailable({ reason: options.unanswered }),
    })
    return reply.data
  })

/**
 * Answers the peer requests on `subjects` (a wildcard) that `handle` takes: it returns null for one this
 * replica does not answer, else the reply, or undefined from the reply's effect when the replica stopped
 * holding the part while it ran (the asker's timeout then sends it elsewhere).
 */
export const servePeerRequests = <R>(
  subjects: string,
  span: string,
  handle: (
    subject: string,
    data: Uint8Array,
  ) => {
    readonly attributes: Record<string, string | number>
    readonly reply: Effect.Effect<unknown, never, R>
  } | null,
): Effect.Effect<void, never, Nats | Scope.Scope | R> =>
  Effect.gen(function* () {
    const { nc } = yield* Nats
    const runFork = yield* FiberSet.makeRuntime<R>()
    const requestsFirst = yield* RequestsFirst
    const subscription = nc.subscribe(subjects, {
      callback: (error, msg) => {
        if (error !== null) return
        const taken = handle(msg.subject, msg.data)
        if (taken === null) return
        runFork(
          taken.reply.pipe(
            Effect.tap((reply) =>
              Effect.sync(() => {
                if (reply !== undefined) msg.respond(JSON.stringify(reply))
              }),
            ),
            requestsFirst.serve,
            withServerSpan(span, msg.headers, taken.attributes),
          ),
        )
      },
    })
    yield* Effect.addFinalizer(() => Effect.promise(() => subscription.drain().catch(() => undefined)))
  })
