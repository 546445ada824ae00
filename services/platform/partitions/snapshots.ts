/**
 * Snapshots of a partition's views in the `wm_snapshots` KV bucket:
 *
 *   <service>.<p>                  manifest: { format, partitions, stream, seq, id, chunks, bytes, sha256, agents, at }
 *   <service>.<p>.<id>.<n>         chunk n of snapshot <id>: a slice of its body, JSON lines:
 *                                  { format, seq, agents } then one [agentId, encodedView] per line, or
 *                                  [agentId, encodedView, state] for a service that keeps more than views
 *
 * A service whose state is more than its views (the memory service's indexes, fade's raw texts) names
 * its state's format: the manifest records it, and a snapshot of another state format is ignored.
 *
 * Written and read a chunk at a time, a view at a time: neither side holds the whole body as one
 * string, so a partition's snapshot costs little more memory than its views.
 *
 * A forget applied in a partition erases its snapshot (chunks and manifest) in place, and the replica
 * writes none for that partition until it is rebuilt from the log: its live views still count what the
 * forget erased from the log (entry ordinals), so a snapshot of them would not equal a rebuild.
 *
 * A snapshot covers the partition's events up to `seq` (a stream sequence of
 * the event stream created at `stream`). The chunks are written first, the
 * manifest last with a compare-and-set on the revision the writer read, so a
 * reader sees a whole snapshot or the previous one. After a new manifest the
 * previous snapshot's chunks are erased in place (STREAM.MSG.DELETE without
 * no_erase, as services/platform/log/erase.ts does for the log): what a forget
 * removed from the views leaves no copy in an older snapshot. Chunks no
 * manifest names (a writer that died mid-snapshot) are erased when the
 * partition is next loaded.
 *
 * A snapshot that does not decode (checksum, format, partition count, event
 * stream, or a view the codec refuses) is ignored: the partition is rebuilt
 * from the log.
 */
import { createHash } from "node:crypto"
import { JetStreamApiError } from "@nats-io/jetstream"
import type { KV } from "@nats-io/kv"
import { Kvm } from "@nats-io/kv"
import { nuid } from "@nats-io/nuid"
import { Clock, Effect, Schedule } from "effect"
import { SNAPSHOT_BUCKET, snapshotChunkKey, snapshotManifestKey } from "../../../contracts/buckets.ts"
import { isSubjectToken } from "../../../contracts/ids.ts"
import { EVENTS_STREAM } from "../../../contracts/subjects.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import { openBytes, sealBytes } from "../keys/aead.ts"
import { ContentKeys } from "../keys/content-keys.ts"
import { makeSnapshotKeys, type SnapshotKeys, snapshotKeyName } from "../keys/snapshot-keys.ts"
import { Nats } from "../nats/connection.ts"
import { NatsSettings } from "../nats/settings.ts"
import { decodeView, encodeView } from "./view-codec.ts"

/**
 * 2: one view per line, and views no longer carry the ids of long-term entries nor their subjects'
 * sequences (older snapshots are ignored and rebuilt).
 */
export const SNAPSHOT_FORMAT = 2

export interface Manifest {
  readonly format: number
  readonly partitions: number
  /** When the event stream the sequences refer to was created. */
  readonly stream: string
  readonly seq: number
  readonly id: string
  readonly chunks: number
  readonly bytes: number
  readonly sha256: string
  readonly agents: number
  readonly at: number
  /** The format of the per-agent state beside the views (absent: views only). */
  readonly state?: string
  /** The chunks are sealed under the snapshot's own key (keys/snapshot-keys.ts); absent: written in clear, before. */
  readonly sealed?: true
}

/** What a service keeps per agent beside its view, as a snapshot carries it. */
export interface SnapshotState<S> {
  /** Named in the manifest: change it when the encoding changes, and older snapshots are rebuilt. */
  readonly format: string
  /** Throws on anything it does not recognise (the snapshot is then ignored). */
  readonly decode: (value: unknown) => S
}

/**
 * One agent's part of a snapshot, taken at the sequence the snapshot covers: its view (with the
 * service's state of the agent, already JSON-ready; undefined for a views-only service), or the line an
 * earlier snapshot carried for it, not decoded since (its view has not changed).
 */
export type SnapshotAgent = { readonly view: AgentView; readonly state?: unknown } | { readonly line: Uint8Array }

/** A snapshot as read: it covers the partition's events up to `manifest.seq`. */
export interface ReadSnapshot {
  readonly manifest: Manifest
  readonly views: Map<string, AgentView>
  /** A views-only service's views as the lines they were read from, decoded when used (`decodeViewLine`). */
  readonly lines: Map<string, Uint8Array>
  /** The decoded state of each agent (empty for a views-only service). */
  readonly states: Map<string, unknown>
}

export interface SnapshotStore {
  /**
   * The latest snapshot of the partition, or null (none, or one that does not decode: the reason is
   * logged). `prefetched`, read before the partition was taken, is used if it is still the latest.
   */
  readonly load: (partition: number, prefetched?: ReadSnapshot | null) => Effect.Effect<ReadSnapshot | null>
  /**
   * Reads the partition's latest snapshot before it is taken (nothing is swept or logged), for `load`
   * once it is; null when there is none or it does not decode.
   */
  readonly prefetch: (partition: number) => Effect.Effect<ReadSnapshot | null>
  /**
   * Writes a snapshot at `seq` and erases the one it replaces. `agents` must be taken at `seq` (views are
   * immutable; a service's state is copied when it is taken), as the partition moves on while it is written.
   */
  readonly save: (
    partition: number,
    seq: number,
    agents: ReadonlyArray<readonly [string, SnapshotAgent]>,
  ) => Effect.Effect<Manifest | null, Error>
  /** Erases the partition's snapshot in place, manifest and chunks: nothing of it is left in the store. */
  readonly drop: (partition: number) => Effect.Effect<void, Error>
  /** Reads a snapshot's views, every one decoded, without logging (for `wm verify`). */
  readonly read: (partition: number) => Promise<ReadSnapshot | string>
}

const COMMA = 44
const NEWLINE = 10
const QUOTE = 34
const OPEN_BRACKET = 91

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })
const utf8 = (bytes: Uint8Array) => strictUtf8.decode(bytes)

const concatBytes = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/**
 * The agent id a line starts with, read off its first bytes: `["<id>",`. Ids are subject tokens
 * (contracts/ids.ts), which JSON writes without escapes, so the line need not be parsed to know whose it is.
 */
const agentIdOfLine = (line: Uint8Array): string => {
  const end = line.indexOf(QUOTE, 2)
  if (line[0] !== OPEN_BRACKET || line[1] !== QUOTE || end < 3 || end > 66 || line[end + 1] !== COMMA)
    throw new Error("a view without its agent id")
  const agentId = String.fromCharCode(...line.subarray(2, end))
  if (!isSubjectToken(agentId)) throw new Error("a view without its agent id")
  return agentId
}

/** An agent's view from its snapshot line; throws on anything the codec does not recognise. */
export const decodeViewLine = (agentId: string, line: Uint8Array): AgentView => {
  const [id, view] = JSON.parse(utf8(line)) as [unknown, unknown]
  if (id !== agentId) throw new Error(`the line of ${agentId} holds another agent's view`)
  return decodeView(view)
}

const textEncoder = new TextEncoder()
const NEWLINE_BYTES = Uint8Array.of(NEWLINE)

/** Opens (or creates) the bucket; usable from a plain connection too (`wm verify`). */
export const openSnapshotKv = (kvm: Kvm, replicas: number): Promise<KV> =>
  kvm.create(SNAPSHOT_BUCKET, { history: 1, replicas, storage: "file" as never })

export const makeSnapshotStore = (
  kv: KV,
  options: {
    readonly service: string
    readonly partitions: number
    readonly streamCreated: string
    readonly chunkBytes: number
    readonly erase: (seq: number) => Promise<void>
    readonly state?: SnapshotState<unknown>
    /** Seals every chunk under a key of the snapshot's own, erased with the snapshot. */
    readonly keys: SnapshotKeys
  },
) => {
  const { service, partitions, streamCreated, chunkBytes, state, keys } = options

  const manifestOf = async (partition: number): Promise<{ manifest: Manifest | null; revision: number }> => {
    const entry = await kv.get(snapshotManifestKey(service, partition))
    if (entry === null || entry.operation !== "PUT") return { manifest: null, revision: entry?.revision ?? 0 }
    return { manifest: entry.json<Manifest>(), revision: entry.revision }
  }

  const chunkKeys = async (partition: number): Promise<string[]> => {
    const keys: string[] = []
    for await (const key of await kv.keys(`${snapshotManifestKey(service, partition)}.*.*`)) keys.push(key)
    return keys
  }

  const eraseKey = async (key: string) => {
    const entry = await kv.get(key)
    if (entry !== null && entry.operation === "PUT") await options.erase(entry.revision)
  }

  /** Reads the latest snapshot; `lazy` (a views-only service) keeps each view as its line, undecoded. */
  const readLatest = async (partition: number, lazy: boolean): Promise<ReadSnapshot | string> => {
    const { manifest } = await manifestOf(partition)
    if (manifest === null) return "no snapshot"
    if (manifest.format !== SNAPSHOT_FORMAT) return `format ${manifest.format}, this code reads ${SNAPSHOT_FORMAT}`
    if (manifest.partitions !== partitions) return `taken with ${manifest.partitions} partitions, not ${partitions}`
    if (manifest.stream !== streamCreated) return "taken of another event stream (recreated or migrated since)"
    if ((manifest.state ?? null) !== (state?.format ?? null))
      return `state ${manifest.state ?? "none"}, this code reads ${state?.format ?? "none"}`
    const keepLines = lazy && state === undefined
    const key = manifest.sealed ? await keys.get(snapshotKeyName(service, partition, manifest.id)) : null
    if (manifest.sealed && key === null) return "its key is erased"
    const hash = createHash("sha256")
    const views = new Map<string, AgentView>()
    const lines = new Map<string, Uint8Array>()
    const states = new Map<string, unknown>()
    let header: { format?: unknown; seq?: unknown; agents?: unknown } | null = null
    let bytes = 0
    // The body is parsed as it arrives, but a checksum that does not match is what a reader is told first.
    let parseError: string | null = null
    const takeLine = (line: Uint8Array) => {
      if (parseError !== null || line.length === 0) return
      try {
        if (header === null) header = JSON.parse(utf8(line)) as { format?: unknown; seq?: unknown; agents?: unknown }
        else if (keepLines) lines.set(agentIdOfLine(line), line)
        else {
          const [agentId, view, agentState] = JSON.parse(utf8(line)) as [unknown, unknown, unknown]
          if (typeof agentId !== "string") throw new Error("a view without its agent id")
          views.set(agentId, decodeView(view))
          if (state !== undefined) states.set(agentId, state.decode(agentState))
        }
      } catch (error) {
        parseError = `does not decode: ${error instanceof Error ? error.message : String(error)}`
      }
    }
    // Lines are cut on the bytes (a newline is never part of a UTF-8 sequence); one may span chunks.
    const carried: Uint8Array[] = []
    for (let i = 0; i < manifest.chunks; i++) {
      const chunk = await kv.get(snapshotChunkKey(service, partition, manifest.id, i))
      if (chunk === null || chunk.operation !== "PUT") return `chunk ${i} of ${manifest.chunks} is missing`
      const body =
        key === null ? chunk.value : openBytes(key, chunk.value, snapshotChunkKey(service, partition, manifest.id, i))
      if (body === null) return `chunk ${i} does not open with the snapshot's key`
      hash.update(body)
      bytes += body.length
      let start = 0
      for (let end = body.indexOf(NEWLINE); end >= 0; end = body.indexOf(NEWLINE, start)) {
        const line = body.subarray(start, end)
        takeLine(carried.length === 0 ? line : concatBytes(carried.splice(0).concat(line)))
        start = end + 1
      }
      if (start < body.length) carried.push(body.subarray(start))
    }
    if (carried.length > 0) takeLine(concatBytes(carried))
    if (bytes !== manifest.bytes || hash.digest("hex") !== manifest.sha256) return "checksum does not match"
    if (parseError !== null) return parseError
    const head = header as { format?: unknown; seq?: unknown; agents?: unknown } | null
    if (head?.format !== SNAPSHOT_FORMAT || head.seq !== manifest.seq || head.agents !== views.size + lines.size)
      return "body does not match its manifest"
    return { manifest, views, lines, states }
  }
  const read = (partition: number) => readLatest(partition, false)

  /**
   * Per partition, the sweep of chunks no manifest names (left by a writer that died mid-snapshot) that a
   * load started: it runs beside the partition's catch-up, off its path (listing keys asks the server for
   * a consumer), and a save or a drop of the partition waits for it, so it never meets a new snapshot's chunks.
   */
  const sweeps = new Map<number, Promise<void>>()
  const sweepOrphans = (partition: number, named: string) => {
    const previous = sweeps.get(partition) ?? Promise.resolve()
    const sweep = previous.then(async () => {
      for (const key of await chunkKeys(partition).catch(() => []))
        if (named === "" || !key.startsWith(named)) await eraseKey(key).catch(() => undefined)
    })
    sweeps.set(partition, sweep)
  }
  const swept = (partition: number) => sweeps.get(partition) ?? Promise.resolve()

  const prefetch = (partition: number): Effect.Effect<ReadSnapshot | null> =>
    Effect.promise(async () => {
      const found = await readLatest(partition, true).catch((error: unknown) => `cannot be read: ${String(error)}`)
      return typeof found === "string" ? null : found
    })

  const load = (partition: number, prefetched?: ReadSnapshot | null): Effect.Effect<ReadSnapshot | null> =>
    Effect.promise(async () => {
      // A prefetched snapshot is used only while it is the latest: the sweep below erases every chunk but
      // the latest's, and a snapshot written since by the partition's previous owner must not lose its own.
      const latest = prefetched ? await manifestOf(partition).catch(() => null) : null
      const found =
        prefetched && latest?.manifest?.id === prefetched.manifest.id
          ? prefetched
          : await readLatest(partition, true).catch((error: unknown) => `cannot be read: ${String(error)}`)
      sweepOrphans(
        partition,
        typeof found === "string" ? "" : `${snapshotManifestKey(service, partition)}.${found.manifest.id}.`,
      )
      return found
    }).pipe(
      Effect.flatMap((found) =>
        typeof found !== "string"
          ? Effect.succeed(found)
          : found === "no snapshot"
            ? Effect.succeed(null)
            : Effect.as(
                Effect.logError(
                  `[${service}] snapshot of partition ${partition} ignored (${found}): rebuilding from the log`,
                ),
                null,
              ),
      ),
    )

  const save = (partition: number, seq: number, taken: ReadonlyArray<readonly [string, SnapshotAgent]>) =>
    Clock.clockWith((clock) =>
      Effect.tryPromise({
        try: async (): Promise<Manifest | null> => {
          await swept(partition)
          const id = nuid.next()
          const key = await keys.make(snapshotKeyName(service, partition, id))
          // The body is cut into chunks as its lines are made: one view's JSON at a time in memory.
          const hash = createHash("sha256")
          let chunks = 0
          let bytes = 0
          let parts: Uint8Array[] = []
          let partsBytes = 0
          const joined = () => {
            const out = new Uint8Array(partsBytes)
            let at = 0
            for (const part of parts) {
              out.set(part, at)
              at += part.length
            }
            return out
          }
          const putChunk = async (chunk: Uint8Array) => {
            hash.update(chunk)
            bytes += chunk.length
            const name = snapshotChunkKey(service, partition, id, chunks)
            await kv.put(name, sealBytes(key, chunk, name))
            chunks++
          }
          const write = async (line: string | Uint8Array) => {
            const encoded = typeof line === "string" ? textEncoder.encode(line) : line
            parts.push(encoded, NEWLINE_BYTES)
            partsBytes += encoded.length + 1
            while (partsBytes >= chunkBytes) {
              const all = joined()
              await putChunk(all.subarray(0, chunkBytes))
              const rest = all.slice(chunkBytes)
              parts = rest.length > 0 ? [rest] : []
              partsBytes = rest.length
            }
          }
          await write(JSON.stringify({ format: SNAPSHOT_FORMAT, seq, agents: taken.length }))
          for (const [agentId, agent] of taken)
            if ("line" in agent) await write(agent.line)
            else
              await write(
                JSON.stringify(
                  state === undefined
                    ? [agentId, encodeView(agent.view)]
                    : [agentId, encodeView(agent.view), agent.state ?? null],
                ),
              )
          if (partsBytes > 0) await putChunk(joined())
          const manifest: Manifest = {
            format: SNAPSHOT_FORMAT,
            partitions,
            stream: streamCreated,
            seq,
            id,
            chunks,
            bytes,
            sha256: hash.digest("hex"),
            agents: taken.length,
            at: clock.currentTimeMillisUnsafe(),
            ...(state === undefined ? {} : { state: state.format }),
            sealed: true,
          }
          const previous = await manifestOf(partition)
          try {
            if (previous.revision === 0)
              await kv.create(snapshotManifestKey(service, partition), JSON.stringify(manifest))
            else await kv.update(snapshotManifestKey(service, partition), JSON.stringify(manifest), previous.revision)
          } catch (error) {
            // Another writer got there first: keep its snapshot, drop ours.
            for (let i = 0; i < chunks; i++) await eraseKey(snapshotChunkKey(service, partition, id, i))
            await keys.destroy(snapshotKeyName(service, partition, id))
            if (error instanceof JetStreamApiError) return null
            throw error
          }
          if (previous.manifest !== null) {
            await keys.destroy(snapshotKeyName(service, partition, previous.manifest.id)).catch(() => undefined)
            for (let i = 0; i < previous.manifest.chunks; i++)
              await eraseKey(snapshotChunkKey(service, partition, previous.manifest.id, i)).catch(() => undefined)
          }
          return manifest
        },
        catch: (error) => new Error(`snapshot of partition ${partition} not written: ${String(error)}`),
      }),
    )

  const drop = (partition: number) =>
    Effect.tryPromise({
      try: async () => {
        await swept(partition)
        const { manifest } = await manifestOf(partition)
        if (manifest !== null) await keys.destroy(snapshotKeyName(service, partition, manifest.id))
        for (const key of await chunkKeys(partition)) await eraseKey(key)
        await eraseKey(snapshotManifestKey(service, partition))
      },
      catch: (error) => new Error(`snapshot of partition ${partition} not erased: ${String(error)}`),
    })

  return { load, prefetch, save, drop, read } satisfies SnapshotStore
}

/** The snapshot store of a service, on the service's connection. */
export const openSnapshotStore = (service: string, partitions: number, state?: SnapshotState<unknown>) =>
  Effect.gen(function* () {
    const { js, jsm, nc } = yield* Nats
    const contentKeys = yield* ContentKeys
    const settings = yield* NatsSettings
    // A cluster that has just formed may time out creating a replicated bucket: try again, as openBucket does.
    const untilAnswered = Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))
    const kv = yield* Effect.tryPromise(() => openSnapshotKv(new Kvm(js), settings.replicas)).pipe(
      Effect.retry(untilAnswered),
      Effect.orDie,
    )
    const streamCreated = yield* Effect.tryPromise(() => jsm.streams.info(EVENTS_STREAM)).pipe(
      Effect.map((info) => info.created),
      Effect.retry(untilAnswered),
      Effect.orDie,
    )
    const maxPayload = nc.info?.max_payload ?? 1024 * 1024
    return makeSnapshotStore(kv, {
      service,
      partitions,
      streamCreated,
      chunkBytes: Math.max(16 * 1024, maxPayload - 64 * 1024),
      ...(state === undefined ? {} : { state }),
      keys: makeSnapshotKeys(contentKeys.store, jsm),
      erase: async (seq) => {
        await jsm.streams.deleteMessage(`KV_${SNAPSHOT_BUCKET}`, seq, true).catch(() => undefined)
      },
    })
  })
