/**
 * How memory replicas ask one another for the part of a thread they hold:
 * a request on `wm.peer.memory.thread.<p>` naming agents of partition p,
 * answered only by the replica that owns p, with those agents' entries of
 * the correlation id (both tiers) or the typed error that stopped it.
 */
import { Effect, Schema } from "effect"
import { ThreadRequest, ThreadResponse } from "../../../contracts/api.ts"
import { ApiError, Unavailable } from "../../../contracts/errors.ts"

/** How long a replica waits for the owner of another partition (inside one SDK attempt). */
export const PEER_WAIT_MS = 2_000

export const ThreadPartRequest = Schema.Struct({
  agents: Schema.Array(Schema.String).check(Schema.isMinLength(1)),
  correlationId: ThreadRequest.fields.correlationId,
  afterSeq: ThreadRequest.fields.afterSeq,
})
export type ThreadPartRequest = typeof ThreadPartRequest.Type

export const ThreadPartReply = Schema.Union([
  Schema.Struct({ ok: Schema.Literal(true), entries: ThreadResponse.fields.entries }),
  Schema.Struct({ ok: Schema.Literal(false), error: ApiError }),
])

const textDecoder = new TextDecoder()
const decodeRequestJson = Schema.decodeUnknownOption(Schema.fromJsonString(ThreadPartRequest))
const decodeReplyJson = Schema.decodeUnknownEffect(Schema.fromJsonString(ThreadPartReply))

/** A peer's request, or null when it is not one (nothing is answered). */
export const decodeThreadPartRequest = (data: Uint8Array): ThreadPartRequest | null => {
  const decoded = decodeRequestJson(textDecoder.decode(data))
  return decoded._tag === "Some" ? decoded.value : null
}

/** A peer's reply: its entries, or the typed error it answered with. */
export const decodeThreadPartReply = (data: Uint8Array) =>
  decodeReplyJson(textDecoder.decode(data)).pipe(
    Effect.mapError(() => new Unavailable({ reason: "a memory replica answered a thread part that does not decode" })),
    Effect.flatMap((reply) => (reply.ok ? Effect.succeed(reply.entries) : Effect.fail(reply.error))),
  )
