/**
 * Lexical terms of a text: lower-cased words and numbers, English stopwords
 * removed, Porter-stemmed. Shared by the fade score (relevance to the focus)
 * and lexical retrieval, so both read text the same way.
 */
import { stemmer } from "stemmer"
import { eng } from "stopword"

/** English stopwords: words that carry no term of their own. */
export const STOPWORDS: ReadonlySet<string> = new Set(eng)

/**
 * Words a question is asked with that the stopword list lacks. The statements
 * an agent records seldom say "when" or "does", so as a query's terms they
 * would be rare ones and outweigh what is asked about. Recorded texts keep
 * them as terms, and a query keeps one written as a name ("what did Will say").
 */
const QUESTION_WORDS: ReadonlySet<string> = new Set(["when", "why", "does", "doing", "will"])
/** What ends a sentence, so that the capital after it opens one. */
const SENTENCE_ENDS = new Set([".", "!", "?", ":", ";", "\n"])
const WORD = /[\p{L}\p{N}]+(?:['’][\p{L}]+)?/gu

/** Stems of words seen lately: the same words recur in every text of an agent, and stemming one is most of `terms`. */
const stems = new Map<string, string>()
const REMEMBERED_STEMS = 50_000
/**
 * Only words shorter than this are remembered: a longer match can be a view into the whole text it was
 * found in (V8 slices strings from 13 characters), which a remembered key would keep in memory.
 */
const REMEMBERED_WORD_LENGTH = 13

/** "it's" → "it": the word before an apostrophe (most words have none; no expression is run for them). */
const withoutSuffix = (word: string): string => {
  const straight = word.indexOf("'")
  const curly = word.indexOf("’")
  const at = straight < 0 ? curly : curly < 0 ? straight : Math.min(straight, curly)
  return at < 0 ? word : word.slice(0, at)
}

const stemOf = (word: string): string => {
  if (word.length >= REMEMBERED_WORD_LENGTH) return stemmer(word)
  let stem = stems.get(word)
  if (stem === undefined) {
    stem = stemmer(word)
    if (stems.size >= REMEMBERED_STEMS) stems.clear()
    stems.set(word, stem)
  }
  return stem
}

export const terms = (text: string): string[] => {
  const out: string[] = []
  for (const match of text.toLowerCase().matchAll(WORD)) {
    const word = withoutSuffix(match[0])
    if (word.length === 0 || STOPWORDS.has(word)) continue
    out.push(stemOf(word))
  }
  return out
}

/** A text's terms (as `terms` gives them) with where the word of each starts in the text. */
export interface LocatedTerms {
  readonly terms: ReadonlyArray<string>
  /** Each term's word's position in the text; null where lower-casing changed the text's length ("İ"), so positions in the lower-cased text are not the text's. */
  readonly starts: ReadonlyArray<number> | null
}

export const locatedTerms = (text: string): LocatedTerms => {
  const lowered = text.toLowerCase()
  const out: string[] = []
  const starts: number[] = []
  for (const match of lowered.matchAll(WORD)) {
    const word = withoutSuffix(match[0])
    if (word.length === 0 || STOPWORDS.has(word)) continue
    out.push(stemOf(word))
    starts.push(match.index)
  }
  return { terms: out, starts: lowered.length === text.length ? starts : null }
}

/** The terms of a query (a focus, a search): those of `terms`, without the words a question is asked with. */
export const queryTerms = (text: string): string[] => {
  const lowered = text.toLowerCase()
  // Where lower-casing changed a length ("İ"), positions no longer match the original's capitals.
  const aligned = lowered.length === text.length
  const out: string[] = []
  for (const match of lowered.matchAll(WORD)) {
    const word = withoutSuffix(match[0])
    if (word.length === 0 || STOPWORDS.has(word)) continue
    if (QUESTION_WORDS.has(word) && !(aligned && writtenAsName(text, match.index))) continue
    out.push(stemOf(word))
  }
  return out
}

/**
 * A word capitalised as a name ("Will", not "WILL") after a word of the same
 * sentence: quotes, brackets and marks between are passed over, a sentence's
 * end or the text's start make it a sentence's first word.
 */
const writtenAsName = (text: string, at: number): boolean => {
  if (!/^\p{Lu}\p{Ll}/u.test(text.slice(at, at + 2))) return false
  for (let i = at - 1; i >= 0; i--) {
    const c = text[i]!
    if (SENTENCE_ENDS.has(c)) return false
    if (/[\p{L}\p{N}]/u.test(c)) return true
  }
  return false
}

export interface TermStats {
  readonly terms: ReadonlyArray<string>
  readonly frequencies: ReadonlyMap<string, number>
}

// Entries' texts do not change while their entry lives, and an entry object is
// replaced whenever it is read, so stats are remembered by text; bounded, and
// simply forgotten when full.
const statsCache = new Map<string, TermStats>()
const STATS_CACHE_LIMIT = 50_000

/** The terms of a text and their counts, remembered. */
export const termStats = (text: string): TermStats => {
  let stats = statsCache.get(text)
  if (stats === undefined) {
    const ts = terms(text)
    const frequencies = new Map<string, number>()
    for (const t of ts) frequencies.set(t, (frequencies.get(t) ?? 0) + 1)
    stats = { terms: ts, frequencies }
    if (statsCache.size >= STATS_CACHE_LIMIT) statsCache.clear()
    statsCache.set(text, stats)
  }
  return stats
}

/**
 * The query's words without those a large share of the memory holds (more
 * than `maxShare` of its `documents` entries, by `documentFrequency` of the
 * word's term): a name every other entry carries, such as who is speaking,
 * tells the entries apart no better than "the" does, yet in a sentence
 * vector it weighs as much as the words the query is about, and pulls short
 * entries that hold little else to the top. The query is kept whole when
 * nothing would remain.
 */
export const distinctiveWords = (
  text: string,
  documentFrequency: (term: string) => number,
  documents: number,
  maxShare: number,
): string => {
  if (documents === 0) return text
  const kept: string[] = []
  let dropped = false
  for (const match of text.matchAll(WORD)) {
    const word = withoutSuffix(match[0].toLowerCase())
    if (word.length > 0 && !STOPWORDS.has(word) && documentFrequency(stemOf(word)) / documents > maxShare) {
      dropped = true
      continue
    }
    kept.push(match[0])
  }
  return dropped && kept.some((w) => !STOPWORDS.has(w.toLowerCase())) ? kept.join(" ") : text
}
