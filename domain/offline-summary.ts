/**
 * The offline summariser used when no remote model is configured (or it
 * fails): a telegraphic compression of the key points. It keeps the opening
 * words that name who speaks, then the content words in their original
 * order, dropping function words, until the target share of tokens. Every
 * event it produces says it is the offline one.
 */
import type { Encoding } from "../contracts/agent.ts"
import { eng } from "stopword"
import { extractKeyPoints } from "./key-points.ts"
import { countTokens } from "./tokens.ts"

export const OFFLINE_SUMMARY_MODEL = "offline-telegraphic-v1"
const STOPWORDS = new Set(eng)

export const offlineSummary = (text: string, share: number, encoding: Encoding): string => {
  const source = extractKeyPoints(text, Math.min(1, share * 2), encoding)
  const budget = Math.max(4, Math.floor(countTokens(text, encoding) * share))
  const speaker = /^([^:\n]{1,40}):\s/.exec(source)
  const body = speaker ? source.slice(speaker[0].length) : source
  const words = body.split(/\s+/).filter((w) => w.length > 0 && w !== "…")
  const kept: string[] = []
  let text_ = speaker ? `${speaker[1]}:` : ""
  for (const word of words) {
    const bare = word.toLowerCase().replace(/[^\p{L}\p{N}']/gu, "")
    if (bare.length === 0 || STOPWORDS.has(bare)) continue
    const next = text_.length === 0 ? word : `${text_} ${word}`
    if (countTokens(next, encoding) > budget && kept.length > 0) break
    kept.push(word)
    text_ = next
  }
  return text_.length > 0 ? text_ : source
}
