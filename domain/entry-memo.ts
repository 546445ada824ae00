/**
 * What a context build reads of each working entry, remembered: its forms,
 * the terms of its fullest text and its rendered blocks. All three follow
 * from the entry's origin and texts alone. A read or a citation copies the
 * entry with new counts but the same texts and the same token counts
 * object; a rung change or a recall makes new texts with a new token counts
 * object. So the memo is held by the token counts object (WeakMap: it goes
 * with the last entry that shares it) and checked against the texts it was
 * made from, and a build after a read of the view meets what it made
 * before.
 */
import type { RepresentationKind, WorkingEntry } from "../contracts/entry.ts"
import { availableForms, formText, fullestText } from "./agent-view.ts"
import { renderBlock } from "./render.ts"
import { type TermStats, termStats } from "./terms.ts"

interface EntryMemo {
  readonly origin: WorkingEntry["origin"]
  readonly content: string | null
  readonly keyPoints: string | null
  readonly summary: string | null
  forms?: ReadonlyArray<RepresentationKind>
  stats?: TermStats
  raw?: string
  keyPointsBlock?: string
  summaryBlock?: string
}

const memos = new WeakMap<WorkingEntry["tokens"], EntryMemo>()

const memoOf = (entry: WorkingEntry): EntryMemo => {
  let memo = memos.get(entry.tokens)
  if (
    memo === undefined ||
    memo.content !== entry.content ||
    memo.keyPoints !== entry.keyPoints ||
    memo.summary !== entry.summary ||
    memo.origin !== entry.origin
  ) {
    memo = { origin: entry.origin, content: entry.content, keyPoints: entry.keyPoints, summary: entry.summary }
    memos.set(entry.tokens, memo)
  }
  return memo
}

/** `availableForms`, remembered: the forms working holds for an entry, fullest first. */
export const formsOf = (entry: WorkingEntry): ReadonlyArray<RepresentationKind> => {
  const memo = memoOf(entry)
  memo.forms ??= availableForms(entry)
  return memo.forms
}

/** The lexical terms of the text working holds for an entry, remembered. */
export const statsOf = (entry: WorkingEntry): TermStats => {
  const memo = memoOf(entry)
  memo.stats ??= termStats(fullestText(entry))
  return memo.stats
}

/** `renderBlock` of an entry in one of its forms, remembered. */
export const blockOf = (entry: WorkingEntry, form: RepresentationKind): string => {
  const memo = memoOf(entry)
  switch (form) {
    case "raw":
      memo.raw ??= renderBlock(entry, form, formText(entry, form))
      return memo.raw
    case "keyPoints":
      memo.keyPointsBlock ??= renderBlock(entry, form, formText(entry, form))
      return memo.keyPointsBlock
    case "summary":
      memo.summaryBlock ??= renderBlock(entry, form, formText(entry, form))
      return memo.summaryBlock
  }
}
