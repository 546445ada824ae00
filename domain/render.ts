/**
 * How an entry is serialised into the prompt context: one block per entry,
 *
 *   [2023-05-08 13:56] user: the raw text
 *   [2023-05-08 14:02] thought (key points): the selected sentences
 *
 * The origin label keeps the agent's own thoughts apart from what it heard;
 * the form label says when the text is not the raw one.
 *
 * Every block ends with a visible character and one newline, and the next
 * begins with "["; the tokenizers' pre-tokenisation never joins such a
 * newline with a following "[" (checked for every supported encoding by a
 * property test),
 * so the token count of a context is exactly the sum of its blocks' counts.
 * That lets each block be counted once, when its representation is made,
 * and the context builder add numbers instead of re-tokenising.
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

/** UTC minute precision: "2023-05-08 13:56". */
export const formatTimestamp = (epochMillis: number): string => {
  const d = new Date(epochMillis)
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`
}

export interface Renderable {
  readonly timestamp: number
  readonly origin: Origin
}

/** Trailing whitespace is dropped so that every block ends in a visible character and one newline. */
export const renderBlock = (entry: Renderable, form: RepresentationKind, text: string): string =>
  `[${formatTimestamp(entry.timestamp)}] ${ORIGIN_LABEL[entry.origin]}${FORM_LABEL[form]}: ${text.trimEnd()}\n`

/** The token cost of a representation as the context builder serialises it. */
export const blockTokens = (entry: Renderable, form: RepresentationKind, text: string, encoding: Encoding): number =>
  countTokens(renderBlock(entry, form, text), encoding)
