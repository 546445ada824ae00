/** What turns text into vectors for long-term retrieval. */
export interface Embedder {
  /** Exactly what produced the vectors; records and queries of different models never mix. */
  readonly model: string
  readonly dims: number
  /** Deterministic: the same text always gives the same L2-normalised vector. */
  readonly embed: (texts: ReadonlyArray<string>) => Promise<ReadonlyArray<Float32Array>>
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
