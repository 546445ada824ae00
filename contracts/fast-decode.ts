/**
 * A fast path for decoding the events a log is mostly made of (entries
 * recorded, reads, steps started and ended, references, and a step's
 * recall: its similarities, its cues, their promotion and drop), checked by hand
 * against the same rules as their Schema. It answers only when every field
 * is present, of its type and within its bounds and there is no other key;
 * anything else (another type, a mood, an odd field) returns undefined, and
 * the caller decodes with the full Schema. test/platform/fast-decode.test.ts proves
 * that whatever it returns deep-equals the Schema decoder's result.
 */
import { MAX_BUDGET } from "./agent.ts"
import type { MemoryEvent } from "./events.ts"
import { characterCount } from "./text.ts"
import type { StoredJson } from "./upcasters.ts"

type Json = Record<string, unknown>

const SUBJECT_TOKEN = /^[A-Za-z0-9_-]{1,64}$/u
const ORIGINS = new Set(["INTERNAL", "USER", "ADVISOR", "SYSTEM"])
const FORMS = new Set(["raw", "keyPoints", "summary"])
const MAX_EPOCH = 8_640_000_000_000_000

const isToken = (x: unknown): boolean => typeof x === "string" && SUBJECT_TOKEN.test(x)
const isEpoch = (x: unknown): boolean => Number.isSafeInteger(x) && (x as number) >= 0 && (x as number) <= MAX_EPOCH
const isCount = (x: unknown): boolean => Number.isSafeInteger(x) && (x as number) >= 0
const isNullOrString = (x: unknown): boolean => x === null || typeof x === "string"
const isObject = (x: unknown): x is Json => typeof x === "object" && x !== null && !Array.isArray(x)
/** Exactly `n` own keys: with every expected one checked present, no other key is there. */
const hasKeys = (o: Json, n: number): boolean => {
  let count = 0
  for (const key in o) if (Object.hasOwn(o, key)) count++
  return count === n
}
const isFocusText = (x: unknown): boolean => {
  if (typeof x !== "string") return false
  if (x.length <= 4_000 && x.length >= 1) return true
  const n = characterCount(x)
  return n >= 1 && n <= 4_000
}

/** The seven envelope keys plus `_tag`, at version 1. */
const ENVELOPE_KEYS = 7
const envelopeOk = (e: Json): boolean =>
  e.v === 1 &&
  typeof e.eventId === "string" &&
  e.eventId.length >= 1 &&
  e.eventId.length <= 200 &&
  isToken(e.agentId) &&
  isEpoch(e.at) &&
  isNullOrString(e.causationId) &&
  isNullOrString(e.correlationId)

const entryRecorded = (e: Json): boolean => {
  if (!hasKeys(e, ENVELOPE_KEYS + 8) || !isToken(e.entryId) || !isEpoch(e.timestamp)) return false
  if (typeof e.origin !== "string" || !ORIGINS.has(e.origin) || typeof e.content !== "string") return false
  if (e.moodSnapshot !== null || !isCount(e.tokens)) return false
  const w = e.emotionalWeight
  if (typeof w !== "number" || !(w >= 0 && w <= 1)) return false
  const tags = e.tags
  if (!Array.isArray(tags)) return false
  for (const t of tags) if (typeof t !== "string") return false
  return true
}

const servedItem = (s: unknown): boolean =>
  isObject(s) &&
  hasKeys(s, 3) &&
  isToken(s.entryId) &&
  typeof s.form === "string" &&
  FORMS.has(s.form) &&
  typeof s.cue === "boolean"

const entriesRead = (e: Json): boolean => {
  if (!hasKeys(e, ENVELOPE_KEYS + 4) || !(e.stepId === null || isToken(e.stepId)) || !isCount(e.tokens)) return false
  const b = e.budget
  if (!Number.isSafeInteger(b) || (b as number) < 16 || (b as number) > MAX_BUDGET) return false
  const served = e.served
  if (!Array.isArray(served)) return false
  for (const s of served) if (!servedItem(s)) return false
  return true
}

const focus = (f: unknown): boolean => {
  if (f === null) return true
  if (!isObject(f)) return false
  let n = 0
  for (const key of ["task", "subgoal", "query"]) {
    if (!Object.hasOwn(f, key)) continue
    if (!isFocusText(f[key])) return false
    n++
  }
  return hasKeys(f, n)
}

const TRIGGERS = new Set(["explicit-reference", "similarity", "task-transition", "warm-up"])
const isTrigger = (x: unknown): boolean => typeof x === "string" && TRIGGERS.has(x)
const isText = (x: unknown, tokens: unknown): boolean => typeof x === "string" && isCount(tokens)

/** What a cue carries back (RecalledEntry), without a mood. */
const recalled = (r: unknown): boolean => {
  if (!isObject(r)) return false
  const keyPoints = r.keyPoints
  if (
    keyPoints !== undefined &&
    !(isObject(keyPoints) && hasKeys(keyPoints, 2) && isText(keyPoints.text, keyPoints.tokens))
  )
    return false
  if (!hasKeys(r, keyPoints === undefined ? 8 : 9) || !isEpoch(r.timestamp) || r.moodSnapshot !== null) return false
  if (typeof r.origin !== "string" || !ORIGINS.has(r.origin) || typeof r.form !== "string" || !FORMS.has(r.form))
    return false
  const w = r.emotionalWeight
  if (typeof w !== "number" || !(w >= 0 && w <= 1) || !isText(r.text, r.tokens)) return false
  const tags = r.tags
  if (!Array.isArray(tags)) return false
  for (const t of tags) if (typeof t !== "string") return false
  return true
}

const cueRehydrated = (e: Json): boolean =>
  hasKeys(e, ENVELOPE_KEYS + 5) &&
  isToken(e.stepId) &&
  isToken(e.entryId) &&
  isTrigger(e.trigger) &&
  Number.isFinite(e.relevance) &&
  recalled(e.recalled)

const cuePromoted = (e: Json): boolean =>
  hasKeys(e, ENVELOPE_KEYS + 4) &&
  (e.stepId === null || isToken(e.stepId)) &&
  isToken(e.entryId) &&
  isTrigger(e.trigger) &&
  recalled(e.recalled)

const CHECKS: Readonly<Record<string, (e: Json) => boolean>> = {
  EntryRecorded: entryRecorded,
  EntriesRead: entriesRead,
  StepStarted: (e) => hasKeys(e, ENVELOPE_KEYS + 2) && isToken(e.stepId) && focus(e.focus),
  StepEnded: (e) => hasKeys(e, ENVELOPE_KEYS + 1) && isToken(e.stepId),
  EntriesReferenced: (e) => {
    if (!hasKeys(e, ENVELOPE_KEYS + 2) || !isToken(e.stepId) || !Array.isArray(e.entryIds)) return false
    for (const id of e.entryIds) if (!isToken(id)) return false
    return true
  },
  CueRehydrated: cueRehydrated,
  CuePromoted: cuePromoted,
  StepRecalled: (e) => {
    if (!hasKeys(e, ENVELOPE_KEYS + 3) || !isToken(e.stepId) || !isTrigger(e.trigger)) return false
    if (!Array.isArray(e.similarities)) return false
    for (const s of e.similarities)
      if (!(isObject(s) && hasKeys(s, 2) && isToken(s.entryId) && Number.isFinite(s.similarity))) return false
    return true
  },
  CuesDropped: (e) => {
    if (!hasKeys(e, ENVELOPE_KEYS + 2) || !isToken(e.stepId) || !Array.isArray(e.entryIds)) return false
    if (e.entryIds.length === 0) return false
    for (const id of e.entryIds) if (!isToken(id)) return false
    return true
  },
}

/**
 * The event, when `json` (at its type's current version) is one of the
 * common shapes and valid; undefined when the full Schema must decide.
 */
export const decodeCommonShape = (json: StoredJson): MemoryEvent | undefined => {
  const check = typeof json._tag === "string" ? CHECKS[json._tag] : undefined
  return check !== undefined && envelopeOk(json) && check(json) ? (json as unknown as MemoryEvent) : undefined
}
