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
 * …and in a query (a focus, a search), the words a question is asked with
 * that the list lacks. The statements an agent records seldom say "when" or
 * "does", so as a query's terms they would be rare ones and outweigh what
 * is asked about; in a recorded text they stay terms ("Will" is a name).
 */
const QUERY_STOPWORDS: ReadonlySet<string> = new Set([...eng, "when", "why", "does", "doing", "will"])
const WORD = /[\p{L}\p{N}]+(?:['’][\p{L}]+)?/gu

export const terms = (text: string, stopwords: ReadonlySet<string> = STOPWORDS): string[] => {
  const out: string[] = []
  for (const match of text.toLowerCase().matchAll(WORD)) {
    const word = match[0].replace(/['’].*$/, "")
    if (word.length === 0 || stopwords.has(word)) continue
    out.push(stemmer(word))
  }
  return out
}

/** The terms of a query: a focus, a search (the question words dropped as well). */
export const queryTerms = (text: string): string[] => terms(text, QUERY_STOPWORDS)

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
    const word = match[0].toLowerCase().replace(/['’].*$/, "")
    if (word.length > 0 && !STOPWORDS.has(word) && documentFrequency(stemmer(word)) / documents > maxShare) {
      dropped = true
      continue
    }
    kept.push(match[0])
  }
  return dropped && kept.some((w) => !STOPWORDS.has(w.toLowerCase())) ? kept.join(" ") : text
}
