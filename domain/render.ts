/**
 * How working memory is serialised into the prompt context: blocks grouped
 * under a line for each date (and, when a day holds several sittings, for
 * each sitting), one block per entry,
 *
 *   [Mon 2023-05-08]
 *   the raw text of what the agent heard
 *   thought: a raw thought of the agent's own
 *   … a sentence kept from a longer text … another one
 *   summary: a summary
 *
 * Everything in the context that is not memory is kept as small as it can
 * be while staying unambiguous:
 * - what the agent heard (USER, the default origin) carries no label; every
 *   other origin does, so its own thoughts stay apart from what it heard. A
 *   heard text that could be mistaken for a label or a header (it starts
 *   with "thought:", "[", or anything but a letter, digit or "…") gets
 *   "user: ".
 * - key points are whole sentences of the original; "…" marks where text
 *   was left out (see key-points.ts), so they need no label. A summary says
 *   so.
 * - the date is written once per day; the time of day only where it tells
 *   sittings apart: a day whose blocks fall in two or more sittings (more
 *   than an hour apart) gets "[Mon 2023-05-08 09:10]" and then "[14:30]"
 *   before each later sitting.
 *
 * Every block and header ends with a visible character and one newline,
 * and the next begins with a letter, a digit, "…" or "["; the tokenizers'
 * pre-tokenisation never joins such a newline with what follows (checked
 * for every supported encoding by a property test), so the token count of a
 * context is exactly the sum of its parts. Each block is counted once, when
 * its representation is made; the builder adds numbers instead of
 * re-tokenising, and counts header lines once per distinct line.
 */
import type { Encoding } from "../contracts/agent.ts"
import type { Origin, RepresentationKind } from "../contracts/entry.ts"
import { countTokens } from "./tokens.ts"

export const ORIGIN_LABEL: Readonly<Record<Origin, string>> = {
  INTERNAL: "thought",
  USER: "user",
  ADVISOR: "advisor",
  SYSTEM: "system",
}

/** The origin that goes unlabelled: what the agent heard. */
export const DEFAULT_ORIGIN: Origin = "USER"

/** A heard text that starts like a label ("thought:", "summary:") would be read as one. */
const LOOKS_LABELLED = /^(?:user|thought|advisor|system|summary)\b[^:\n]{0,16}:/i
/** A block may start without a label only with one of these (see the token-additivity note above). */
const SAFE_START = /^[\p{L}\p{N}…]/u

/** The label in front of a block's text: "" for a heard raw text or its key points. */
export const blockLabel = (origin: Origin, form: RepresentationKind, text: string): string => {
  const own = origin === DEFAULT_ORIGIN ? "" : ORIGIN_LABEL[origin]
  if (form === "summary") return own.length > 0 ? `${own} (summary): ` : "summary: "
  if (own.length > 0) return `${own}: `
  return SAFE_START.test(text) && !LOOKS_LABELLED.test(text) ? "" : `${ORIGIN_LABEL[origin]}: `
}

const pad = (n: number) => (n < 10 ? `0${n}` : String(n))

const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

const DAY_MS = 86_400_000

/** The UTC day number of a timestamp (days since the epoch): what groups blocks under one date line. */
export const dayOf = (epochMillis: number): number => Math.floor(epochMillis / DAY_MS)

const isoDate = (d: Date) => `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`

/** "[Mon 2023-05-08]\n", or with the time of the day's first sitting, "[Mon 2023-05-08 09:10]\n". */
export const renderDateLine = (epochMillis: number, withTime = false): string => {
  const d = new Date(epochMillis)
  return `[${WEEKDAYS[d.getUTCDay()]} ${isoDate(d)}${withTime ? ` ${formatTime(epochMillis)}` : ""}]\n`
}

/** "[14:30]\n": a later sitting of the day above it. */
export const renderSittingLine = (epochMillis: number): string => `[${formatTime(epochMillis)}]\n`

/** Blocks more than this apart (within a day) belong to different sittings. */
export const SITTING_GAP_MS = 3_600_000

const lineCache = new Map<Encoding, Map<string, number>>()
/** Token cost of a header line (cached: there are few distinct lines). */
export const lineTokens = (line: string, encoding: Encoding): number => {
  let byLine = lineCache.get(encoding)
  if (byLine === undefined) {
    byLine = new Map()
    lineCache.set(encoding, byLine)
  }
  let tokens = byLine.get(line)
  if (tokens === undefined) {
    if (byLine.size > 100_000) byLine.clear()
    tokens = countTokens(line, encoding)
    byLine.set(line, tokens)
  }
  return tokens
}

const dateLineCache = new Map<Encoding, Map<number, number>>()
/** Token cost of a plain date line (cached by day: the line names the day alone). */
export const dateLineTokens = (epochMillis: number, encoding: Encoding): number => {
  let byDay = dateLineCache.get(encoding)
  if (byDay === undefined) {
    byDay = new Map()
    dateLineCache.set(encoding, byDay)
  }
  const day = dayOf(epochMillis)
  let tokens = byDay.get(day)
  if (tokens === undefined) {
    if (byDay.size > 100_000) byDay.clear()
    tokens = lineTokens(renderDateLine(epochMillis), encoding)
    byDay.set(day, tokens)
  }
  return tokens
}

/** UTC minute: "13:56". */
export const formatTime = (epochMillis: number): string => {
  const minutes = Math.floor((((epochMillis % DAY_MS) + DAY_MS) % DAY_MS) / 60_000)
  return `${pad(Math.floor(minutes / 60))}:${pad(minutes % 60)}`
}

export interface Renderable {
  readonly timestamp: number
  readonly origin: Origin
}

/** Surrounding whitespace is dropped so that every block starts and ends in a visible character. */
export const renderBlock = (entry: Renderable, form: RepresentationKind, text: string): string => {
  const body = text.trim()
  return `${blockLabel(entry.origin, form, body)}${body}\n`
}

/** The token cost of a representation as the context builder serialises it. */
export const blockTokens = (entry: Renderable, form: RepresentationKind, text: string, encoding: Encoding): number =>
  countTokens(renderBlock(entry, form, text), encoding)
