/**
 * Serves one API operation for every agent: subscribes to
 * `wm.api.*.<operation>` in a queue group (so instances share the load),
 * validates the agent id and the JSON body against the operation's request
 * schema, runs the handler in its own fiber, and replies with
 * `{ ok: true, value }` or `{ ok: false, error }`.
 *
 * Validation rejects unknown fields too: a misspelt optional field would
 * otherwise be silently ignored.
 */

import type { Msg } from "@nats-io/transport-node"
import { Effect, Exit, FiberSet, Schema, SchemaIssue, type Scope } from "effect"
import { type OperationName, operations, type RequestOf, type ResponseOf } from "../../../contracts/api.ts"
import { type ApiError, type FieldIssue, InvalidState, ValidationError } from "../../../contracts/errors.ts"
import { isSubjectToken } from "../../../contracts/ids.ts"
import { agentIdOfApiSubject, apiWildcard, UNKNOWN_OPERATIONS_QUEUE } from "../../../contracts/subjects.ts"
import { Nats } from "../nats/connection.ts"
import { withServerSpan } from "../tracing/server-span.ts"

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()
const textDecoder = new TextDecoder()

export const fieldIssues = (issue: SchemaIssue.Issue): FieldIssue[] =>
  formatIssue(issue).issues.map((i) => ({
    // An empty key is named as such: a blank field name would name nothing.
    field: i.path && i.path.length > 0 ? i.path.map((p) => (String(p) === "" ? '""' : String(p))).join(".") : "(body)",
    reason: i.message,
  }))

export const validationErrorOf = (issues: ReadonlyArray<FieldIssue>): ValidationError => {
  const first = issues[0] ?? { field: "(body)", reason: "invalid request" }
  return new ValidationError({ field: first.field, reason: first.reason, issues })
}

/** Parses and validates a request body; every problem is named by its field. */
export const decodeRequest = <O extends OperationName>(
  name: O,
  body: Uint8Array,
): Effect.Effect<RequestOf<O>, ValidationError> => {
  let json: unknown = {}
  const text = textDecoder.decode(body).trim()
  if (text.length > 0) {
    try {
      json = JSON.parse(text)
    } catch (error) {
      return Effect.fail(
        ValidationError.one("(body)", `not valid JSON: ${error instanceof Error ? error.message : String(error)}`),
      )
    }
  }
  const decoded = decodeRequestValue(name, json)
  return decoded.ok ? Effect.succeed(decoded.value) : Effect.fail(validationErrorOf(decoded.issues))
}

/** Validates a request already parsed from JSON (an item of a batch): the request, or every problem by its field. */
export const decodeRequestValue = <O extends OperationName>(
  name: O,
  json: unknown,
): { readonly ok: true; readonly value: RequestOf<O> } | { readonly ok: false; readonly issues: FieldIssue[] } => {
  const schema = operations[name].request as unknown as Schema.Codec<RequestOf<O>, unknown>
  const exit = Schema.decodeUnknownExit(schema)(json, { errors: "all", onExcessProperty: "error" })
  if (Exit.isSuccess(exit)) return { ok: true, value: exit.value }
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
  const issues =
    failure?._tag === "Fail" && Schema.isSchemaError(failure.error)
      ? fieldIssues(failure.error.issue)
      : [{ field: "(body)", reason: "invalid request" }]
  return { ok: false, issues }
}

export type Reply<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: ApiError }

export const encodeError = (error: ApiError): Record<string, unknown> => ({ ...error, message: error.message })

const textEncoder = new TextEncoder()

/** The encoded reply; one too large for the connection's max payload becomes an error saying so (else no reply would leave). */
const replyBytes = (reply: unknown, maxPayload: number | undefined): Uint8Array => {
  const bytes = textEncoder.encode(JSON.stringify(reply))
  if (maxPayload === undefined || bytes.length <= maxPayload) return bytes
  const error = new InvalidState({
    field: "(reply)",
    reason: `the reply would be ${bytes.length} bytes, above the server's max_payload of ${maxPayload} bytes`,
  })
  return textEncoder.encode(JSON.stringify({ ok: false, error: encodeError(error) }))
}

export type Handler<O extends OperationName, R> = (
  agentId: string,
  request: RequestOf<O>,
) => Effect.Effect<ResponseOf<O>, ApiError, R>

/**
 * A replica that answers only for the agents whose partition it owns: it receives every request of the
 * operation in a queue group of its own (`wm-<service>.<replica>`) and leaves the others' unanswered; a
 * request that meets no owner (a partition moving) times out and the client retries it with the same id.
 */
export interface PartitionOwner {
  readonly queue: string
  readonly owns: (agentId: string) => boolean
}

export const serveOperation = <O extends OperationName, R>(
  name: O,
  handler: Handler<O, R>,
  owner?: PartitionOwner,
): Effect.Effect<void, never, Nats | Scope.Scope | R> =>
  Effect.gen(function* () {
    const { nc } = yield* Nats
    const runFork = yield* FiberSet.makeRuntime<R>()
    const operation = operations[name]

    const handle = (msg: Msg) => {
      const agentId = agentIdOfApiSubject(msg.subject)
      if (owner !== undefined && !owner.owns(agentId)) return Effect.void
      const work = isSubjectToken(agentId)
        ? Effect.flatMap(decodeRequest(name, msg.data), (request) => handler(agentId, request))
        : Effect.fail(ValidationError.one("agentId", "must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'"))
      return work.pipe(
        withServerSpan(`wm.${operation.subject}`, msg.headers, {
          "wm.operation": name,
          "wm.agent_id": agentId,
          "wm.service": operation.servedBy,
        }),
        Effect.matchCauseEffect({
          onSuccess: (value) => Effect.succeed({ ok: true, value } as const),
          onFailure: (cause) => {
            const failure = cause.reasons.find((r) => r._tag === "Fail")
            if (failure?._tag === "Fail")
              return Effect.succeed({ ok: false, error: encodeError(failure.error) } as const)
            return Effect.as(Effect.logError(`[${operation.subject}] request failed unexpectedly`, cause), {
              ok: false,
              error: { _tag: "Unavailable", reason: "internal error", message: "unavailable: internal error" },
            } as const)
          },
        }),
        Effect.tap((reply) =>
          Effect.sync(() => {
            // The partition moved while the request ran: the new owner answers the retry, from its caught-up view.
            if (owner !== undefined && !owner.owns(agentId)) return
            msg.respond(replyBytes(reply, nc.info?.max_payload))
          }),
        ),
      )
    }

    const subscription = nc.subscribe(apiWildcard(operation.subject), {
      queue: owner?.queue ?? `wm-${operation.servedBy}`,
      callback: (error, msg) => {
        if (error === null) runFork(handle(msg))
      },
    })
    yield* Effect.addFinalizer(() => Effect.promise(() => subscription.drain().catch(() => undefined)))
  })

/**
 * Answers a request for an operation the API does not have (`wm.api.<agent>.no.such.op`) with a
 * ValidationError on `operation`, instead of leaving the caller with "no responders". Requests for
 * known operations are left to the services that serve them.
 */
export const serveUnknownOperations: Effect.Effect<void, never, Nats | Scope.Scope> = Effect.gen(function* () {
  const { nc } = yield* Nats
  const known = new Set<string>(Object.values(operations).map((op) => op.subject))
  const knownList = [...known].sort().join(", ")
  const subscription = nc.subscribe(apiWildcard(">"), {
    queue: UNKNOWN_OPERATIONS_QUEUE,
    callback: (error, msg) => {
      if (error !== null || msg.reply === undefined || msg.reply === "") return
      const operation = msg.subject.split(".").slice(3).join(".")
      if (known.has(operation)) return
      const refusal = ValidationError.one("operation", `unknown operation '${operation}'; the API has: ${knownList}`)
      msg.respond(replyBytes({ ok: false, error: encodeError(refusal) }, nc.info?.max_payload))
    },
  })
  yield* Effect.addFinalizer(() => Effect.promise(() => subscription.drain().catch(() => undefined)))
})
