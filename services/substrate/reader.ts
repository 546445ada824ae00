/**
 * Reads the substrate's store (its KV bucket is its read model, like a
 * Qdrant collection is long-term's): the raw text of any entry by id.
 */
import { Context, Effect, Layer } from "effect"
import { openBucket, SUBSTRATE_BUCKET } from "../nats/buckets.ts"
import { readSubstrate, type SubstrateRecord } from "./substrate.ts"

export class SubstrateReader extends Context.Service<
  SubstrateReader,
  { readonly get: (agentId: string, entryId: string) => Effect.Effect<SubstrateRecord | null> }
>()("wm/SubstrateReader") {
  static readonly layer = Layer.effect(
    SubstrateReader,
    Effect.map(openBucket(SUBSTRATE_BUCKET), (kv) => ({
      get: (agentId: string, entryId: string) => readSubstrate(kv, agentId, entryId),
    })),
  )
}
