/**
 * Reads the substrate's store (its KV bucket is its read model, like a
 * Qdrant collection is long-term's): the raw text of any entry by id.
 */

import type { KV } from "@nats-io/kv"
import { Context, Effect, Layer } from "effect"
import type { ResponseOf } from "../../contracts/api.ts"
import { SUBSTRATE_BUCKET, substrateKey } from "../../contracts/buckets.ts"
import { openBucket } from "./nats/buckets.ts"

export type SubstrateRecord = ResponseOf<"getRaw">

export const readSubstrate = (kv: KV, agentId: string, entryId: string) =>
  Effect.promise(async () => {
    const entry = await kv.get(substrateKey(agentId, entryId))
    return entry && entry.operation === "PUT" && entry.value.length > 0 ? (entry.json() as SubstrateRecord) : null
  })

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
