/**
 * Reads the substrate — the raw text and metadata of any entry by id —
 * straight from the event log. Every entry's EntryRecorded is the first
 * message on the entry's own subject (the gateway creates the subject with
 * Nats-Expected-Last-Subject-Sequence 0), and the log keeps every event, so
 * one message get by subject answers for a working, faded or long since
 * demoted entry alike; nothing is copied elsewhere. A forget erases the
 * entry's messages, after which the read finds nothing.
 *
 * The request is `{ next_by_subj: <entry subject>, seq: 0 }` (the first
 * message on the subject), as a direct get — answered by any replica of the
 * stream, so reads spread over a cluster — and, when that finds nothing, as a
 * message get answered by the stream's leader, which holds every
 * acknowledged write: a replica still catching up never answers "unknown"
 * for an entry that is recorded. Both shapes work on nats-server 2.9.10 and
 * 2.12.3 (test/memory/substrate-stream.test.ts runs on both).
 */
import type { JetStreamManager, MsgRequest, StoredMsg } from "@nats-io/jetstream"
import { Context, Effect, Layer } from "effect"
import type { ResponseOf } from "../../contracts/api.ts"
import { decodeEvent } from "../../contracts/decode.ts"
import { EVENTS_STREAM, entrySubject } from "../../contracts/subjects.ts"
import { type ContentKeyReader, ContentKeys } from "./keys/content-keys.ts"
import { Nats } from "./nats/connection.ts"

export type SubstrateRecord = ResponseOf<"getRaw">

/** The first message on the entry's subject (`seq: 0` with `next_by_subj`: from the stream's start). */
const firstOnSubject = (agentId: string, entryId: string) =>
  ({ next_by_subj: entrySubject(agentId, entryId), seq: 0 }) as const

/** The record an entry's first message makes, or null when that message is not the entry's EntryRecorded. */
export const substrateRecordOf = (
  agentId: string,
  entryId: string,
  message: StoredMsg,
  keys: ContentKeyReader,
): SubstrateRecord | null => {
  const decoded = decodeEvent(message.data, keys.unseal)
  if (!decoded.ok) return null
  const event = decoded.event
  if (event._tag !== "EntryRecorded" || event.agentId !== agentId || event.entryId !== entryId) return null
  return {
    agentId: event.agentId,
    entryId: event.entryId,
    timestamp: event.timestamp,
    origin: event.origin,
    content: event.content,
    tags: event.tags,
    correlationId: event.correlationId,
    moodSnapshot: event.moodSnapshot,
    emotionalWeight: event.emotionalWeight,
    tokens: event.tokens,
    seq: message.seq,
  }
}

/** The entry's record from the log, or null: never recorded, or forgotten. */
export const readRecorded = async (
  jsm: JetStreamManager,
  keys: ContentKeyReader,
  agentId: string,
  entryId: string,
): Promise<SubstrateRecord | null> => {
  const request = firstOnSubject(agentId, entryId)
  const message =
    (await jsm.direct.getMessage(EVENTS_STREAM, request)) ??
    // The message get takes `next_by_subj` on every server this runs on; the client's type names only seq and last_by_subj.
    (await jsm.streams.getMessage(EVENTS_STREAM, request as unknown as MsgRequest))
  if (message === null) return null
  await keys.load(message.data, message.subject)
  return substrateRecordOf(agentId, entryId, message, keys)
}

export const readSubstrate = (jsm: JetStreamManager, keys: ContentKeyReader, agentId: string, entryId: string) =>
  Effect.promise(() => readRecorded(jsm, keys, agentId, entryId))

export interface SubstrateReaderShape {
  readonly get: (agentId: string, entryId: string) => Effect.Effect<SubstrateRecord | null>
}

export class SubstrateReader extends Context.Service<SubstrateReader, SubstrateReaderShape>()("wm/SubstrateReader") {
  static readonly make = Effect.gen(function* () {
    const { jsm } = yield* Nats
    const keys = yield* ContentKeys
    return { get: (agentId, entryId) => readSubstrate(jsm, keys, agentId, entryId) } satisfies SubstrateReaderShape
  })

  static readonly layer = Layer.effect(SubstrateReader, SubstrateReader.make)
}
