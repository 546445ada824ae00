/**
 * The KV buckets services share by name, and their key layouts. A bucket
 * is one service's read model or bookkeeping; others read it by these names.
 */

/**
 * Where versions before this one copied the raw text and metadata of every entry; no longer written (the
 * substrate reads the event log). Forgets still erase from it while it exists; an operator may delete it.
 */
export const LEGACY_SUBSTRATE_BUCKET = "wm_substrate"
/** The last stream sequence each durable projection applied. */
export const CHECKPOINT_BUCKET = "wm_checkpoints"
/** What every write with a request id was answered (see domain/requests.ts). */
export const REQUEST_BUCKET = "wm_requests"

/** An entry's key in the legacy substrate bucket. */
export const substrateKey = (agentId: string, entryId: string) => `${agentId}.${entryId}`
/** A projection's key in the checkpoint bucket. */
export const checkpointKey = (projection: string) => `projection.${projection}`
/** Which replica of a service owns which partition, and which replicas are alive (entries expire by the bucket's TTL). */
export const LEASE_BUCKET = "wm_leases"
/** A partition lease's key: one per (service, partition). */
export const leaseKey = (service: string, partition: number) => `${service}.partition.${partition}`
/** A replica's heartbeat key; the live replicas of a service are its heartbeat keys. */
export const heartbeatKey = (service: string, replicaId: string) => `${service}.replica.${replicaId}`
/**
 * Where a replica's work on a partition it holds has reached (its progress report, in the lease bucket, so
 * it expires with a replica that stops): one per (service, partition).
 */
export const progressKey = (service: string, partition: number) => `${service}.progress.${partition}`
/** Every progress report, of every service and partition. */
export const ALL_PROGRESS = "*.progress.*"
/** Snapshots of partitioned projections: a manifest per (service, partition) and the chunks it names. */
export const SNAPSHOT_BUCKET = "wm_snapshots"
/** The manifest of a partition's latest snapshot. */
export const snapshotManifestKey = (service: string, partition: number) => `${service}.${partition}`
/** One chunk of one snapshot (snapshot ids are never reused, so no chunk is overwritten). */
export const snapshotChunkKey = (service: string, partition: number, snapshotId: string, chunk: number) =>
  `${service}.${partition}.${snapshotId}.${chunk}`
/**
 * The content keys (services/platform/keys/): each agent's key, wrapped by a key-encryption key, and each
 * entry's key, wrapped by its agent's key. A forget destroys them; two revisions per key, so the mark that
 * says "destroyed" is stored before the key it replaces is erased.
 */
export const KEY_BUCKET = "wm_keys"
/** An agent's key in the key bucket. */
export const agentKeyName = (agentId: string) => `agent.${agentId}`
/** An entry's key in the key bucket. */
export const entryKeyName = (agentId: string, entryId: string) => `entry.${agentId}.${entryId}`
/** Every entry key of an agent. */
export const agentEntryKeys = (agentId: string) => `entry.${agentId}.>`
