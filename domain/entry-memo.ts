/**
 * What a context build reads of each working entry, remembered per entry
 * object: its forms, the terms of its fullest text and its rendered blocks.
 * Working entries are immutable (a read or a rung change makes a new
 * object), so an entry's identity fixes all three, and a build of an
 * unchanged view allocates little beyond its output. Entries that leave the
 * view are forgotten with them (WeakMap).
 */
import type { RepresentationKind, WorkingEntry } from "../contracts/entry.ts"
import { availableForms, formText, fullestText } from "./agent-view.ts"
import { renderBlock } from "./render.ts"
import { type TermStats, termStats } from "./terms.ts"

interface EntryMemo {
  forms?: ReadonlyArray<RepresentationKind>
  stats?: TermStats
  raw?: string
  keyPoints?: string
  summary?: string
}

const memos = new WeakMap<WorkingEntry, EntryMemo>()

const memoOf = (entry: WorkingEntry): EntryMemo => {
  let memo = memos.get(entry)
  if (memo === undefined) {
    memo = {}
    memos.set(entry, memo)
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
  memo[form] ??= renderBlock(entry, form, formText(entry, form))
  return memo[form]
}
