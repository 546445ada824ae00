/**
 * The embedded long-term store: in process, no server. Exact cosine search
 * over a dense Float32 matrix per agent and model (dense-index.ts). It is
 * rebuilt from the event log at start.
 */
import { Effect, Layer } from "effect"
import { type LongTermPayload, matchesFilter } from "../../../contracts/longterm.ts"
import { DenseIndex } from "./dense-index.ts"
import { type Hit, LongTermStore, type LongTermStoreShape } from "./store.ts"

interface AgentPartition {
  readonly payloads: Map<string, LongTermPayload>
  readonly dense: Map<string, DenseIndex>
}

const newPartition = (): AgentPartition => ({ payloads: new Map(), dense: new Map() })

export const makeEmbeddedStore = (): LongTermStoreShape => {
  const partitions = new Map<string, AgentPartition>()
  const partition = (agentId: string) => {
    let p = partitions.get(agentId)
    if (p === undefined) {
      p = newPartition()
      partitions.set(agentId, p)
    }
    return p
  }
  const removeOne = (p: AgentPartition, entryId: string) => {
    const previous = p.payloads.get(entryId)
    if (previous === undefined) return
    p.dense.get(previous.model)?.delete(entryId)
    p.payloads.delete(entryId)
  }

  return {
    name: "embedded",
    upsert: (records) =>
      Effect.sync(() => {
        for (const r of records) {
          const p = partition(r.payload.agentId)
          removeOne(p, r.payload.entryId)
          p.payloads.set(r.payload.entryId, r.payload)
          let index = p.dense.get(r.payload.model)
          if (index === undefined) {
            index = new DenseIndex(r.vector.length)
            p.dense.set(r.payload.model, index)
          }
          index.set(r.payload.entryId, r.vector)
        }
      }),
    remove: (agentId, entryIds) =>
      Effect.sync(() => {
        const p = partitions.get(agentId)
        if (p) for (const id of entryIds) removeOne(p, id)
      }),
    searchDense: (agentId, model, vector, limit, filter) =>
      Effect.sync(() => {
        const p = partitions.get(agentId)
        const index = p?.dense.get(model)
        if (!p || !index || index.ids.length === 0) return []
        const accept = filter ? (id: string) => matchesFilter(p.payloads.get(id)!, filter) : undefined
        return index.search(vector, limit, accept).map((h): Hit => ({ payload: p.payloads.get(h.id)!, score: h.score }))
      }),
    list: (query) =>
      Effect.sync(() => {
        const sources =
          query.agentId !== undefined
            ? [partitions.get(query.agentId)].filter((p) => p !== undefined)
            : [...partitions.values()]
        const out: LongTermPayload[] = []
        for (const p of sources)
          for (const payload of p.payloads.values()) if (matchesFilter(payload, query)) out.push(payload)
        return out.sort((a, b) => a.timestamp - b.timestamp || (a.entryId < b.entryId ? -1 : 1))
      }),
    get: (agentId, entryIds) =>
      Effect.sync(() => {
        const p = partitions.get(agentId)
        return p ? entryIds.flatMap((id) => p.payloads.get(id) ?? []) : []
      }),
    models: (agentId) => Effect.sync(() => [...(partitions.get(agentId)?.dense.keys() ?? [])]),
  }
}

export const embeddedStoreLayer = Layer.sync(LongTermStore, makeEmbeddedStore)
