/**
 * Token counting with gpt-tokenizer. Encodings load lazily (about 0.2 s
 * each) and stay loaded. Special-token markers in content are counted as
 * ordinary text, never refused: content is data, not a prompt template.
 */
import { createRequire } from "node:module"
import type { Encoding } from "../contracts/agent.ts"

interface Tokenizer {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number
}

const require = createRequire(import.meta.url)
const loaded = new Map<Encoding, Tokenizer>()
const ORDINARY_TEXT = { disallowedSpecial: new Set<string>() }

const tokenizer = (encoding: Encoding): Tokenizer => {
  let t = loaded.get(encoding)
  if (t === undefined) {
    t = require(`gpt-tokenizer/cjs/encoding/${encoding}`) as Tokenizer
    loaded.set(encoding, t)
  }
  return t
}

export const countTokens = (text: string, encoding: Encoding): number =>
  tokenizer(encoding).countTokens(text, ORDINARY_TEXT)

/** Loads an encoding ahead of first use, so the first request does not pay for it. */
export const preloadEncoding = (encoding: Encoding): void => void tokenizer(encoding)
