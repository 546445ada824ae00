/** Reads the event log directly, as an auditor would, with a plain NATS client. */
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { decodeEvent } from "../../contracts/decode.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import { ALL_EVENTS, EVENTS_STREAM, entrySubject } from "../../contracts/subjects.ts"
import { openContentKeys } from "../../services/platform/keys/content-keys.ts"

export interface StoredEvent {
  readonly seq: number
  readonly subject: string
  readonly event: MemoryEvent
}

export const readLog = async (url: string, filter = ALL_EVENTS): Promise<StoredEvent[]> => {
  const nc = await connect({ servers: url })
  try {
    const jsm = await jetstreamManager(nc)
    const last = (await jsm.streams.info(EVENTS_STREAM)).state.last_seq
    const out: StoredEvent[] = []
    if (last === 0) return out
    const consumer = await jetstream(nc).consumers.get(EVENTS_STREAM, {
      filter_subjects: filter,
      deliver_policy: DeliverPolicy.All,
    })
    const keys = await openContentKeys(nc, Date.now)
    const messages = await consumer.consume()
    for await (const m of messages) {
      await keys.load(m.data)
      const decoded = decodeEvent(m.data, keys.unseal)
      if (decoded.ok) out.push({ seq: m.seq, subject: m.subject, event: decoded.event })
      if (m.seq >= last || m.info.pending === 0) break
    }
    await messages.close()
    return out
  } finally {
    await nc.close()
  }
}

export const lastSeq = async (
  url: string,
  credentials: { readonly user: string; readonly pass: string } = { user: "", pass: "" },
): Promise<number> => {
  const nc = await connect({ servers: url, ...(credentials.user !== "" ? credentials : {}) })
  try {
    return (await (await jetstreamManager(nc)).streams.info(EVENTS_STREAM)).state.last_seq
  } finally {
    await nc.close()
  }
}

/** Publishes raw bytes onto an event subject, bypassing every check: a poison event. */
export const publishRaw = async (url: string, subject: string, data: string): Promise<number> => {
  const nc = await connect({ servers: url })
  try {
    return (await jetstream(nc).publish(subject, data)).seq
  } finally {
    await nc.close()
  }
}

/** Appends well-formed events directly, as another service (a fade worker) would. */
export const appendEvents = async (url: string, events: ReadonlyArray<MemoryEvent>): Promise<number> => {
  const { eventSubject } = await import("../../contracts/subjects.ts")
  const nc = await connect({ servers: url })
  try {
    const js = jetstream(nc)
    let seq = 0
    for (const event of events)
      seq = (await js.publish(eventSubject(event), JSON.stringify(event), { msgID: event.eventId })).seq
    return seq
  } finally {
    await nc.close()
  }
}

/** The sealed text of an entry's recorded content as the log stores it (what a search of the store's files finds). */
export const sealedContentOf = async (url: string, agentId: string, entryId: string): Promise<string> => {
  const nc = await connect({ servers: url })
  try {
    const stored = await (await jetstreamManager(nc)).streams.getMessage(EVENTS_STREAM, {
      next_by_subj: entrySubject(agentId, entryId),
      seq: 0,
    } as unknown as { seq: number })
    const content = (JSON.parse(new TextDecoder().decode(stored?.data)) as { content?: { $sealed?: string } }).content
    if (typeof content?.$sealed !== "string") throw new Error(`entry ${entryId} is not stored sealed`)
    return content.$sealed
  } finally {
    await nc.close()
  }
}
