/**
 * Reading an agent's own events, e.g. to keep a local mirror of its working
 * view. The working service serves them on the agent's own API subject
 * (`wm.api.<agent>.view.events`), so an agent needs no right on the
 * JetStream API at all (see SECURITY.md): it asks for the events after a
 * stream sequence and gets them in stream order; a request that finds
 * nothing new waits for the agent's next event.
 *
 *   const events = await readOwnEvents(wm, "planner")                  // everything stored before the call
 *   const follow = await followOwnEvents(wm, "planner", { onEvent })   // and live, e.g. for a local mirror
 */

import { decodeEventJson, type FutureEventVersion } from "../contracts/decode.ts"
import type { MemoryEvent } from "../contracts/events.ts"
import type { WorkingMemoryClient } from "./client.ts"

export interface OwnEvent {
  readonly seq: number
  readonly subject: string
  readonly event: MemoryEvent
}

export interface OwnEventsOptions {
  /** The first stream sequence to deliver (default 1). */
  readonly fromSeq?: number
  /** Events per request (default 256). */
  readonly batch?: number
}

export interface FollowOptions extends OwnEventsOptions {
  /** Called for each event in stream order, once each. */
  readonly onEvent: (event: OwnEvent) => void
  /**
   * Called once when an event of a newer schema version than this SDK reads arrives: delivery stops
   * just before it (a mirror that skipped it would silently diverge). Logged when not given.
   */
  readonly onStop?: (error: FutureEventVersion, seq: number) => void
  /** Called when a request fails (the service restarting…); following goes on after a pause. */
  readonly onError?: (error: unknown) => void
  /** How long one request waits for a new event (default 2000 ms); `stop()` returns within about this long. */
  readonly waitMs?: number
}

export interface Following {
  readonly stop: () => Promise<void>
}

// The services' decoder: older versions are upcast, so a mirror reads old logs as they do.
const ownEvents = (
  events: ReadonlyArray<{ seq: number; subject: string; event: unknown }>,
): { readonly events: OwnEvent[]; readonly stop?: { readonly error: FutureEventVersion; readonly seq: number } } => {
  const out: OwnEvent[] = []
  for (const e of events) {
    const decoded = decodeEventJson(e.event)
    if (decoded.ok) out.push({ seq: e.seq, subject: e.subject, event: decoded.event })
    // A newer event than this SDK reads: stop just before it rather than hand back a history with a hole in it.
    else if (decoded.future) return { events: out, stop: { error: decoded.future, seq: e.seq } }
  }
  return { events: out }
}

/** Every event of the agent stored before the call, in stream order; fails with FutureEventVersion on an event newer than this SDK reads. */
export const readOwnEvents = async (
  client: WorkingMemoryClient,
  agentId: string,
  options: OwnEventsOptions = {},
): Promise<OwnEvent[]> => {
  const out: OwnEvent[] = []
  let afterSeq = Math.max(1, options.fromSeq ?? 1) - 1
  for (;;) {
    const reply = await client.call(agentId, "readEvents", {
      afterSeq,
      ...(options.batch ? { max: options.batch } : {}),
    })
    const read = ownEvents(reply.events)
    out.push(...read.events)
    if (read.stop) throw read.stop.error
    afterSeq = reply.lastSeq
    if (!reply.more) return out
  }
}

/** Delivers the agent's events from `fromSeq`, then live ones, until stopped. */
export const followOwnEvents = async (
  client: WorkingMemoryClient,
  agentId: string,
  options: FollowOptions,
): Promise<Following> => {
  const waitMs = options.waitMs ?? 2_000
  let afterSeq = Math.max(1, options.fromSeq ?? 1) - 1
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      try {
        const reply = await client.call(
          agentId,
          "readEvents",
          { afterSeq, waitMs, ...(options.batch ? { max: options.batch } : {}) },
          { timeoutMs: waitMs + 5_000 },
        )
        const read = ownEvents(reply.events)
        for (const e of read.events) if (!stopped) options.onEvent(e)
        if (read.stop) {
          stopped = true
          if (options.onStop) options.onStop(read.stop.error, read.stop.seq)
          else console.error(`[wm sdk] ${agentId}: stopped before seq ${read.stop.seq}: ${read.stop.error.message}`)
          break
        }
        afterSeq = reply.lastSeq
      } catch (error) {
        if (stopped) break
        options.onError?.(error)
        await new Promise((r) => setTimeout(r, 500))
      }
    }
  })()
  return {
    stop: async () => {
      stopped = true
      await loop
    },
  }
}
