/**
 * One agent's stored events, read back from the log by sequence: what
 * `view.events` serves, so an agent's local mirror is fed by a service and
 * the agent itself needs no right on the JetStream API.
 *
 * The read is an ordered consumer filtered to `wm.evt.<p>.<agent>.>`, from
 * `afterSeq + 1`, that stops at the caller's limits, at `untilSeq` (the last
 * event of the agent the caller knows is stored), or when the server says
 * nothing of the agent is pending.
 */
import { DeliverPolicy, type JetStreamClient } from "@nats-io/jetstream"
import { Effect } from "effect"
import { decodeEventJson } from "../../../contracts/decode.ts"
import { Unavailable } from "../../../contracts/errors.ts"
import type { MemoryEvent } from "../../../contracts/events.ts"
import { agentEvents, EVENTS_STREAM } from "../../../contracts/subjects.ts"
import type { StoredJson } from "../../../contracts/upcasters.ts"
import type { ContentKeyReader } from "../keys/content-keys.ts"
import { TRACEPARENT } from "../tracing/trace-context.ts"

export interface AgentEventsRead {
  readonly events: ReadonlyArray<{
    readonly seq: number
    readonly subject: string
    readonly event: MemoryEvent
    readonly traceparent?: string
  }>
  /** The last sequence read (undecodable records included): where the next read starts. */
  readonly lastSeq: number
  readonly more: boolean
}

export interface AgentEventsOptions {
  readonly afterSeq: number
  /** The agent's last stored event the caller knows of; nothing after it is waited for. */
  readonly untilSeq: number
  readonly max: number
  /** Stop before the events' bytes pass this (one event is always returned). */
  readonly maxBytes: number
}

const textDecoder = new TextDecoder()

/** A stored record's JSON object, parsed once for both its check and its opening (undefined: not JSON). */
const storedJson = (data: Uint8Array): StoredJson | undefined => {
  try {
    const json: unknown = JSON.parse(textDecoder.decode(data))
    return typeof json === "object" && json !== null && !Array.isArray(json) ? (json as StoredJson) : undefined
  } catch {
    return undefined
  }
}

/** Gives up on a read that stalls (e.g. the events it expected were purged meanwhile). */
const STALL_MS = 10_000

export const readAgentEvents = (
  js: JetStreamClient,
  keys: ContentKeyReader,
  agentId: string,
  options: AgentEventsOptions,
): Effect.Effect<AgentEventsRead, Unavailable> => {
  if (options.untilSeq <= options.afterSeq)
    return Effect.succeed({ events: [], lastSeq: options.afterSeq, more: false })
  return Effect.tryPromise({
    try: async (): Promise<AgentEventsRead> => {
      const consumer = await js.consumers.get(EVENTS_STREAM, {
        filter_subjects: agentEvents(agentId),
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: options.afterSeq + 1,
      })
      const messages = await consumer.consume({ max_messages: Math.min(options.max, 256), expires: 2_000 })
      let stalled = false
      const stall = setTimeout(() => {
        stalled = true
        void messages.stop()
      }, STALL_MS)
      const events: Array<AgentEventsRead["events"][number]> = []
      let lastSeq = options.afterSeq
      let bytes = 0
      let more = false
      try {
        for await (const m of messages) {
          if (events.length >= options.max || (events.length > 0 && bytes + m.data.length > options.maxBytes)) {
            more = true
            break
          }
          // Records no projection can decode are skipped here as they are dead-lettered there; the event goes out
          // as stored (its encoded form, its sealed content opened), not as this service's decoding of it.
          await keys.load(m.data, m.subject)
          const stored = storedJson(m.data)
          if (stored !== undefined && decodeEventJson(stored, keys.unseal).ok) {
            const traceparent = m.headers?.get(TRACEPARENT)
            const opened = keys.unseal(stored)
            events.push({
              seq: m.seq,
              subject: m.subject,
              event: (opened.ok ? opened.json : {}) as unknown as MemoryEvent,
              ...(traceparent ? { traceparent } : {}),
            })
            bytes += m.data.length
          }
          lastSeq = m.seq
          if (m.info.pending === 0 || m.seq >= options.untilSeq) {
            more = m.info.pending > 0
            break
          }
        }
      } finally {
        clearTimeout(stall)
        await messages.close().catch(() => undefined)
      }
      // Never a silently short answer: the caller retries (Unavailable) rather than miss events.
      if (stalled) throw new Error(`no event of the agent arrived for ${STALL_MS} ms after sequence ${lastSeq}`)
      return { events, lastSeq, more }
    },
    catch: (error) => new Unavailable({ reason: `cannot read the agent's events: ${String(error)}` }),
  })
}
