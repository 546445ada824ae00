/**
 * Where a text's units lie and which of its terms each holds: the units key points are chosen among
 * (key-points.ts), the text's sentences after a leading speaker ("Ana: "), or the clauses of a text of one
 * sentence. A unit's terms are the text's terms (domain/terms.ts) whose words start inside it.
 *
 * Made from the text alone, a layout is the same whenever it is made, so the memory service works it out
 * once, when it indexes an entry, and a recall then cuts the entry for its focus without segmenting it or
 * finding its terms again.
 */
import { type LocatedTerms, locatedTerms } from "./terms.ts"

export interface TextLayout {
  /**
   * Four numbers a unit, in order: its start and end (exclusive) in the text, then its terms as the first
   * and the last-plus-one of them in the text's located terms. One array: a layout is kept for every long
   * entry an agent recorded, and it costs about 230 bytes.
   */
  readonly units: Uint32Array
  /** False when lower-casing changed the text's length: each unit's terms are then found in its own text. */
  readonly termsKnown: boolean
}

/** The numbers of a unit in `TextLayout.units`. */
export const UNIT_FIELDS = 4

/** A text's layout with the text's terms it indexes into: what a caller that already holds both passes on. */
export interface PreparedText {
  readonly layout: TextLayout
  readonly terms: ReadonlyArray<string>
}

/** "Ana: " or "Dr. Ruiz: " at the start of a transcript line. */
const SPEAKER = /^([^:\n]{1,40}):\s+/

/** The speaker prefix of a text ("Ana: "), or "" when it does not open with one. */
export const speakerOf = (text: string): string => {
  const m = SPEAKER.exec(text)
  return m !== null && m[1]!.trim().split(/\s+/).length <= 4 ? m[0] : ""
}

const sentenceSegmenter = new Intl.Segmenter("en", { granularity: "sentence" })

/** ECMAScript's \s: what String.prototype.trim removes. */
const SPACE = /\s/
const isSpace = (text: string, at: number): boolean => SPACE.test(text[at]!)

/** `text`'s sentences as positions in it, each trimmed, empty ones left out (`at`: where `text` starts in the whole). */
const sentenceRanges = (text: string, at: number, out: number[]): void => {
  for (const { segment, index } of sentenceSegmenter.segment(text)) {
    let start = index
    let end = index + segment.length
    while (start < end && isSpace(text, start)) start++
    while (end > start && isSpace(text, end - 1)) end--
    if (end > start) out.push(at + start, at + end)
  }
}

const CLAUSE_BREAK = /(?<=[,;—–])\s+/g
const CLAUSE_END = /[,;—–]/

/**
 * The clauses of one sentence as positions in it: split after a comma, semicolon or dash and the spaces that
 * follow, each trimmed and without the mark it ends with; empty ones left out.
 */
const clauseRanges = (sentence: string, at: number, out: number[]): void => {
  const push = (from: number, to: number) => {
    let start = from
    let end = to
    while (start < end && isSpace(sentence, start)) start++
    while (end > start && isSpace(sentence, end - 1)) end--
    if (end > start && CLAUSE_END.test(sentence[end - 1]!)) end--
    if (end > start) out.push(at + start, at + end)
  }
  let from = 0
  for (const { index, 0: spaces } of sentence.matchAll(CLAUSE_BREAK)) {
    push(from, index)
    from = index + spaces.length
  }
  push(from, sentence.length)
}

/** The layout of `text`, or null when it has one unit or none (key points of it are the text itself). */
export const layoutOf = (text: string, located: LocatedTerms = locatedTerms(text)): TextLayout | null => {
  const start = text.length - text.trimStart().length
  const whole = text.trim()
  const bodyStart = start + speakerOf(whole).length
  const body = text.slice(bodyStart, start + whole.length)
  const ranges: number[] = []
  sentenceRanges(body, bodyStart, ranges)
  if (ranges.length <= 2) {
    ranges.length = 0
    const lead = body.length - body.trimStart().length
    clauseRanges(body.trim(), bodyStart + lead, ranges)
  }
  if (ranges.length <= 2) return null
  const units = new Uint32Array(ranges.length * 2)
  const starts = located.starts
  // A unit's terms are those whose words start inside it: positions ascend, so one walk finds them.
  let t = 0
  for (let r = 0, u = 0; r < ranges.length; r += 2, u += UNIT_FIELDS) {
    units[u] = ranges[r]!
    units[u + 1] = ranges[r + 1]!
    if (starts === null) continue
    while (t < starts.length && starts[t]! < ranges[r]!) t++
    units[u + 2] = t
    while (t < starts.length && starts[t]! < ranges[r + 1]!) t++
    units[u + 3] = t
  }
  return { units, termsKnown: starts !== null }
}
