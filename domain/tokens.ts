/**
 * Token counting with gpt-tokenizer. Encodings load lazily (about 0.2 s
 * each) and stay loaded. Special-token markers in content are counted as
 * ordinary text, never refused: content is data, not a prompt template.
 *
 * The library's byte-pair merge rescans a whole pre-token after every merge,
 * so one long unbroken run (64 KiB of one letter is a single pre-token) took
 * seconds of synchronous work on whichever service counted it. Pre-tokens
 * longer than `LONG_PIECE_BYTES` are merged by `mergeTokens` instead:
 * the same merges in the same order, in O(n log n), so counts stay exact.
 */
import { createRequire } from "node:module"
import type { Encoding } from "../contracts/agent.ts"
import { mergeTokens } from "./bpe-merge.ts"

interface Tokenizer {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number
  encode(text: string, options?: { disallowedSpecial?: Set<string> }): number[]
}

/** The parts of gpt-tokenizer 4's byte-pair core that the faster merge plugs into (not public API). */
interface BytePairCore {
  mergeCache?: Map<string, number[]>
  bytePairMerge(piece: Uint8Array): number[]
  getBpeRankFromBytes(bytes: Uint8Array): number | undefined
  tryDecodeToken(token: number): string | Uint8Array | undefined
}

/** Below this the library's own merge is as fast (and ordinary words are all far shorter). */
export const LONG_PIECE_BYTES = 128

const require = createRequire(import.meta.url)
const loaded = new Map<Encoding, Tokenizer>()
const ORDINARY_TEXT = { disallowedSpecial: new Set<string>() }
const utf8 = new TextEncoder()

/** Remembered merges (and non-merges, as -1) between two tokens; cleared when it grows past this. */
const MAX_REMEMBERED_PAIRS = 1 << 20

/** Long pre-tokens the merge cache keeps at most (the library bounds it by count alone, 100 000). */
const MAX_CACHED_LONG_PIECES = 32

/**
 * The library's merge cache, with long pieces bounded apart: it keeps up to 100 000 pieces of any
 * length, so distinct 64 KiB runs would each stay in memory with their token ids. Only the most
 * recent few long ones are kept; the same entry's representations, counted moments apart, still
 * find theirs.
 */
class MergeCache extends Map<string, number[]> {
  readonly #long: string[] = []
  /** The key of the last hit, which the library moves to the end of the map by a delete and a set. */
  #hit: string | undefined
  #moving: string | undefined
  override get(key: string): number[] | undefined {
    this.#hit = key
    return super.get(key)
  }
  /**
   * A hit stays where it is: moving it on a map of 100 000 pieces cost more than counting most texts, and
   * pieces leave in the order they came instead of the order last used — a memo either way, counts unchanged.
   */
  override delete(key: string): boolean {
    if (key === this.#hit && super.has(key)) {
      this.#hit = undefined
      this.#moving = key
      return true
    }
    return super.delete(key)
  }
  override set(key: string, value: number[]): this {
    if (key === this.#moving) {
      this.#moving = undefined
      return this
    }
    // A piece of 13 characters or more can be a view into the whole text it was cut from (a V8 sliced
    // string): kept as a key, it would keep that text in memory. Such keys are kept as copies.
    const own = key.length >= SLICED_FROM ? copyOf(key) : key
    if (own.length > LONG_PIECE_BYTES && !super.has(own)) {
      this.#long.push(own)
      while (this.#long.length > MAX_CACHED_LONG_PIECES) super.delete(this.#long.shift()!)
    }
    return super.set(own, value)
  }
}

/** The length from which V8 may make a substring a view into its parent instead of a copy. */
const SLICED_FROM = 13
/** A string with characters of its own. */
const copyOf = (text: string): string => Buffer.from(text, "utf16le").toString("utf16le")

const installFastMerge = (encoding: Encoding, api: object): void => {
  const core = (api as { bytePairEncodingCoreProcessor?: BytePairCore }).bytePairEncodingCoreProcessor
  if (
    core === undefined ||
    typeof core.bytePairMerge !== "function" ||
    typeof core.getBpeRankFromBytes !== "function" ||
    typeof core.tryDecodeToken !== "function"
  ) {
    throw new Error(
      `gpt-tokenizer's ${encoding} has no byte-pair core to install the fast merge into; check the library version`,
    )
  }
  const bytesOf = (token: number): Uint8Array => {
    const decoded = core.tryDecodeToken(token)
    if (decoded === undefined) throw new Error(`${encoding}: no bytes for token ${token}`)
    return typeof decoded === "string" ? utf8.encode(decoded) : decoded
  }
  const byteToken = Array.from({ length: 256 }, (_, b) => {
    const token = core.getBpeRankFromBytes(Uint8Array.of(b))
    if (token === undefined) throw new Error(`${encoding}: byte ${b} is not a token`)
    return token
  })
  const pairs = new Map<number, number>()
  const pairToken = (left: number, right: number): number | undefined => {
    const key = left * 0x100000 + right
    let merged = pairs.get(key)
    if (merged === undefined) {
      const a = bytesOf(left)
      const b = bytesOf(right)
      const joined = new Uint8Array(a.length + b.length)
      joined.set(a)
      joined.set(b, a.length)
      merged = core.getBpeRankFromBytes(joined) ?? -1
      if (pairs.size >= MAX_REMEMBERED_PAIRS) pairs.clear()
      pairs.set(key, merged)
    }
    return merged < 0 ? undefined : merged
  }
  if (core.mergeCache !== undefined) {
    // Filled after construction: Map's constructor would call the overridden `set` before its fields exist.
    const cache = new MergeCache()
    for (const [piece, tokens] of core.mergeCache) cache.set(piece, tokens)
    core.mergeCache = cache
  }
  const reference = core.bytePairMerge.bind(core)
  core.bytePairMerge = (piece: Uint8Array): number[] => {
    if (piece.length <= LONG_PIECE_BYTES) return reference(piece)
    const tokens = new Int32Array(piece.length)
    for (let i = 0; i < piece.length; i++) tokens[i] = byteToken[piece[i]!]!
    return mergeTokens(tokens, pairToken)
  }
}

const tokenizer = (encoding: Encoding): Tokenizer => {
  let t = loaded.get(encoding)
  if (t === undefined) {
    const module = require(`gpt-tokenizer/cjs/encoding/${encoding}`) as { default: object } & Tokenizer
    installFastMerge(encoding, module.default)
    t = module
    loaded.set(encoding, t)
  }
  return t
}

/** Texts up to this long (a word and its space, a date line, a label) are counted once and remembered: most recur. */
const SHORT_TEXT = 24
/** About the distinct short texts of a few thousand entries; past it the memo starts again. */
const REMEMBERED_SHORT_COUNTS = 65_536
const shortCounts = new Map<Encoding, Map<string, number>>()

export const countTokens = (text: string, encoding: Encoding): number => {
  if (text.length > SHORT_TEXT) return tokenizer(encoding).countTokens(text, ORDINARY_TEXT)
  let counts = shortCounts.get(encoding)
  if (counts === undefined) {
    counts = new Map()
    shortCounts.set(encoding, counts)
  }
  const known = counts.get(text)
  if (known !== undefined) return known
  const count = tokenizer(encoding).countTokens(text, ORDINARY_TEXT)
  if (counts.size >= REMEMBERED_SHORT_COUNTS) counts.clear()
  counts.set(text.length >= SLICED_FROM ? copyOf(text) : text, count)
  return count
}

/** Token ids, with the same merge as `countTokens` (for tests and tools). */
export const encodeTokens = (text: string, encoding: Encoding): number[] =>
  tokenizer(encoding).encode(text, ORDINARY_TEXT)

/** Loads an encoding ahead of first use, so the first request does not pay for it. */
export const preloadEncoding = (encoding: Encoding): void => void tokenizer(encoding)

/**
 * A lower bound of `countTokens(text, e)` for every encoding here, without encoding anything: the number of
 * runs of non-whitespace characters, less those opening with "/". Each encoding's pre-tokenizer splits text
 * into pieces that hold at most one leading whitespace character before their first visible one and none
 * after it (a piece of whitespace holds nothing else), so no piece, and no token, spans two runs; the one
 * exception, o200k's punctuation piece that may go on over line breaks into a "/", is not counted.
 */
export const tokensAtLeast = (text: string): number => {
  let runs = 0
  let inRun = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (isWhitespace(c)) inRun = false
    else if (!inRun) {
      inRun = true
      if (c !== SLASH) runs++
    }
  }
  return runs
}

const SLASH = 0x2f

/** What `\s` matches in a regular expression (and so in the encodings' pre-tokenizers). */
const isWhitespace = (c: number): boolean =>
  c === 32 ||
  (c >= 9 && c <= 13) ||
  (c >= 0xa0 &&
    (c === 0xa0 ||
      c === 0x1680 ||
      (c >= 0x2000 && c <= 0x200a) ||
      c === 0x2028 ||
      c === 0x2029 ||
      c === 0x202f ||
      c === 0x205f ||
      c === 0x3000 ||
      c === 0xfeff))
