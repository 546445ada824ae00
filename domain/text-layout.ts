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

/**
 * A layout, packed in a string of one UTF-16 code unit a number (the memory service keeps one for every entry
 * of more than one unit, and such a string costs a few tens of bytes where a typed array costs a few hundred):
 * first 1 when the units' terms are known, 0 when lower-casing changed the text's length (each unit's terms
 * are then found in its own text); then four numbers a unit, in order: its start and end (exclusive) in the
 * text, and its terms as the first and the last-plus-one of them in the text's located terms. A text longer
 * than a code unit counts (65,535 characters) has no layout.
 */
export type TextLayout = string & { readonly TextLayout: unique symbol }

const UNIT_FIELDS = 4
const LONGEST = 0xffff

/** Whether the layout's units' terms are ranges of the text's located terms. */
export const termsKnown = (layout: TextLayout): boolean => layout.charCodeAt(0) === 1

/** Calls `f` with each unit of the layout, in order: where it lies in the text, and its range of located terms. */
export const forEachUnit = (
  layout: TextLayout,
  f: (start: number, end: number, termFrom: number, termTo: number) => void,
): void => {
  for (let i = 1; i + UNIT_FIELDS <= layout.length; i += UNIT_FIELDS)
    f(layout.charCodeAt(i), layout.charCodeAt(i + 1), layout.charCodeAt(i + 2), layout.charCodeAt(i + 3))
}

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

/** `text` from `from` to `to` without the spaces around it, as positions in it (empty: start equals end). */
const trimmed = (text: string, from: number, to: number): readonly [number, number] => {
  let start = from
  let end = to
  while (start < end && isSpace(text, start)) start++
  while (end > start && isSpace(text, end - 1)) end--
  return [start, end]
}

/** `text`'s sentences as positions in it, each trimmed, empty ones left out (`at`: where `text` starts in the whole). */
const sentenceRanges = (text: string, at: number, out: number[]): void => {
  for (const { segment, index } of sentenceSegmenter.segment(text)) {
    const [start, end] = trimmed(text, index, index + segment.length)
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
    let [start, end] = trimmed(sentence, from, to)
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
  if (text.length > LONGEST) return null
  const start = text.length - text.trimStart().length
  const whole = text.trim()
  const bodyStart = start + speakerOf(whole).length
  // Trimmed at both ends: the speaker prefix takes the spaces after it.
  const body = text.slice(bodyStart, start + whole.length)
  const ranges: number[] = []
  sentenceRanges(body, bodyStart, ranges)
  if (ranges.length <= 2) {
    ranges.length = 0
    clauseRanges(body, bodyStart, ranges)
  }
  if (ranges.length <= 2) return null
  const starts = located.starts
  const codes: number[] = [starts === null ? 0 : 1]
  // A unit's terms are those whose words start inside it: positions ascend, so one walk finds them.
  let t = 0
  for (let r = 0; r < ranges.length; r += 2) {
    codes.push(ranges[r]!, ranges[r + 1]!)
    if (starts === null) {
      codes.push(0, 0)
      continue
    }
    while (t < starts.length && starts[t]! < ranges[r]!) t++
    const from = t
    while (t < starts.length && starts[t]! < ranges[r + 1]!) t++
    codes.push(from, t)
  }
  let packed = ""
  // In slices: a text of thousands of short sentences would pass a call's limit on arguments.
  for (let i = 0; i < codes.length; i += 8_192) packed += String.fromCharCode(...codes.slice(i, i + 8_192))
  return packed as TextLayout
}
