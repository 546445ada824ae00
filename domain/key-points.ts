/**
 * Rung 1: extractive key points. Selects whole sentences of the original —
 * nothing is invented or reworded — within a target share of its tokens,
 * and keeps them in their original order. A sentence scores by how many of
 * the text's frequent content terms it carries, with a bonus for the
 * opening sentence (where speakers and topics are usually named). A text of
 * one long sentence falls back to its clauses. A leading speaker ("Ana: ")
 * is always kept: who said it is part of every fact in the text.
 *
 * "…" marks every place text was left out (between kept sentences, before
 * the first, after the last), so the key points read as an extract without
 * a label. Key points are made only when they are smaller than the text:
 * otherwise the text itself is returned, and serving it costs what the raw
 * text costs.
 */
import type { Encoding } from "../contracts/agent.ts"
import { blockTokens, type Renderable } from "./render.ts"
import { locatedTerms, queryTerms, terms } from "./terms.ts"
import { forEachUnit, layoutOf, type PreparedText, speakerOf, type TextLayout, termsKnown } from "./text-layout.ts"
import { countTokens, tokensAtLeast } from "./tokens.ts"

export { speakerOf } from "./text-layout.ts"

interface Unit {
  readonly text: string
  readonly index: number
  /** At most its token count (domain/tokens.ts `tokensAtLeast`), known without encoding it. */
  readonly atLeast: number
  /** The distinct terms of the focus the unit holds (none without a focus). */
  readonly focus: ReadonlySet<string>
  readonly score: number
}

/** The units with their scores: `termsOf` holds each part's distinct terms. */
const scoreUnits = (
  parts: ReadonlyArray<string>,
  termsOf: ReadonlyArray<ReadonlySet<string>>,
  focus: FocusTerms,
): Unit[] => {
  const frequency = new Map<string, number>()
  for (const ts of termsOf) for (const t of ts) frequency.set(t, (frequency.get(t) ?? 0) + 1)
  return parts.map((text, index) => {
    const ts = termsOf[index]!
    let weight = 0
    for (const t of ts) weight += 1 + Math.log(frequency.get(t) ?? 1)
    const density = ts.size === 0 ? 0 : weight / Math.sqrt(ts.size + 1)
    const matched = new Set<string>()
    for (const t of ts) if (focus.has(t)) matched.add(t)
    return { text, index, atLeast: tokensAtLeast(text), focus: matched, score: density + (index === 0 ? 1.5 : 0) }
  })
}

/**
 * What was counted of one text: its units' token counts by their index, and the whole text's, as far as they
 * were needed. Its units are those of one layout (none: the text's own), so a count is of the unit it names.
 */
export interface TokenCounts {
  readonly layout: TextLayout | undefined
  readonly units: Array<number | undefined>
  whole?: number
}

const countsByOwner = new WeakMap<object, Map<Encoding, TokenCounts>>()

/**
 * The counts kept with `owner`, a text its caller holds and reads again (a recalled entry's raw text, read for
 * one focus after another): they last as long as it does, and are kept for one layout of it at a time.
 */
export const tokenCountsOf = (owner: object, encoding: Encoding, layout: TextLayout | undefined): TokenCounts => {
  let byEncoding = countsByOwner.get(owner)
  if (byEncoding === undefined) {
    byEncoding = new Map()
    countsByOwner.set(owner, byEncoding)
  }
  let counts = byEncoding.get(encoding)
  if (counts === undefined || counts.layout !== layout) {
    counts = { layout, units: [] }
    byEncoding.set(encoding, counts)
  }
  return counts
}

/**
 * The units' token counts, each encoded only when a choice needs it: a long text's extract is cut to a few
 * tens of tokens, so most of its sentences are too long to fit by their lower bound alone.
 */
const unitTokens = (encoding: Encoding, counts: TokenCounts) => {
  const tokensOf = (unit: Unit): number => {
    let tokens = counts.units[unit.index]
    if (tokens === undefined) {
      tokens = countTokens(unit.text, encoding)
      counts.units[unit.index] = tokens
    }
    return tokens
  }
  /** Whether `unit` fits in `room` tokens. */
  const fitsIn = (unit: Unit, room: number): boolean => unit.atLeast <= room && tokensOf(unit) <= room
  return { tokensOf, fitsIn }
}

type UnitTokens = ReturnType<typeof unitTokens>

const GAP = "…"

/**
 * A focus as its lexical terms (domain/terms.ts), each with its weight: how
 * much keeping a sentence that holds it is worth. The recall weighs a term by
 * how rare it is among the agent's entries, so the word that names what the
 * question is about outweighs the words every entry shares.
 */
export type FocusTerms = ReadonlyMap<string, number>

/** The terms of a focus (domain/terms.ts `queryTerms`), each of weight 1 unless `weightOf` gives one; a weight that is not a positive number leaves its term out. */
export const focusTerms = (text: string, weightOf: (term: string) => number = () => 1): FocusTerms => {
  const weighed = new Map<string, number>()
  for (const t of queryTerms(text)) {
    const weight = weightOf(t)
    if (Number.isFinite(weight) && weight > 0) weighed.set(t, weight)
  }
  return weighed
}

const NO_FOCUS: FocusTerms = new Map()

/** The key points of `text` within `share` of its tokens (at least one unit is always kept); the text itself when that is not smaller. */
export const extractKeyPoints = (text: string, share: number, encoding: Encoding): string =>
  keyPointsOf(text, share, encoding, NO_FOCUS)

/**
 * The key points of `text` for a focus given by its weighed terms
 * (`FocusTerms`): first the units that add the most weight of the focus's
 * terms to those already kept, then the text's own key sentences; within `share` of its tokens, and the
 * text itself when that is not smaller.
 */
export const focusedKeyPoints = (
  text: string,
  focus: FocusTerms,
  share: number,
  encoding: Encoding,
  cap = Infinity,
  prepared?: PreparedText,
  counts?: TokenCounts,
): string => keyPointsOf(text, share, encoding, focus, cap, prepared, counts)

/**
 * The share of its tokens a recalled entry's key points take: a third. They
 * are cut for the step's focus, so they can be tighter than the half a fading
 * entry keeps for whatever comes next (FadeSettings.keyPointsShare); the
 * builder shows the best hits whole and this extract of the ones after them,
 * so about a third more recalled entries fit a budget.
 */
export const RECALLED_KEY_POINTS_SHARE = 0.35
/**
 * …and at most this many tokens of sentences, about two: a long entry (a
 * tool output, an assistant's long reply) recalled for a question is shown
 * by the passage that bears on it, not by a third of itself.
 */
export const RECALLED_KEY_POINTS_CAP = 32

/** Highest score first, then the earlier. */
const scoreOrder = (a: Unit, b: Unit): number => b.score - a.score || a.index - b.index

/** The units of highest score within `target` tokens (the first always). */
const byScore = (units: ReadonlyArray<Unit>, target: number, { tokensOf, fitsIn }: UnitTokens): Unit[] => {
  const chosen: Unit[] = []
  let used = 0
  for (const unit of [...units].sort(scoreOrder)) {
    if (chosen.length > 0 && !fitsIn(unit, target - used)) continue
    chosen.push(unit)
    used += tokensOf(unit)
  }
  return chosen
}

/**
 * Units chosen one at a time for the weight of the focus's terms they add to
 * those already kept, so two sentences naming the same thing do not crowd out the
 * one that holds the rest of the question; among equals, a unit next to one
 * already kept (the line after a heading, the sentence after the one that
 * names the subject), then the higher score. Once no unit adds a focus term,
 * the rest go by score.
 */
const byFocusCovered = (
  units: ReadonlyArray<Unit>,
  target: number,
  focus: FocusTerms,
  { tokensOf, fitsIn }: UnitTokens,
): Unit[] => {
  const chosen: Unit[] = []
  const kept = new Set<number>()
  const covered = new Set<string>()
  let used = 0
  const fits = (unit: Unit) => chosen.length === 0 || fitsIn(unit, target - used)
  for (;;) {
    let best: Unit | undefined
    let bestAdds = 0
    let bestNext = false
    for (const unit of units) {
      if (kept.has(unit.index)) continue
      // Summed in the focus's order, so units adding the same terms weigh exactly the same.
      let adds = 0
      for (const [t, weight] of focus) if (unit.focus.has(t) && !covered.has(t)) adds += weight
      if (adds <= 0 || !fits(unit)) continue
      const next = kept.has(unit.index - 1) || kept.has(unit.index + 1)
      if (
        best === undefined ||
        adds > bestAdds ||
        (adds === bestAdds && (next !== bestNext ? next : unit.score > best.score))
      ) {
        best = unit
        bestAdds = adds
        bestNext = next
      }
    }
    if (best === undefined) break
    chosen.push(best)
    kept.add(best.index)
    for (const t of best.focus) covered.add(t)
    used += tokensOf(best)
  }
  for (const unit of units.filter((u) => !kept.has(u.index)).sort(scoreOrder)) {
    if (!fits(unit)) continue
    chosen.push(unit)
    used += tokensOf(unit)
  }
  return chosen
}

/** The units of `text` (text-layout.ts) with the distinct terms of each, or null when it has one unit or none. */
const unitsOf = (
  text: string,
  prepared: PreparedText | undefined,
): { readonly parts: string[]; readonly terms: Array<Set<string>> } | null => {
  let layout = prepared?.layout
  let located = prepared?.terms ?? []
  if (layout === undefined) {
    const own = locatedTerms(text)
    const made = layoutOf(text, own)
    if (made === null) return null
    layout = made
    located = own.terms
  }
  const known = termsKnown(layout)
  const parts: string[] = []
  const termSets: Array<Set<string>> = []
  forEachUnit(layout, (start, end, termFrom, termTo) => {
    const part = text.slice(start, end)
    parts.push(part)
    termSets.push(new Set(known ? located.slice(termFrom, termTo) : terms(part)))
  })
  return { parts, terms: termSets }
}

const keyPointsOf = (
  text: string,
  share: number,
  encoding: Encoding,
  focus: FocusTerms,
  cap = Infinity,
  prepared?: PreparedText,
  known?: TokenCounts,
): string => {
  const whole = text.trim()
  const speaker = speakerOf(whole)
  const found = unitsOf(text, prepared)
  if (found === null) return whole
  const { parts } = found
  const units = scoreUnits(parts, found.terms, focus)
  const counted =
    known !== undefined && known.layout === prepared?.layout ? known : { layout: prepared?.layout, units: [] }
  const counts = unitTokens(encoding, counted)
  const target = targetOf(units, share, cap, counts)
  const chosen = focus.size === 0 ? byScore(units, target, counts) : byFocusCovered(units, target, focus, counts)
  chosen.sort((a, b) => a.index - b.index)
  let extract = ""
  let next = 0
  for (const unit of chosen) {
    if (unit.index > next) extract += extract.length === 0 ? `${GAP} ` : ` ${GAP} `
    else if (extract.length > 0) extract += " "
    extract += unit.text
    next = unit.index + 1
  }
  if (next < units.length) extract += ` ${GAP}`
  const keyPoints = `${speaker}${extract}`
  const kept = countTokens(keyPoints, encoding)
  if (kept < tokensAtLeast(whole)) return keyPoints
  counted.whole ??= countTokens(whole, encoding)
  return kept < counted.whole ? keyPoints : whole
}

/**
 * `share` of the units' tokens, at most `cap` and at least one: a text whose lower bound already reaches
 * the cap needs none of its units encoded for it.
 */
const targetOf = (units: ReadonlyArray<Unit>, share: number, cap: number, { tokensOf }: UnitTokens): number => {
  const atLeast = units.reduce((s, u) => s + u.atLeast, 0)
  if (cap >= 1 && Math.floor(atLeast * share) >= cap) return cap
  const total = units.reduce((s, u) => s + tokensOf(u), 0)
  return Math.max(1, Math.min(cap, Math.floor(total * share)))
}

/**
 * What a recalled entry carries besides its raw text: its key points for the
 * step's focus (`focus`: its weighed terms), with the token count of
 * their block, or null when they would not be smaller than the raw text.
 * `prepared`: the raw text's layout and terms when the caller holds them (text-layout.ts); `counts`: what was
 * counted of it before (`tokenCountsOf`).
 */
export const recalledKeyPoints = (
  entry: Renderable,
  raw: string,
  focus: FocusTerms,
  encoding: Encoding,
  prepared?: PreparedText,
  counts?: TokenCounts,
): { readonly text: string; readonly tokens: number } | null => {
  const text = focusedKeyPoints(
    raw,
    focus,
    RECALLED_KEY_POINTS_SHARE,
    encoding,
    RECALLED_KEY_POINTS_CAP,
    prepared,
    counts,
  )
  return text === raw.trim() ? null : { text, tokens: blockTokens(entry, "keyPoints", text, encoding) }
}
