/**
 * Whose texts these are: `query` (the default) is a request waiting for its answer — a step's focus,
 * the working entries a query ranks; `background` is work nobody waits on — a demotion's embedding.
 * An embedder that runs its model in worker threads serves queries first; the offline embedder, which runs
 * on the event loop serving requests, embeds background texts one per turn of the loop (requests first).
 */
export type EmbedPriority = "query" | "background"

export interface EmbedOptions {
  readonly priority?: EmbedPriority
}

/** What turns text into vectors for long-term retrieval. */
export interface Embedder {
  /** Exactly what produced the vectors; records and queries of different models never mix. */
  readonly model: string
  readonly dims: number
  /** Deterministic: the same text always gives the same L2-normalised vector, whatever its priority. */
  readonly embed: (texts: ReadonlyArray<string>, options?: EmbedOptions) => Promise<ReadonlyArray<Float32Array>>
}

export const normalise = (v: Float32Array): Float32Array => {
  let sum = 0
  for (let i = 0; i < v.length; i++) sum += v[i]! * v[i]!
  const norm = Math.sqrt(sum)
  if (norm > 0) for (let i = 0; i < v.length; i++) v[i]! /= norm
  return v
}

export const encodeVector = (v: Float32Array): string =>
  Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64")

export const decodeVector = (base64: string): Float32Array => {
  const bytes = Buffer.from(base64, "base64")
  const copy = new Uint8Array(bytes.byteLength)
  copy.set(bytes)
  return new Float32Array(copy.buffer, 0, copy.byteLength / 4)
}
