/**
 * Snapshots of a partition's views in the `wm_snapshots` KV bucket:
 *
 *   <service>.<p>                  manifest: { format, partitions, stream, seq, id, chunks, bytes, sha256, agents, at }
 *   <service>.<p>.<id>.<n>         chunk n of snapshot <id>: a slice of the JSON
 *                                  { format, seq, views: [[agentId, encodedView], …] }
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
import { Effect } from "effect"
import { SNAPSHOT_BUCKET, snapshotChunkKey, snapshotManifestKey } from "../../../contracts/buckets.ts"
import { EVENTS_STREAM } from "../../../contracts/subjects.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import { Nats } from "../nats/connection.ts"
import { NatsSettings } from "../nats/settings.ts"
import { decodeView, encodeView } from "./view-codec.ts"

/** 2: views no longer carry the ids of long-term entries nor their subjects' sequences (older snapshots are rebuilt). */
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
}

export interface LoadedSnapshot {
  readonly seq: number
  readonly views: Map<string, AgentView>
  readonly manifest: Manifest
}

export interface SnapshotStore {
  /** The latest snapshot of the partition, or null (none, or one that does not decode: the reason is logged). */
  readonly load: (partition: number) => Effect.Effect<LoadedSnapshot | null>
  /** Writes a snapshot of the views at `seq` and erases the one it replaces. */
  readonly save: (
    partition: number,
    seq: number,
    views: ReadonlyMap<string, AgentView>,
  ) => Effect.Effect<Manifest | null, Error>
  /** Erases the partition's snapshot in place, manifest and chunks: nothing of it is left in the store. */
  readonly drop: (partition: number) => Effect.Effect<void, Error>
  /** Reads a snapshot's views without logging (for `wm verify`). */
  readonly read: (partition: number) => Promise<{ manifest: Manifest; views: Map<string, AgentView> } | string>
}

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder("utf-8", { fatal: true })
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

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
  },
) => {
  const { service, partitions, streamCreated, chunkBytes } = options
  /** Manifest revisions this writer last saw, for its compare-and-set. */
  const revisions = new Map<number, number>()

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

  const read = async (partition: number): Promise<{ manifest: Manifest; views: Map<string, AgentView> } | string> => {
    const { manifest, revision } = await manifestOf(partition)
    revisions.set(partition, revision)
    if (manifest === null) return "no snapshot"
    if (manifest.format !== SNAPSHOT_FORMAT) return `format ${manifest.format}, this code reads ${SNAPSHOT_FORMAT}`
    if (manifest.partitions !== partitions) return `taken with ${manifest.partitions} partitions, not ${partitions}`
    if (manifest.stream !== streamCreated) return "taken of another event stream (recreated or migrated since)"
    const parts: Uint8Array[] = []
    for (let i = 0; i < manifest.chunks; i++) {
      const chunk = await kv.get(snapshotChunkKey(service, partition, manifest.id, i))
      if (chunk === null || chunk.operation !== "PUT") return `chunk ${i} of ${manifest.chunks} is missing`
      parts.push(chunk.value)
    }
    const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
    let at = 0
    for (const p of parts) {
      bytes.set(p, at)
      at += p.length
    }
    if (sha256(bytes) !== manifest.sha256) return "checksum does not match"
    try {
      const body = JSON.parse(textDecoder.decode(bytes)) as { format?: unknown; seq?: unknown; views?: unknown }
      if (body.format !== SNAPSHOT_FORMAT || body.seq !== manifest.seq || !Array.isArray(body.views))
        return "body does not match its manifest"
      const views = new Map<string, AgentView>()
      for (const [agentId, view] of body.views as Array<[string, unknown]>) views.set(agentId, decodeView(view))
      return { manifest, views }
    } catch (error) {
      return `does not decode: ${error instanceof Error ? error.message : String(error)}`
    }
  }

  const load = (partition: number): Effect.Effect<LoadedSnapshot | null> =>
    Effect.promise(async () => {
      const found = await read(partition).catch((error: unknown) => `cannot be read: ${String(error)}`)
      // Chunks no manifest names: left by a writer that died mid-snapshot.
      const named = typeof found === "string" ? "" : `${snapshotManifestKey(service, partition)}.${found.manifest.id}.`
      for (const key of await chunkKeys(partition).catch(() => []))
        if (named === "" || !key.startsWith(named)) await eraseKey(key).catch(() => undefined)
      if (typeof found === "string") {
        if (found !== "no snapshot")
          console.error(`[${service}] snapshot of partition ${partition} ignored (${found}): rebuilding from the log`)
        return null
      }
      return { seq: found.manifest.seq, views: found.views, manifest: found.manifest }
    })

  const save = (partition: number, seq: number, views: ReadonlyMap<string, AgentView>) =>
    Effect.tryPromise({
      try: async (): Promise<Manifest | null> => {
        const body = textEncoder.encode(
          JSON.stringify({
            format: SNAPSHOT_FORMAT,
            seq,
            views: [...views].map(([id, view]) => [id, encodeView(view)]),
          }),
        )
        const id = nuid.next()
        const chunks = Math.max(1, Math.ceil(body.length / chunkBytes))
        for (let i = 0; i < chunks; i++)
          await kv.put(snapshotChunkKey(service, partition, id, i), body.subarray(i * chunkBytes, (i + 1) * chunkBytes))
        const manifest: Manifest = {
          format: SNAPSHOT_FORMAT,
          partitions,
          stream: streamCreated,
          seq,
          id,
          chunks,
          bytes: body.length,
          sha256: sha256(body),
          agents: views.size,
          at: Date.now(),
        }
        const previous = await manifestOf(partition)
        try {
          const revision =
            previous.revision === 0
              ? await kv.create(snapshotManifestKey(service, partition), JSON.stringify(manifest))
              : await kv.update(snapshotManifestKey(service, partition), JSON.stringify(manifest), previous.revision)
          revisions.set(partition, revision)
        } catch (error) {
          // Another writer got there first: keep its snapshot, drop ours.
          for (let i = 0; i < chunks; i++) await eraseKey(snapshotChunkKey(service, partition, id, i))
          if (error instanceof JetStreamApiError) return null
          throw error
        }
        if (previous.manifest !== null)
          for (let i = 0; i < previous.manifest.chunks; i++)
            await eraseKey(snapshotChunkKey(service, partition, previous.manifest.id, i)).catch(() => undefined)
        return manifest
      },
      catch: (error) => new Error(`snapshot of partition ${partition} not written: ${String(error)}`),
    })

  const drop = (partition: number) =>
    Effect.tryPromise({
      try: async () => {
        for (const key of await chunkKeys(partition)) await eraseKey(key)
        await eraseKey(snapshotManifestKey(service, partition))
        revisions.delete(partition)
      },
      catch: (error) => new Error(`snapshot of partition ${partition} not erased: ${String(error)}`),
    })

  return { load, save, drop, read } satisfies SnapshotStore
}

/** The snapshot store of a service, on the service's connection. */
export const openSnapshotStore = (service: string, partitions: number) =>
  Effect.gen(function* () {
    const { js, jsm, nc } = yield* Nats
    const settings = yield* NatsSettings
    const kv = yield* Effect.tryPromise(() => openSnapshotKv(new Kvm(js), settings.replicas)).pipe(Effect.orDie)
    const streamCreated = yield* Effect.tryPromise(() => jsm.streams.info(EVENTS_STREAM)).pipe(
      Effect.map((info) => info.created),
      Effect.orDie,
    )
    const maxPayload = nc.info?.max_payload ?? 1024 * 1024
    return makeSnapshotStore(kv, {
      service,
      partitions,
      streamCreated,
      chunkBytes: Math.max(16 * 1024, maxPayload - 64 * 1024),
      erase: async (seq) => {
        await jsm.streams.deleteMessage(`KV_${SNAPSHOT_BUCKET}`, seq, true).catch(() => undefined)
      },
    })
  })
