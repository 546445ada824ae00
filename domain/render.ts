/**
 * How working memory is serialised into the prompt context: entries grouped
 * under a line for each date, one block per entry,
 *
 *   [Mon 2023-05-08]
 *   13:56 user: the raw text
 *   14:02 thought (key points): the selected sentences
 *
 * The origin label keeps the agent's own thoughts apart from what it heard;
 * the form label says when the text is not the raw one. Dates are written
 * once per day rather than in every block: in a dense context the date costs
 * as much as a short entry.
 *
 * Every block and date line ends with a visible character and one newline,
 * and the next begins with a digit or "["; the tokenizers' pre-tokenisation
 * never joins such a newline with what follows (checked for every supported
 * encoding by a property test), so the token count of a context is exactly
 * the sum of its parts. Each block is counted once, when its representation
 * is made; the builder adds numbers instead of re-tokenising.
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

const FORM_LABEL: Readonly<Record<RepresentationKind, string>> = {
  raw: "",
  keyPoints: " (key points)",
  summary: " (summary)",
}

const pad = (n: number) => (n < 10 ? `0${n}` : String(n))

const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

const DAY_MS = 86_400_000

/** The UTC day number of a timestamp (days since the epoch): what groups blocks under one date line. */
export const dayOf = (epochMillis: number): number => Math.floor(epochMillis / DAY_MS)

/** "[Mon 2023-05-08]\n" */
export const renderDateLine = (epochMillis: number): string => {
  const d = new Date(epochMillis)
  return `[${WEEKDAYS[d.getUTCDay()]} ${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}]\n`
}

const dateLineCache = new Map<Encoding, Map<number, number>>()
/** Token cost of a date line (cached: there are few distinct days). */
export const dateLineTokens = (epochMillis: number, encoding: Encoding): number => {
  let byDay = dateLineCache.get(encoding)
  if (byDay === undefined) dateLineCache.set(encoding, (byDay = new Map()))
  const day = dayOf(epochMillis)
  let tokens = byDay.get(day)
  if (tokens === undefined) byDay.set(day, (tokens = countTokens(renderDateLine(epochMillis), encoding)))
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

/** Trailing whitespace is dropped so that every block ends in a visible character and one newline. */
export const renderBlock = (entry: Renderable, form: RepresentationKind, text: string): string =>
  `${formatTime(entry.timestamp)} ${ORIGIN_LABEL[entry.origin]}${FORM_LABEL[form]}: ${text.trimEnd()}\n`

/** The token cost of a representation as the context builder serialises it. */
export const blockTokens = (entry: Renderable, form: RepresentationKind, text: string, encoding: Encoding): number =>
  countTokens(renderBlock(entry, form, text), encoding)
