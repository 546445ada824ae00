/**
 * A verifiable forget: purges the entry's (or the whole agent's) subjects
 * from the event log, then appends a tombstone (EntryForgotten or
 * AgentForgotten) on which every projection drops what it held — working
 * views, the substrate's KV keys (purged with their history), the
 * long-term records, the lexical index. Afterwards no query, replay or
 * substrate read can return the content, and the tombstone says when it was
 * forgotten.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import type { EventOf } from "../../contracts/events.ts"
import { agentEvents, entrySubject, EVENTS_STREAM, eventSubject } from "../../contracts/subjects.ts"

export interface Forgotten {
  readonly purged: number
  readonly tombstoneSeq: number
}

export const forget = async (nc: NatsConnection, agentId: string, entryId?: string): Promise<Forgotten> => {
  const jsm = await jetstreamManager(nc)
  const at = Date.now()
  const envelope = { v: 1 as const, agentId, at, causationId: "operator:forget", correlationId: null }
  const tombstone: EventOf<"EntryForgotten"> | EventOf<"AgentForgotten"> =
    entryId !== undefined
      ? { _tag: "EntryForgotten", ...envelope, eventId: `${agentId}:forget:${entryId}:${at}`, entryId }
      : { _tag: "AgentForgotten", ...envelope, eventId: `${agentId}:forget:${at}` }
  const filter = entryId !== undefined ? entrySubject(agentId, entryId) : agentEvents(agentId)
  const { purged } = await jsm.streams.purge(EVENTS_STREAM, { filter })
  const ack = await jetstream(nc).publish(eventSubject(tombstone), JSON.stringify(tombstone), { msgID: tombstone.eventId })
  return { purged, tombstoneSeq: ack.seq }
}
