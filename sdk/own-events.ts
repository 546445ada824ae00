/**
 * Reading an agent's own events from the log, under the broker permissions
 * of infra/auth.ts: an agent may create a consumer only with its own filter
 * (`wm.evt.<agent>.>`) and only receive on its own inbox prefix, and it may
 * not pull from consumers. So this uses an ordered push consumer whose
 * deliveries go to the agent's inbox — the same thing works unchanged on an
 * unrestricted server.
 *
 *   const events = await readOwnEvents(wm, "planner")                  // up to now
 *   const follow = await followOwnEvents(wm, "planner", { onEvent })   // and live, e.g. for a local mirror
 */
import { DeliverPolicy, jetstream, type ConsumerMessages, type JsMsg } from "@nats-io/jetstream"
import { nuid } from "@nats-io/nuid"
import type { MemoryEvent } from "../contracts/events.ts"
import { agentInboxPrefix } from "../contracts/inboxes.ts"
import { agentEvents, EVENTS_STREAM } from "../contracts/subjects.ts"
import { decodeEvent, FutureEventVersion } from "../services/log/decode.ts"
import type { WorkingMemoryClient } from "./client.ts"

export interface OwnEvent {
  readonly seq: number
  readonly subject: string
  readonly event: MemoryEvent
}

export interface OwnEventsOptions {
  /** The first stream sequence to deliver (default 1). */
  readonly fromSeq?: number
  /** The connection's inbox prefix (default `_INBOX_<agentId>`, as infra/auth.ts grants). */
  readonly inboxPrefix?: string
}

export interface FollowOptions extends OwnEventsOptions {
  /** Called for each event in stream order; records that do not decode are skipped. */
  readonly onEvent: (event: OwnEvent) => void
  /**
   * Called once when an event of a newer schema version than this SDK reads arrives: delivery stops
   * just before it (a mirror that skipped it would silently diverge). Logged when not given.
   */
  readonly onStop?: (error: FutureEventVersion, seq: number) => void
}

export interface Following {
  readonly stop: () => Promise<void>
}

// The services' decoder: older versions are upcast, so a mirror reads old logs as they do.
const toOwnEvent = (m: JsMsg): OwnEvent | FutureEventVersion | undefined => {
  const decoded = decodeEvent(m.data)
  return decoded.ok ? { seq: m.seq, subject: m.subject, event: decoded.event } : decoded.future
}

const openConsumer = async (client: WorkingMemoryClient, agentId: string, options: OwnEventsOptions) => {
  const js = jetstream(client.nc)
  const prefix = options.inboxPrefix ?? agentInboxPrefix(agentId)
  const fromSeq = Math.max(1, options.fromSeq ?? 1)
  return js.consumers.getPushConsumer(EVENTS_STREAM, {
    filter_subjects: agentEvents(agentId),
    deliver_prefix: `${prefix}.${nuid.next()}`,
    ...(fromSeq > 1 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: fromSeq } : { deliver_policy: DeliverPolicy.All }),
  })
}

/** Every event of the agent stored so far, in stream order; fails with FutureEventVersion on an event newer than this SDK reads. */
export const readOwnEvents = async (
  client: WorkingMemoryClient,
  agentId: string,
  options: OwnEventsOptions = {},
): Promise<OwnEvent[]> => {
  const consumer = await openConsumer(client, agentId, options)
  const out: OwnEvent[] = []
  // The creation reply says how many messages match; an agent may not ask for consumer info later.
  // (An unused ephemeral consumer is removed by the server once nobody listens.)
  if ((await consumer.info(true)).num_pending === 0) return out
  const messages = await consumer.consume()
  try {
    for await (const m of messages) {
      const e = toOwnEvent(m)
      // A newer event than this SDK reads: fail rather than hand back a history with a hole in it.
      if (e instanceof FutureEventVersion) throw e
      if (e) out.push(e)
      if (m.info.pending === 0) break
    }
  } finally {
    await messages.close()
  }
  return out
}

/** Delivers the agent's events from `fromSeq`, then live ones, until stopped. */
export const followOwnEvents = async (
  client: WorkingMemoryClient,
  agentId: string,
  options: FollowOptions,
): Promise<Following> => {
  const consumer = await openConsumer(client, agentId, options)
  let stopped = false
  let messages: ConsumerMessages | undefined
  messages = await consumer.consume({
    callback: (m: JsMsg) => {
      if (stopped) return
      const e = toOwnEvent(m)
      if (e instanceof FutureEventVersion) {
        stopped = true
        if (options.onStop) options.onStop(e, m.seq)
        else console.error(`[wm sdk] ${agentId}: stopped before seq ${m.seq}: ${e.message}`)
        void messages?.close()
      } else if (e) options.onEvent(e)
    },
  })
  return { stop: async () => void (await messages?.close()) }
}
