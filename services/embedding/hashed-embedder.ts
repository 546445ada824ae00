/**
 * A dependency-free lexical embedder: feature hashing of stemmed terms and
 * term bigrams into a fixed number of dimensions, sublinear term weights,
 * L2-normalised. Deterministic and instant; the floor any learned model
 * must beat.
 */
import { terms } from "../../domain/terms.ts"
import { normalise, type Embedder } from "./embedder.ts"

const fnv1a = (s: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

export const hashedVector = (text: string, dims: number): Float32Array => {
  const v = new Float32Array(dims)
  const ts = terms(text)
  const features = [...ts, ...ts.slice(1).map((t, i) => `${ts[i]}_${t}`)]
  const counts = new Map<string, number>()
  for (const f of features) counts.set(f, (counts.get(f) ?? 0) + 1)
  for (const [f, c] of counts) {
    const h = fnv1a(f)
    const i = h % dims
    v[i] = v[i]! + (h & 0x80000000 ? -1 : 1) * (1 + Math.log(c)) * (f.includes("_") ? 0.5 : 1)
  }
  return normalise(v)
}

export const hashedEmbedder = (dims = 512): Embedder => ({
  model: `hashed-terms-${dims}`,
  dims,
  embed: async (texts) => texts.map((t) => hashedVector(t, dims)),
})
