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
  const kept: string[] = speaker ? [`${speaker[1]}:`] : []
  // Words are counted one by one with their leading space (a word and its space form one pre-token),
  // not the growing text again for each word, which was quadratic in the text's length. The sum is
  // the target only: the event carries the summary's own exact count.
  let used = kept.length > 0 ? countTokens(kept[0]!, encoding) : 0
  let keptWords = 0
  for (const word of words) {
    const bare = word.toLowerCase().replace(/[^\p{L}\p{N}']/gu, "")
    if (bare.length === 0 || STOPWORDS.has(bare)) continue
    const cost = countTokens(kept.length === 0 ? word : ` ${word}`, encoding)
    if (used + cost > budget && keptWords > 0) break
    kept.push(word)
    used += cost
    keptWords++
  }
  return kept.length > 0 ? kept.join(" ") : source
}
