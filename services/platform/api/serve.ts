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

import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node"
import { Clock, Effect, Exit, FiberSet, Schema, SchemaIssue, type Scope } from "effect"
import { type OperationName, operations, type RequestOf, type ResponseOf } from "../../../contracts/api.ts"
import {
  type ApiError,
  type FieldIssue,
  InvalidState,
  Unavailable,
  ValidationError,
} from "../../../contracts/errors.ts"
import { isSubjectToken } from "../../../contracts/ids.ts"
import type { Placement } from "../../../contracts/partition-pins.ts"
import {
  forwardedSubject,
  parseRouteSubject,
  partitionOfSlot,
  placedPartition,
  routeSubscriptions,
} from "../../../contracts/routing.ts"
import { agentIdOfApiSubject, apiWildcard, UNKNOWN_OPERATIONS_QUEUE } from "../../../contracts/subjects.ts"
import { Nats } from "../nats/connection.ts"
import { Metrics } from "../observability/metrics.ts"
import { measureRequest } from "../observability/request-metrics.ts"
import { RequestsFirst } from "../scheduling/requests-first.ts"
import { withServerSpan } from "../tracing/server-span.ts"
import { type AdmissionShape, unlimitedAdmission } from "./admission.ts"

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
 * A replica that answers only for the agents whose partition it owns. With the server routing requests
 * (contracts/routing.ts) it subscribes to the routes of the partitions it has taken, and to nothing else;
 * without, it receives every request of the operation in a queue group of its own (`wm-<service>.<replica>`)
 * and leaves those of partitions it has not taken to their replica. A request of a partition it has taken
 * but does not answer for at this moment (still catching up, or its lease renewing after a lapse) is held
 * until it does, for OWNER_WAIT_MS at most, then refused with `Unavailable`, which the SDKs retry with the
 * same request id. A request no replica has taken (a partition moving) finds no responder and is retried.
 */
export interface PartitionOwner {
  readonly queue: string
  readonly owns: (agentId: string) => boolean
  /** This replica has taken the agent's partition: it answers for it, or will once caught up or renewed. */
  readonly takes: (agentId: string) => boolean
  readonly placement: Placement
  /** The partitions it has taken; it answers for those it has caught up on while it holds their lease. */
  readonly taken: () => ReadonlyArray<number>
  /** Calls `listener` whenever that set may have changed; returns what stops it. */
  readonly watchTaken: (listener: () => void) => () => void
}

/**
 * How long a request waits for its partition to answer at the replica that has taken it: under the SDKs'
 * 5-second wait for a reply, so the caller hears the refusal instead of timing out.
 */
export const OWNER_WAIT_MS = 4_000
const OWNER_POLL_MS = 20

/** Waits until the replica answers for the agent's partition; `Unavailable` once OWNER_WAIT_MS have passed. */
const ownerAnswering = Effect.fn("serve.ownerAnswering")(function* (owner: PartitionOwner, agentId: string) {
  if (owner.owns(agentId)) return
  const deadline = (yield* Clock.currentTimeMillis) + OWNER_WAIT_MS
  while (!owner.owns(agentId)) {
    if (!owner.takes(agentId) || (yield* Clock.currentTimeMillis) >= deadline)
      return yield* new Unavailable({
        reason: `agent '${agentId}': its partition is ${owner.takes(agentId) ? "still catching up or renewing its lease" : "moving to another replica"} here; retry the same request`,
      })
    yield* Effect.sleep(OWNER_POLL_MS)
  }
})

export const serveOperation = <O extends OperationName, R>(
  name: O,
  handler: Handler<O, R>,
  owner?: PartitionOwner,
  admission: AdmissionShape = unlimitedAdmission,
): Effect.Effect<void, never, Nats | Scope.Scope | R> =>
  Effect.gen(function* () {
    const { nc } = yield* Nats
    const runFork = yield* FiberSet.makeRuntime<R>()
    const operation = operations[name]
    const measured = measureRequest(yield* Metrics, operation.servedBy, name)
    const requestsFirst = yield* RequestsFirst

    const handle = (msg: Msg, agentId: string) => {
      // Set once the handler runs for an owner: a refusal after that may come from its partition moving away.
      let handled = false
      const work = isSubjectToken(agentId)
        ? Effect.flatMap(decodeRequest(name, msg.data), (request) =>
            owner === undefined
              ? handler(agentId, request)
              : Effect.andThen(
                  ownerAnswering(owner, agentId),
                  Effect.suspend(() => {
                    handled = true
                    return handler(agentId, request)
                  }),
                ),
          )
        : Effect.fail(ValidationError.one("agentId", "must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'"))
      return measured(admission.admit(agentId, work)).pipe(
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
            // A refusal while the partition moved away may come from views already dropped: the retry goes to
            // the new owner, which answers from its caught-up view. An answer computed before it moved stands.
            const moved = handled && !reply.ok && !owner?.owns(agentId)
            msg.respond(
              replyBytes(
                moved
                  ? {
                      ok: false,
                      error: encodeError(
                        new Unavailable({
                          reason: `agent '${agentId}': its partition moved while the request ran; retry the same request`,
                        }),
                      ),
                    }
                  : reply,
                nc.info?.max_payload,
              ),
            )
          }),
        ),
        // In flight until its reply is sent: background work on this event loop waits behind it.
        requestsFirst.serve,
      )
    }

    if (owner === undefined) {
      const subscription = nc.subscribe(apiWildcard(operation.subject), {
        queue: `wm-${operation.servedBy}`,
        callback: (error, msg) => {
          if (error === null) runFork(handle(msg, agentIdOfApiSubject(msg.subject)))
        },
      })
      yield* Effect.addFinalizer(() => Effect.promise(() => subscription.drain().catch(() => undefined)))
      return
    }

    // A server that does not route delivers every request here, to every replica.
    let warned = false
    const unrouted = nc.subscribe(apiWildcard(operation.subject), {
      queue: owner.queue,
      callback: (error, msg) => {
        if (error !== null) return
        if (!warned) {
          warned = true
          runFork(
            Effect.logWarning(
              `[${operation.subject}] requests reach every replica: the NATS server does not route them by partition (add \`npm run wm -- routing-config\` to its configuration)`,
            ),
          )
        }
        const agentId = agentIdOfApiSubject(msg.subject)
        if (owner.takes(agentId)) runFork(handle(msg, agentId))
      },
    })
    const routes = subscribeRoutes(nc, operation.subject, owner, (msg, agentId) => runFork(handle(msg, agentId)))
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        routes.close()
        await unrouted.drain().catch(() => undefined)
      }),
    )
  })

/**
 * Keeps one subscription per route of each partition the owner has taken, following the set as it
 * changes. A routed request of an agent placed on another partition (a pinned tenant's, mapped by the hash
 * over the shared partitions) is forwarded once to that partition's route, with its reply subject.
 */
const subscribeRoutes = (
  nc: NatsConnection,
  operation: string,
  owner: PartitionOwner,
  serve: (msg: Msg, agentId: string) => void,
): { readonly close: () => void } => {
  const { placement } = owner
  const onRoute = (error: Error | null, msg: Msg) => {
    if (error !== null) return
    const routed = parseRouteSubject(msg.subject)
    if (routed === undefined) return
    if (owner.takes(routed.agentId)) return serve(msg, routed.agentId)
    const home = placedPartition(placement, routed.agentId)
    if ("slot" in routed.target && home !== partitionOfSlot(placement, routed.target.slot)) {
      nc.publish(forwardedSubject(placement.partitions, home, routed.agentId, operation), msg.data, {
        ...(msg.reply ? { reply: msg.reply } : {}),
        ...(msg.headers ? { headers: msg.headers } : {}),
      })
      return
    }
    // Its partition left this replica a moment ago: refused as moving, and retried at its new owner.
    serve(msg, routed.agentId)
  }
  const held = new Map<number, Subscription[]>()
  const follow = () => {
    const taken = new Set(owner.taken())
    for (const [partition, subscriptions] of held) {
      if (taken.has(partition)) continue
      for (const subscription of subscriptions) subscription.unsubscribe()
      held.delete(partition)
    }
    for (const partition of taken) {
      if (held.has(partition)) continue
      held.set(
        partition,
        routeSubscriptions(placement, partition, operation).map((subject) =>
          nc.subscribe(subject, { queue: owner.queue, callback: onRoute }),
        ),
      )
    }
  }
  follow()
  const stop = owner.watchTaken(follow)
  return {
    close: () => {
      stop()
      for (const subscriptions of held.values()) for (const subscription of subscriptions) subscription.unsubscribe()
      held.clear()
    },
  }
}

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
