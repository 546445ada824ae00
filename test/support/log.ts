/** Reads the event log directly, as an auditor would, with a plain NATS client. */
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect } from "@nats-io/transport-node"
import { SNAPSHOT_BUCKET, snapshotChunkKey, snapshotManifestKey } from "../../contracts/buckets.ts"
import { decodeEvent } from "../../contracts/decode.ts"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import { ALL_EVENTS, EVENTS_STREAM, entrySubject } from "../../contracts/subjects.ts"
import { openBytes } from "../../services/platform/keys/aead.ts"
import { openContentKeys } from "../../services/platform/keys/content-keys.ts"
import { makeSnapshotKeys, snapshotKeyName } from "../../services/platform/keys/snapshot-keys.ts"
import { readToEnd } from "../../services/platform/log/read-to-end.ts"

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
    for await (const m of readToEnd(consumer)) {
      await keys.load(m.data)
      const decoded = decodeEvent(m.data, keys.unseal)
      if (decoded.ok) out.push({ seq: m.seq, subject: m.subject, event: decoded.event })
      if (m.seq >= last) break
    }
    return out
  } finally {
    await nc.close()
  }
}

/** A cue as the log records it: one CueRehydrated, or one cue of a recall's CuesRehydrated. */
export interface LoggedCue {
  readonly seq: number
  readonly agentId: string
  readonly stepId: string
  readonly entryId: string
  readonly trigger: EventOf<"CueRehydrated">["trigger"]
  readonly relevance: number
  readonly recalled: EventOf<"CueRehydrated">["recalled"]
}

/** Every cue the log records, in stream order, whichever event carries it. */
export const cuesOf = (events: ReadonlyArray<StoredEvent>): LoggedCue[] =>
  events.flatMap(({ seq, event }) => {
    if (event._tag === "CueRehydrated") return [{ seq, ...event }]
    if (event._tag !== "CuesRehydrated") return []
    return event.cues.map((cue) => ({
      seq,
      agentId: event.agentId,
      stepId: event.stepId,
      trigger: event.trigger,
      ...cue,
    }))
  })

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

/** A partition's latest snapshot body, its chunks opened with their key (null when it has none). */
export const openedSnapshotBody = async (
  url: string,
  service: string,
  partition: number,
): Promise<{ readonly id: string; readonly body: string } | null> => {
  const nc = await connect({ servers: url })
  try {
    const kv = await new Kvm(nc).open(SNAPSHOT_BUCKET)
    const entry = await kv.get(snapshotManifestKey(service, partition))
    if (entry === null || entry.operation !== "PUT") return null
    const manifest = entry.json<{ id: string; chunks: number }>()
    const keys = makeSnapshotKeys((await openContentKeys(nc, Date.now)).store, await jetstreamManager(nc))
    const key = await keys.get(snapshotKeyName(service, partition, manifest.id))
    if (key === null) return null
    const parts: Buffer[] = []
    for (let i = 0; i < manifest.chunks; i++) {
      const name = snapshotChunkKey(service, partition, manifest.id, i)
      const chunk = await kv.get(name)
      const opened = chunk === null ? null : openBytes(key, chunk.value, name)
      if (opened === null) throw new Error(`${name} does not open`)
      parts.push(opened)
    }
    return { id: manifest.id, body: Buffer.concat(parts).toString("utf8") }
  } finally {
    await nc.close()
  }
}
