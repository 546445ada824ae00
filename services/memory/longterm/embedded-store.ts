/**
 * The embedded long-term store: in process, no server. Exact cosine search
 * over a dense Float32 matrix per agent and model (at 100k 100-d records a
 * scan takes a few milliseconds; exact beats approximate at these sizes, and
 * an ANN graph would take a minute to build at every start). It is rebuilt
 * from the event log at start.
 */
import { Effect, Layer } from "effect"
import { type LongTermPayload, matchesFilter } from "../../../contracts/longterm.ts"
import { type Hit, LongTermStore, type LongTermStoreShape } from "./store.ts"

class DenseIndex {
  dims: number
  ids: string[] = []
  matrix: Float32Array
  readonly rowOf = new Map<string, number>()
  constructor(dims: number) {
    this.dims = dims
    this.matrix = new Float32Array(dims * 1024)
  }
  set(id: string, vector: Float32Array) {
    let row = this.rowOf.get(id)
    if (row === undefined) {
      row = this.ids.length
      if ((row + 1) * this.dims > this.matrix.length) {
        const grown = new Float32Array(this.matrix.length * 2)
        grown.set(this.matrix)
        this.matrix = grown
      }
      this.ids.push(id)
      this.rowOf.set(id, row)
    }
    this.matrix.set(vector.subarray(0, this.dims), row * this.dims)
  }
  delete(id: string) {
    const row = this.rowOf.get(id)
    if (row === undefined) return
    const last = this.ids.length - 1
    if (row !== last) {
      const lastId = this.ids[last]!
      this.matrix.copyWithin(row * this.dims, last * this.dims, (last + 1) * this.dims)
      this.ids[row] = lastId
      this.rowOf.set(lastId, row)
    }
    this.ids.pop()
    this.rowOf.delete(id)
  }
  /** Scores of every row against `q`. */
  scores(q: Float32Array): Float32Array {
    const n = this.ids.length
    const d = this.dims
    const m = this.matrix
    const out = new Float32Array(n)
    for (let r = 0; r < n; r++) {
      let s0 = 0
      let s1 = 0
      let s2 = 0
      let s3 = 0
      const base = r * d
      let i = 0
      for (; i + 3 < d; i += 4) {
        s0 += m[base + i]! * q[i]!
        s1 += m[base + i + 1]! * q[i + 1]!
        s2 += m[base + i + 2]! * q[i + 2]!
        s3 += m[base + i + 3]! * q[i + 3]!
      }
      for (; i < d; i++) s0 += m[base + i]! * q[i]!
      out[r] = s0 + s1 + s2 + s3
    }
    return out
  }
}

interface AgentPartition {
  readonly payloads: Map<string, LongTermPayload>
  readonly dense: Map<string, DenseIndex>
}

const newPartition = (): AgentPartition => ({ payloads: new Map(), dense: new Map() })

/** The `limit` best of `n` scored items, best first (ties by entry id, so results are deterministic). */
const topK = (hits: Hit[], limit: number): Hit[] =>
  hits.sort((a, b) => b.score - a.score || (a.payload.entryId < b.payload.entryId ? -1 : 1)).slice(0, limit)

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
        const scores = index.scores(vector)
        const hits: Hit[] = []
        // Keep a bounded candidate list: every score above the running floor of the best `limit`.
        let floor = -Infinity
        for (let r = 0; r < scores.length; r++) {
          const score = scores[r]!
          if (score < floor) continue
          const payload = p.payloads.get(index.ids[r]!)!
          if (filter && !matchesFilter(payload, filter)) continue
          hits.push({ payload, score })
          if (hits.length > limit * 4) {
            topK(hits, limit)
            hits.length = limit
            floor = hits[limit - 1]!.score
          }
        }
        return topK(hits, limit)
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
