/**
 * The long-term store: one interface, two adapters (the embedded in-process
 * index, and Qdrant). Records are partitioned by agent; a query always names
 * its agent, except a thread fetch by correlation id. Lexical matching is
 * not the store's: retrieval keeps one lexical index over both tiers, so
 * working and long-term hits rank on one scale.
 */
import { Context, type Effect, Schema } from "effect"
import type { LongTermPayload, RecordFilter } from "../../../contracts/longterm.ts"

export interface LongTermRecord {
  readonly payload: LongTermPayload
  /** L2-normalised embedding of the raw text, by `payload.model`. */
  readonly vector: Float32Array
}

export interface Hit {
  readonly payload: LongTermPayload
  readonly score: number
}

export class LongTermStoreError extends Schema.TaggedError<LongTermStoreError>()("LongTermStoreError", {
  reason: Schema.String,
  /**
   * The store refuses these records as they are (a vector of another size, a payload it rejects): trying
   * again cannot succeed. Absent for an outage, a timeout, a refused login — whatever may pass later.
   */
  refused: Schema.optionalKey(Schema.Boolean),
}) {}

/** One write of the long-term projection, in log order. */
export type StoreWrite =
  | { readonly upsert: ReadonlyArray<LongTermRecord> }
  | { readonly remove: { readonly agentId: string; readonly entryIds: ReadonlyArray<string> } }
  | { readonly removeAgent: string }

/** A store that keeps the projection's checkpoint of each partition itself, written atomically with the records. */
export interface CheckpointedStore {
  /**
   * The sequence up to which the store holds every record of the partition
   * in `log` (0 when none). A partition written from another log, or from
   * one shorter than its checkpoint (`lastSeq`), is emptied first.
   */
  readonly resume: (log: string, partition: number, lastSeq: number) => Effect.Effect<number, LongTermStoreError>
  /** Applies the writes and moves the partition's checkpoint to `seq`, in one transaction. */
  readonly commit: (
    writes: ReadonlyArray<StoreWrite>,
    log: string,
    partition: number,
    seq: number,
  ) => Effect.Effect<void, LongTermStoreError>
  /** Drops the partition's checkpoint and the records of its agents, in one transaction. */
  readonly release: (partition: number, agents: ReadonlyArray<string>) => Effect.Effect<void, LongTermStoreError>
}

export interface LongTermStoreShape {
  readonly name: string
  /** Shared by every replica (a server): a partition's records stay when it moves to another replica. */
  readonly shared?: boolean
  /** Present when the store keeps its own checkpoint (the durable embedded store). */
  readonly checkpointed?: CheckpointedStore
  /** Idempotent: a record with the same agent and entry replaces the previous one. */
  readonly upsert: (records: ReadonlyArray<LongTermRecord>) => Effect.Effect<void, LongTermStoreError>
  readonly remove: (agentId: string, entryIds: ReadonlyArray<string>) => Effect.Effect<void, LongTermStoreError>
  /** Removes every record of the agent, of every model, without listing them first; absent: those listed are removed. */
  readonly removeAgent?: (agentId: string) => Effect.Effect<void, LongTermStoreError>
  /** Cosine similarity against records of one embedding model. */
  readonly searchDense: (
    agentId: string,
    model: string,
    vector: Float32Array,
    limit: number,
    filter?: RecordFilter,
  ) => Effect.Effect<ReadonlyArray<Hit>, LongTermStoreError>
  /** Records matching the filter; across agents when `agentId` is omitted. */
  readonly list: (
    query: { readonly agentId?: string } & RecordFilter,
  ) => Effect.Effect<ReadonlyArray<LongTermPayload>, LongTermStoreError>
  /** The records of these entries that exist, in no particular order. */
  readonly get: (
    agentId: string,
    entryIds: ReadonlyArray<string>,
  ) => Effect.Effect<ReadonlyArray<LongTermPayload>, LongTermStoreError>
  /** The embedding models present for an agent. */
  readonly models: (agentId: string) => Effect.Effect<ReadonlyArray<string>, LongTermStoreError>
}

export class LongTermStore extends Context.Service<LongTermStore, LongTermStoreShape>()("wm/LongTermStore") {}
