/**
 * The offline summariser used when no remote model is configured (or it
 * fails): a telegraphic compression that keeps the facts. Every word that
 * carries a fact — a number, a date, a name (a capitalised word that is not
 * just opening its sentence), an acronym — is kept, with the word after a
 * number (its unit: "12 business"); then the other content words, in
 * their original order, while the target share of tokens lasts (and a few
 * beyond it, so the facts keep their relation); function words go first. A leading speaker ("Ana: ") is kept. When even the facts
 * alone would not be smaller than the text, the summary keeps those that fit
 * and says how many it dropped. Every event it produces says it is the
 * offline one.
 */

import type { Encoding } from "../contracts/agent.ts"
import { speakerOf } from "./key-points.ts"
import { STOPWORDS } from "./terms.ts"
import { countTokens } from "./tokens.ts"

export const OFFLINE_SUMMARY_MODEL = "offline-facts-v2"

interface Word {
  readonly text: string
  readonly index: number
  /** 0: a fact; 1: the unit after a number; 2: another content word; 3: a function word. */
  readonly rank: 0 | 1 | 2 | 3
}

const bare = (word: string) => word.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, "")

/** Whether a word carries a fact: a digit, or a capital that does not just open a sentence (or is an acronym). */
const isFact = (word: string, opensSentence: boolean): boolean => {
  const b = bare(word)
  if (b.length === 0) return false
  if (/\p{N}/u.test(b)) return true
  if (!/^\p{Lu}/u.test(b)) return false
  if (b.length > 1 && b === b.toUpperCase()) return true
  return !(opensSentence && STOPWORDS.has(b.toLowerCase())) && !(opensSentence && b === "I")
}

export const classifyWords = (body: string): Word[] => {
  const words = body.split(/\s+/).filter((w) => w.length > 0)
  let opens = true
  let afterNumber = false
  return words.map((text, index) => {
    const b = bare(text)
    const fact = isFact(text, opens) && !(b === "I")
    const content = b.length > 0 && !STOPWORDS.has(b.toLowerCase())
    const rank: Word["rank"] = fact ? 0 : afterNumber && content ? 1 : content ? 2 : 3
    afterNumber = /\p{N}/u.test(b)
    opens = /[.!?…:]["')\]]*$/u.test(text)
    return { text, index, rank }
  })
}

/** The kept words, in their original order, after the speaker. */
const render = (speaker: string, words: ReadonlyArray<Word>, keep: ReadonlySet<number>): string =>
  `${speaker}${words
    .filter((w) => keep.has(w.index))
    .map((w) => w.text)
    .join(" ")}`.trim()

export const offlineSummary = (text: string, share: number, encoding: Encoding): string => {
  const whole = text.trim()
  const speaker = speakerOf(whole)
  const words = classifyWords(whole.slice(speaker.length))
  const sourceTokens = countTokens(whole, encoding)
  const budget = Math.max(4, Math.floor(sourceTokens * share))
  // A number's unit belongs to the fact ("12 business days" rather than "12").
  const facts = words.filter((w) => w.rank <= 1)
  const keep = new Set(facts.map((w) => w.index))
  let summary = render(speaker, words, keep)
  if (countTokens(summary, encoding) >= sourceTokens) {
    // Too dense in facts to shorten them all: keep those that fit, and say so.
    keep.clear()
    let kept = 0
    for (const w of facts) {
      keep.add(w.index)
      const next = `${render(speaker, words, keep)} (${facts.length - kept - 1} names/numbers dropped)`
      if (countTokens(next, encoding) >= sourceTokens) {
        keep.delete(w.index)
        break
      }
      kept++
    }
    return `${render(speaker, words, keep)} (${facts.length - kept} names/numbers dropped)`
  }
  // Then units, then other content words, in text order, while the budget lasts (word costs add up
  // to about the whole's; the exact count is checked at the end).
  let used = countTokens(summary, encoding)
  const added: Word[] = []
  // Names and numbers alone do not say how they relate: a few content words are allowed beyond the share.
  const room = Math.min(sourceTokens - 1, Math.max(budget, used + Math.ceil(0.15 * sourceTokens)))
  for (const rank of [2] as const) {
    for (const w of words) {
      if (w.rank !== rank) continue
      const cost = countTokens(` ${w.text}`, encoding)
      if (used + cost > room) continue
      used += cost
      keep.add(w.index)
      added.push(w)
    }
  }
  summary = render(speaker, words, keep)
  while (added.length > 0 && countTokens(summary, encoding) > room) {
    keep.delete(added.pop()!.index)
    summary = render(speaker, words, keep)
  }
  return summary.length > 0 ? summary : whole
}
