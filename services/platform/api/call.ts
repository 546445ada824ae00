/**
 * Calls one API operation for an agent, as a service or the operator CLI
 * does: the request is encoded with the operation's request schema, the
 * reply `{ ok, value | error }` decoded with its response schema, and a
 * refusal decoded into the typed API error it names. A reply that is not
 * the operation's is Unavailable; no reply at all (nobody serves the
 * operation, or not in time) is NoAnswer.
 */
import type { NatsConnection } from "@nats-io/transport-node"
import { Duration, Effect, Schema } from "effect"
import { type OperationName, operations, type RequestOf, type ResponseOf } from "../../../contracts/api.ts"
import { ApiError, Unavailable } from "../../../contracts/errors.ts"
import { apiSubject } from "../../../contracts/subjects.ts"
import { requestTraceHeaders } from "../tracing/trace-context.ts"

/** How long one call waits for its reply by default. */
export const CALL_TIMEOUT: Duration.Input = "5 seconds"

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder()

const Envelope = Schema.Union([
  Schema.Struct({ ok: Schema.Literal(true), value: Schema.Unknown }),
  Schema.Struct({ ok: Schema.Literal(false), error: Schema.Unknown }),
])
const decodeEnvelope = Schema.decodeUnknownEffect(Schema.fromJsonString(Envelope))
const decodeApiError = Schema.decodeUnknownEffect(ApiError)

const codecOf = <A>(schema: Schema.Top) => schema as unknown as Schema.Codec<A, unknown>

/** Nobody answered the request: no service serves the operation, or none in time. */
export class NoAnswer extends Schema.TaggedError<NoAnswer>()("NoAnswer", {
  subject: Schema.String,
  reason: Schema.String,
}) {
  override get message(): string {
    return `no answer on ${this.subject}: ${this.reason}`
  }
}

export const callOperation = <O extends OperationName>(
  nc: NatsConnection,
  agentId: string,
  operation: O,
  request: RequestOf<O>,
  options: { readonly timeout?: Duration.Input } = {},
): Effect.Effect<ResponseOf<O>, ApiError | NoAnswer> => {
  const { subject: suffix, request: requestSchema, response: responseSchema } = operations[operation]
  const subject = apiSubject(agentId, suffix)
  const unavailable = (what: string) => (cause: unknown) =>
    new Unavailable({ reason: `${what} on ${subject}: ${cause instanceof Error ? cause.message : String(cause)}` })
  return Effect.gen(function* () {
    const encoded = yield* Schema.encodeEffect(codecOf<RequestOf<O>>(requestSchema))(request).pipe(
      Effect.mapError(unavailable("request not encodable")),
    )
    const timeout = Duration.toMillis(options.timeout ?? CALL_TIMEOUT)
    // The callee's server span continues this one's trace.
    const headers = yield* requestTraceHeaders
    const reply = yield* Effect.tryPromise({
      try: () =>
        nc.request(subject, textEncoder.encode(JSON.stringify(encoded)), {
          timeout,
          ...(headers !== undefined ? { headers } : {}),
        }),
      catch: (cause) => new NoAnswer({ subject, reason: cause instanceof Error ? cause.message : String(cause) }),
    })
    const envelope = yield* decodeEnvelope(textDecoder.decode(reply.data)).pipe(
      Effect.mapError(unavailable("not an API reply")),
    )
    if (!envelope.ok) {
      const refusal = yield* decodeApiError(envelope.error).pipe(Effect.mapError(unavailable("an unknown refusal")))
      return yield* Effect.fail(refusal)
    }
    return yield* Schema.decodeUnknownEffect(codecOf<ResponseOf<O>>(responseSchema))(envelope.value).pipe(
      Effect.mapError(unavailable("a reply that is not the operation's response")),
    )
  })
}
