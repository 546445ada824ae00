/**
 * LongMemEval (Wu et al., ICLR 2025) in its official format — the S, M and
 * oracle files alike, `.json` or `.json.gz` — as benchmark conversations:
 * one per question, its haystack sessions in date order, each turn recorded
 * at its session's date — what the user said as heard (no label), what the
 * assistant said as "Assistant: …" — a turn every
 * TURN_STEP_MS inside a session), the turns marked `has_answer` as the
 * evidence and `answer_session_ids` as the evidence sessions. The question
 * is asked at its `question_date`.
 *
 * Abstention questions (ids ending in `_abs`) have no evidence to serve:
 * they are counted and left out. A turn with no text is left out too (the
 * API refuses empty content). A file of another shape, or an item with a
 * missing or malformed field, is a DatasetFormatError naming the file and
 * the field ("[3].haystack_sessions[2][5].role").
 */
import { readFileSync } from "node:fs"
import { gunzipSync } from "node:zlib"
import { blockTokens } from "../../domain/render.ts"
import { type Conversation, DatasetFormatError, ENCODING, type Question, type Turn, turnTimes } from "./dataset.ts"

export class LongMemEvalFormatError extends DatasetFormatError {
  override readonly name = "LongMemEvalFormatError"
}

/** The suffix of an abstention question's id. */
const ABSTENTION = /_abs$/

/** "2023/05/30 (Tue) 23:40" (the weekday optional) as epoch milliseconds, UTC. Throws with the reason. */
export const parseLongMemEvalDate = (text: string): number => {
  const m = /^(\d{4})\/(\d{1,2})\/(\d{1,2})\s*(?:\([A-Za-z]{2,9}\))?\s*(?:(\d{1,2}):(\d{2}))?$/.exec(text.trim())
  if (m === null) throw new Error(`expected a date such as '2023/05/30 (Tue) 23:40', got '${text}'`)
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4] ?? "0", m[5] ?? "0"].map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ]
  const ms = Date.UTC(year, month - 1, day, hour, minute)
  const d = new Date(ms)
  if (d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day || hour > 23 || minute > 59)
    throw new Error(`no such date or time: '${text}'`)
  return ms
}

/** What a turn is recorded as: the user's words as heard, the assistant's under its name. */
export const longMemEvalContent = (role: "user" | "assistant", text: string): string =>
  role === "user" ? text : `Assistant: ${text}`

type Json = Record<string, unknown>
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

export interface LongMemEvalSet {
  /** One conversation per question asked, in file order. */
  readonly conversations: ReadonlyArray<Conversation>
  /** Ids of the abstention questions left out. */
  readonly abstentions: ReadonlyArray<string>
  /** Turns left out because they hold no text. */
  readonly emptyTurns: number
}

/** One item of the file, checked, as a conversation (or null for an abstention question). */
const parseItem = (
  item: unknown,
  file: string,
  at: string,
): { conversation: Conversation | null; id: string; empty: number } => {
  const fail = (field: string, reason: string): never => {
    throw new LongMemEvalFormatError(file, `${at}${field}`, reason)
  }
  if (!isObject(item)) return fail("", "expected an object")
  const text = (field: string): string => {
    const value = item[field]
    if (typeof value !== "string" || value.trim().length === 0)
      return fail(field, value === undefined ? "missing" : "expected a non-empty string")
    return value
  }
  const id = text("question_id")
  const type = text("question_type")
  const question = text("question")
  let askedAt: number
  try {
    askedAt = parseLongMemEvalDate(text("question_date"))
  } catch (error) {
    if (error instanceof LongMemEvalFormatError) throw error
    return fail("question_date", (error as Error).message)
  }
  const answer = item.answer
  if (typeof answer !== "string" && !(typeof answer === "number" && Number.isFinite(answer)))
    fail("answer", answer === undefined ? "missing" : "expected a string or a number")
  const list = (field: string): unknown[] => {
    const value = item[field]
    if (!Array.isArray(value)) return fail(field, value === undefined ? "missing" : "expected an array")
    return value
  }
  const sessions = list("haystack_sessions")
  const dates = list("haystack_dates")
  const sessionIds = list("haystack_session_ids")
  const answerSessions = list("answer_session_ids")
  if (dates.length !== sessions.length)
    fail("haystack_dates", `has ${dates.length} dates for ${sessions.length} sessions`)
  if (sessionIds.length !== sessions.length)
    fail("haystack_session_ids", `has ${sessionIds.length} ids for ${sessions.length} sessions`)
  const seen = new Set<string>()
  sessionIds.forEach((sid, k) => {
    // An id may appear twice (the same session given twice): its turns are fed twice, under entry ids of their place.
    if (typeof sid !== "string" || sid.length === 0) fail(`haystack_session_ids[${k}]`, "expected a non-empty string")
    seen.add(sid as string)
  })
  answerSessions.forEach((sid, k) => {
    if (typeof sid !== "string") fail(`answer_session_ids[${k}]`, "expected a string")
  })
  const parsed = sessions.map((session, k) => {
    const field = `haystack_sessions[${k}]`
    if (!Array.isArray(session)) return fail(field, "expected an array of turns")
    const date = dates[k]
    if (typeof date !== "string") return fail(`haystack_dates[${k}]`, "expected a string")
    let start: number
    try {
      start = parseLongMemEvalDate(date)
    } catch (error) {
      return fail(`haystack_dates[${k}]`, (error as Error).message)
    }
    const turns = session.map((turn, i) => {
      const turnField = `${field}[${i}]`
      if (!isObject(turn)) return fail(turnField, "expected an object")
      if (turn.role !== "user" && turn.role !== "assistant")
        return fail(`${turnField}.role`, "expected 'user' or 'assistant'")
      if (typeof turn.content !== "string") return fail(`${turnField}.content`, "expected a string")
      if (turn.has_answer !== undefined && typeof turn.has_answer !== "boolean")
        return fail(`${turnField}.has_answer`, "expected a boolean")
      return {
        index: i,
        role: turn.role as "user" | "assistant",
        text: turn.content,
        evidence: turn.has_answer === true,
      }
    })
    return { k, start, turns: turns.filter((t) => t.text.trim().length > 0) }
  })
  const empty = parsed.reduce((s, p, k) => s + ((sessions[k] as unknown[]).length - p.turns.length), 0)
  if (ABSTENTION.test(id)) return { conversation: null, id, empty }

  // Date order; sessions of the same date keep the file's order.
  const ordered = [...parsed].sort((a, b) => a.start - b.start || a.k - b.k)
  const { times, reordered } = turnTimes(ordered.map((s) => ({ start: s.start, turns: s.turns.length })))
  const turns: Turn[] = []
  const evidence: string[] = []
  ordered.forEach((session, s) => {
    session.turns.forEach((turn, i) => {
      const timestamp = times[s]![i]!
      const content = longMemEvalContent(turn.role, turn.text)
      const entryId = `s${session.k}-${turn.index}`
      if (turn.evidence) evidence.push(entryId)
      turns.push({
        entryId,
        session: sessionIds[session.k] as string,
        position: turns.length,
        timestamp,
        content,
        tokens: blockTokens({ timestamp, origin: "USER" }, "raw", content, ENCODING),
      })
    })
  })
  const asked: Question = {
    id,
    question: question.trim(),
    answer: String(answer),
    group: type,
    checksAnswer: true,
    evidence,
    unknownEvidence: [],
    evidenceSessions: (answerSessions as string[]).filter((sid) => seen.has(sid)),
    askedAt,
  }
  return {
    conversation: { name: id, file, sessions: sessions.length, turns, questions: [asked], reorderedTurns: reordered },
    id,
    empty,
  }
}

/** Parses a file's JSON text (already decompressed). */
export const parseLongMemEval = (text: string, file: string): LongMemEvalSet => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new LongMemEvalFormatError(file, "", `not valid JSON: ${(error as Error).message}`)
  }
  if (!Array.isArray(json)) throw new LongMemEvalFormatError(file, "", "expected an array of questions")
  const conversations: Conversation[] = []
  const abstentions: string[] = []
  const ids = new Set<string>()
  let emptyTurns = 0
  json.forEach((item, i) => {
    const { conversation, id, empty } = parseItem(item, file, `[${i}].`)
    if (ids.has(id)) throw new LongMemEvalFormatError(file, `[${i}].question_id`, `'${id}' appears twice`)
    ids.add(id)
    emptyTurns += empty
    if (conversation === null) abstentions.push(id)
    else conversations.push(conversation)
  })
  return { conversations, abstentions, emptyTurns }
}

/** Reads a LongMemEval file, `.json` or gzipped. */
export const loadLongMemEval = (file: string): LongMemEvalSet => {
  let bytes: Buffer
  try {
    bytes = readFileSync(file)
  } catch (error) {
    throw new Error(`--data ${file}: ${(error as Error).message}`)
  }
  // Gzip by its magic bytes, whatever the name says.
  const gzipped = bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b
  let text: string
  try {
    text = (gzipped ? gunzipSync(bytes) : bytes).toString("utf8")
  } catch (error) {
    throw new LongMemEvalFormatError(file, "", `not a readable gzip file: ${(error as Error).message}`)
  }
  return parseLongMemEval(text, file)
}
