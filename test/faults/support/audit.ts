/**
 * Reads the event log back as an auditor would (a plain NATS client, no
 * service code but the decoder and the pure reducer), and checks what the
 * fault scenarios promise: every acknowledged entry stored exactly once, no
 * event stored twice, and every live view equal to the view rebuilt from
 * the log at the same sequence.
 */
import { DeliverPolicy, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, errors, type NatsConnection } from "@nats-io/transport-node"
import { HashMap } from "effect"
import { decodeEvent } from "../../../contracts/decode.ts"
import type { MemoryEvent } from "../../../contracts/events.ts"
import { ALL_EVENTS, agentIdOfEventSubject, EVENTS_STREAM } from "../../../contracts/subjects.ts"
import { type AgentView, evolve, skipUndecodable, viewSnapshot } from "../../../domain/agent-view.ts"
import { openContentKeys } from "../../../services/platform/keys/content-keys.ts"

export interface RawRecord {
  readonly seq: number
  readonly subject: string
  readonly data: Uint8Array
  /** The decoded event, or undefined for a record no projection can decode. */
  readonly event: MemoryEvent | undefined
}

const serverList = (servers: string | ReadonlyArray<string>) => (typeof servers === "string" ? [servers] : [...servers])

/**
 * The scenario's own reads of the log are an observer, not the system under test: on a loaded machine (a
 * three-node cluster on two shared cores) one JetStream API answer can take longer than the client's default
 * 5 s, so they wait longer and ask again rather than fail the scenario.
 */
const OBSERVER_TIMEOUT_MS = 20_000
const observerManager = (nc: NatsConnection) => jetstreamManager(nc, { timeout: OBSERVER_TIMEOUT_MS, checkAPI: false })
/**
 * A cluster electing a leader (after a node's failure, or its return) answers "temporarily unavailable"
 * or "not enabled" for a few seconds: the observer asks again for up to 60 s.
 */
const transient = (error: unknown) =>
  error instanceof errors.TimeoutError || /timeout|temporarily unavailable|not enabled/i.test(String(error))
const observed = async <A>(read: () => Promise<A>): Promise<A> => {
  const deadline = Date.now() + 60_000
  for (;;) {
    try {
      return await read()
    } catch (error) {
      if (Date.now() > deadline || !transient(error)) throw error
      await sleep(250)
    }
  }
}
const streamState = async (jsm: JetStreamManager) => observed(async () => (await jsm.streams.info(EVENTS_STREAM)).state)

/** Every record of WM_EVENTS in order, decoded where it can be. */
export const readRecords = async (servers: string | ReadonlyArray<string>): Promise<RawRecord[]> => {
  const nc = await connect({ servers: serverList(servers) })
  try {
    const jsm = await observerManager(nc)
    const last = (await streamState(jsm)).last_seq
    const out: RawRecord[] = []
    if (last === 0) return out
    const consumer = await observed(() =>
      jetstream(nc).consumers.get(EVENTS_STREAM, { filter_subjects: ALL_EVENTS, deliver_policy: DeliverPolicy.All }),
    )
    const keys = await openContentKeys(nc, Date.now)
    const messages = await consumer.consume()
    for await (const m of messages) {
      // The key bucket's stream may still be electing its leader too: its reads are the observer's as well.
      await observed(() => keys.load(m.data))
      const decoded = decodeEvent(m.data, keys.unseal)
      out.push({ seq: m.seq, subject: m.subject, data: m.data, event: decoded.ok ? decoded.event : undefined })
      if (m.seq >= last || m.info.pending === 0) break
    }
    await messages.close()
    return out
  } finally {
    await nc.close()
  }
}

export const streamLastSeq = async (servers: string | ReadonlyArray<string>): Promise<number> => {
  const nc = await connect({ servers: serverList(servers) })
  try {
    return (await streamState(await observerManager(nc))).last_seq
  } finally {
    await nc.close()
  }
}

/** Every agent's view folded from the log up to `uptoSeq` (inclusive) with the shared reducer. */
export const rebuildViews = (records: ReadonlyArray<RawRecord>, uptoSeq = Infinity): Map<string, AgentView> => {
  const views = new Map<string, AgentView>()
  for (const { seq, subject, event } of records) {
    if (seq > uptoSeq) break
    if (event === undefined) {
      // Undecodable: applies nothing, but the guarded positions move past it, as in every projection.
      const agentId = agentIdOfEventSubject(subject)
      const view = views.get(agentId)
      if (view !== undefined) views.set(agentId, skipUndecodable(view, subject, seq))
      continue
    }
    const next = evolve(views.get(event.agentId), event, { seq })
    if (next !== undefined) views.set(event.agentId, next)
  }
  return views
}

/** How many EntryRecorded events each entry (agent/entry) has in the log. */
export const entryRecordCounts = (records: ReadonlyArray<RawRecord>): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const { event } of records) {
    if (event?._tag !== "EntryRecorded") continue
    const key = `${event.agentId}/${event.entryId}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return counts
}

/** Event ids stored more than once (each counted once per extra copy). */
export const duplicateEvents = (records: ReadonlyArray<RawRecord>): number => {
  const seen = new Set<string>()
  let duplicates = 0
  for (const { event } of records) {
    if (event === undefined) continue
    if (seen.has(event.eventId)) duplicates++
    else seen.add(event.eventId)
  }
  return duplicates
}

/**
 * Rung moves that happened twice for the same entry (the same target rung
 * recorded twice, or a demotion twice): a fade decision applied twice.
 */
export const repeatedFadeMoves = (records: ReadonlyArray<RawRecord>): number => {
  const seen = new Set<string>()
  let repeated = 0
  for (const { event } of records) {
    if (event?._tag !== "RungChanged" && event?._tag !== "EntryDemoted") continue
    const key = `${event.agentId}/${event.entryId}/${event._tag === "RungChanged" ? event.to : 3}`
    if (seen.has(key)) repeated++
    else seen.add(key)
  }
  return repeated
}

export const snapshotOf = (view: AgentView | undefined) => (view === undefined ? undefined : viewSnapshot(view))

/** The same JSON a view travels as over the API. */
export const asJson = <A>(value: A): A => JSON.parse(JSON.stringify(value)) as A

/**
 * Reference counts computed straight from the log, without the reducer:
 * reads (EntriesRead, cues excluded) and citations (EntriesReferenced) per entry.
 */
export const countsFromLog = (records: ReadonlyArray<RawRecord>, agentId: string) => {
  const reads = new Map<string, number>()
  const citations = new Map<string, number>()
  for (const { event } of records) {
    if (event === undefined || event.agentId !== agentId) continue
    if (event._tag === "EntriesRead")
      for (const item of event.served) if (!item.cue) reads.set(item.entryId, (reads.get(item.entryId) ?? 0) + 1)
    if (event._tag === "EntriesReferenced")
      for (const id of event.entryIds) citations.set(id, (citations.get(id) ?? 0) + 1)
  }
  return { reads, citations }
}

/** Entries of a view still in working, by id. */
export const workingEntries = (view: AgentView) => new Map(HashMap.toEntries(view.entries))

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Waits until the log stops growing for `quietMs` and every projection
 * given has applied its end; returns that last sequence.
 */
export const waitQuiet = async (
  servers: string | ReadonlyArray<string>,
  applied: () => ReadonlyArray<number>,
  { quietMs = 1_500, timeoutMs = 60_000 }: { quietMs?: number; timeoutMs?: number } = {},
): Promise<number> => {
  const deadline = Date.now() + timeoutMs
  let last = -1
  let since = Date.now()
  while (Date.now() < deadline) {
    const seq = await streamLastSeq(servers)
    if (seq !== last) {
      last = seq
      since = Date.now()
    } else if (Date.now() - since >= quietMs && applied().every((a) => a >= seq)) {
      return seq
    }
    await sleep(200)
  }
  throw new Error(`the log did not settle within ${timeoutMs} ms (last ${last}, applied ${applied().join(", ")})`)
}

/**
 * Runs clean-up steps in order, each bounded in time and each whatever the
 * previous one did, so the servers and processes a scenario started are
 * always stopped.
 */
export const teardown = async (...steps: Array<() => Promise<unknown> | undefined>): Promise<void> => {
  for (const step of steps) {
    let timer: ReturnType<typeof setTimeout> | undefined
    try {
      await Promise.race([step(), new Promise((resolve) => (timer = setTimeout(resolve, 20_000)))])
    } catch {
      // the next step still runs
    } finally {
      clearTimeout(timer)
    }
  }
}
