/**
 * LoCoMo conversations: loading, validation and the parsing the benchmark
 * needs (session dates, evidence ids, entry ids).
 *
 * A file holds one conversation — `speaker_a`, `speaker_b`, `session_K`,
 * `session_K_date_time`, `qa` at the top level, or the same fields under
 * `conversation` beside `qa` as in the original release — or an array of
 * such samples. A `*.json` file of any other shape is skipped; a file of
 * this shape with a missing or malformed field is an error that names the
 * file and the field.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { basename, join } from "node:path"
import { blockTokens } from "../../domain/render.ts"
import {
  type Conversation as BenchConversation,
  type Question as BenchQuestion,
  type Turn as BenchTurn,
  DatasetFormatError,
  ENCODING,
  TURN_STEP_MS,
  turnTimes,
} from "./dataset.ts"

export { ENCODING, TURN_STEP_MS }
/** Categories whose questions are asked; 5 (adversarial) is not. */
export const ASKED_CATEGORIES: ReadonlySet<number> = new Set([1, 2, 3, 4])
/** Categories whose answer is looked for in the context. */
export const ANSWER_CATEGORIES: ReadonlySet<number> = new Set([1, 2, 4])

/** A LoCoMo turn: its session is `session_<K>`'s number; content "<speaker>: <text>", with " [shares a photo: <caption>]". */
export interface Turn extends BenchTurn {
  /** The dataset's id, e.g. "D3:5" (recorded as entry "D3-5"). */
  readonly diaId: string
}

export interface Question extends BenchQuestion {
  /** Position in the file's `qa`. */
  readonly index: number
  readonly category: number
}

/** A LoCoMo conversation; its name is the file name, with `#<sample>` for a file holding several samples. */
export interface Conversation extends BenchConversation {
  readonly turns: ReadonlyArray<Turn>
  readonly questions: ReadonlyArray<Question>
}

export class LocomoFormatError extends DatasetFormatError {
  override readonly name = "LocomoFormatError"
}

// ---------------------------------------------------------------------------
// Pure parsing

const MONTHS: ReadonlyArray<readonly [RegExp, number]> = [
  [/^jan(uary)?$/, 0],
  [/^feb(ruary)?$/, 1],
  [/^mar(ch)?$/, 2],
  [/^apr(il)?$/, 3],
  [/^may$/, 4],
  [/^june?$/, 5],
  [/^july?$/, 6],
  [/^aug(ust)?$/, 7],
  [/^sept?(ember)?$/, 8],
  [/^oct(ober)?$/, 9],
  [/^nov(ember)?$/, 10],
  [/^dec(ember)?$/, 11],
]

const monthOf = (word: string): number | undefined => MONTHS.find(([re]) => re.test(word))?.[1]

/**
 * Parses a session date as LoCoMo writes it, "1:56 pm on 8 May, 2023", into
 * epoch milliseconds (UTC). Also takes "8 May 2023", "May 8, 2023 1:56 PM",
 * 24-hour times, abbreviated months and ISO dates ("2023-05-08 13:56").
 * A date without a time is taken at midnight. Throws with the reason.
 */
export const parseSessionDateTime = (text: string): number => {
  let s = text.trim().toLowerCase()
  if (s.length === 0) throw new Error("empty date")

  const iso = /^(\d{4})-(\d{2})-(\d{2})(?:[ t](\d{2}):(\d{2})(?::(\d{2}))?)?z?$/.exec(s)
  if (iso) {
    return utc(text, Number(iso[1]), Number(iso[2]) - 1, Number(iso[3]), Number(iso[4] ?? 0), Number(iso[5] ?? 0))
  }

  let hour = 0
  let minute = 0
  const clock = /(\d{1,2}):(\d{2})(?::\d{2})?(?:\s*([ap])\.?\s?m\b\.?)?/.exec(s)
  const bare = clock ? null : /\b(\d{1,2})\s*([ap])\.?\s?m\b\.?/.exec(s)
  const time = clock ?? bare
  if (time) {
    hour = Number(time[1])
    minute = clock ? Number(clock[2]) : 0
    const meridiem = clock ? clock[3] : time[2]
    if (meridiem !== undefined) {
      if (hour < 1 || hour > 12) throw new Error(`hour ${hour} is not a 12-hour clock hour in '${text}'`)
      hour = (hour % 12) + (meridiem === "p" ? 12 : 0)
    }
    if (hour > 23 || minute > 59) throw new Error(`no such time in '${text}'`)
    s = `${s.slice(0, time.index)} ${s.slice(time.index + time[0].length)}`
  }

  const words = s.split(/[\s,./]+/).filter((w) => w.length > 0 && w !== "on" && w !== "at" && w !== "of")
  let year: number | undefined
  let month: number | undefined
  let day: number | undefined
  for (const word of words) {
    const m = monthOf(word)
    if (m !== undefined && month === undefined) {
      month = m
      continue
    }
    const number = /^(\d{1,4})(st|nd|rd|th)?$/.exec(word)
    if (number && number[1]!.length === 4 && number[2] === undefined && year === undefined) year = Number(number[1])
    else if (number && number[1]!.length <= 2 && day === undefined) day = Number(number[1])
    else throw new Error(`unexpected '${word}' in '${text}'`)
  }
  if (year === undefined) throw new Error(`no year in '${text}'`)
  if (month === undefined) throw new Error(`no month name in '${text}'`)
  if (day === undefined) throw new Error(`no day in '${text}'`)
  return utc(text, year, month, day, hour, minute)
}

const utc = (text: string, year: number, month: number, day: number, hour: number, minute: number): number => {
  const ms = Date.UTC(year, month, day, hour, minute)
  const d = new Date(ms)
  if (d.getUTCFullYear() !== year || d.getUTCMonth() !== month || d.getUTCDate() !== day || d.getUTCHours() !== hour) {
    throw new Error(`no such date or time in '${text}'`)
  }
  return ms
}

/** An entry id for a dialogue id: "D3:5" -> "D3-5" (1–64 of A-Za-z0-9_-). */
export const entryIdOf = (diaId: string): string =>
  diaId
    .trim()
    .replace(/[^A-Za-z0-9_-]/g, "-")
    .slice(0, 64)

/** The ids in an evidence list; one string may hold several separated by ';', ',' or spaces. */
export const splitEvidence = (evidence: ReadonlyArray<string>): string[] => {
  const ids: string[] = []
  for (const item of evidence)
    for (const id of item.split(/[\s;,]+/)) if (id.length > 0 && !ids.includes(id)) ids.push(id)
  return ids
}

/** What a turn is recorded as. */
export const turnContent = (speaker: string, text: string, caption: string | undefined): string =>
  `${speaker}: ${text}${caption !== undefined && caption.trim().length > 0 ? ` [shares a photo: ${caption.trim()}]` : ""}`

// ---------------------------------------------------------------------------
// Validation

type Json = Record<string, unknown>
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)
const SESSION_KEY = /^session_(\d+)$/

/** Whether a parsed JSON value is a LoCoMo sample (or an array of them). */
export const hasLocomoShape = (value: unknown): boolean => {
  if (Array.isArray(value)) return value.length > 0 && value.every(hasLocomoShape)
  if (!isObject(value)) return false
  const conversation = isObject(value.conversation) ? value.conversation : value
  return "qa" in value && Object.keys(conversation).some((k) => SESSION_KEY.test(k))
}

/**
 * One sample into a conversation. `file` names the source in errors; `prefix`
 * is the field path of the sample inside the file ("" or "[2].").
 */
export const parseConversation = (sample: unknown, file: string, name: string, prefix = ""): Conversation => {
  const fail = (field: string, reason: string): never => {
    throw new LocomoFormatError(file, `${prefix}${field}`, reason)
  }
  if (!isObject(sample)) return fail("", "expected an object")
  const nested = sample.conversation !== undefined
  if (nested && !isObject(sample.conversation)) return fail("conversation", "expected an object")
  const conversation = (nested ? sample.conversation : sample) as Json
  const at = nested ? "conversation." : ""

  const sessionNumbers = Object.keys(conversation)
    .map((k) => SESSION_KEY.exec(k))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b)
  if (sessionNumbers.length === 0) fail(`${at}session_1`, "missing: a conversation needs at least one session")

  // Sessions validated and timed first, then their turns.
  const sessions = sessionNumbers.map((k) => {
    const field = `${at}session_${k}`
    const rawTurns = conversation[`session_${k}`]
    if (!Array.isArray(rawTurns)) return fail(field, "expected an array of turns")
    const dateField = `${field}_date_time`
    const date = conversation[`session_${k}_date_time`]
    if (typeof date !== "string")
      return fail(dateField, date === undefined ? "missing" : "expected a string such as '1:56 pm on 8 May, 2023'")
    try {
      return { k, field, rawTurns: rawTurns as unknown[], start: parseSessionDateTime(date), turns: rawTurns.length }
    } catch (error) {
      return fail(dateField, (error as Error).message)
    }
  })
  const { times, reordered: reorderedTurns } = turnTimes(sessions)
  const turns: Turn[] = []
  const byDiaId = new Map<string, string>()
  const entryIds = new Set<string>()
  for (const [s, { k, field, rawTurns }] of sessions.entries()) {
    for (const [i, turn] of rawTurns.entries()) {
      const turnField = `${field}[${i}]`
      if (!isObject(turn)) return fail(turnField, "expected an object")
      const { speaker, dia_id: diaId, text, blip_caption: caption } = turn
      if (typeof speaker !== "string" || speaker.trim().length === 0)
        fail(`${turnField}.speaker`, "expected a non-empty string")
      if (typeof diaId !== "string" || diaId.trim().length === 0)
        fail(`${turnField}.dia_id`, "expected a non-empty string")
      if (typeof text !== "string") fail(`${turnField}.text`, "expected a string")
      if (caption !== undefined && caption !== null && typeof caption !== "string")
        fail(`${turnField}.blip_caption`, "expected a string")
      const id = (diaId as string).trim()
      const entryId = entryIdOf(id)
      if (byDiaId.has(id)) fail(`${turnField}.dia_id`, `'${id}' appears twice`)
      if (entryIds.has(entryId))
        fail(`${turnField}.dia_id`, `'${id}' gives the same entry id '${entryId}' as another turn`)
      const timestamp = times[s]![i]!
      const content = turnContent(
        (speaker as string).trim(),
        text as string,
        typeof caption === "string" ? caption : undefined,
      )
      byDiaId.set(id, entryId)
      entryIds.add(entryId)
      turns.push({
        diaId: id,
        entryId,
        session: String(k),
        position: turns.length,
        timestamp,
        content,
        tokens: blockTokens({ timestamp, origin: "USER" }, "raw", content, ENCODING),
      })
    }
  }
  if (turns.length === 0) fail(`${at}session_${sessionNumbers[0]}`, "no turns in any session")

  const sessionOf = new Map(turns.map((t) => [t.entryId, t.session] as const))
  const qa = sample.qa
  if (!Array.isArray(qa)) return fail("qa", qa === undefined ? "missing" : "expected an array of questions")
  const questions = qa.map((q: unknown, index): Question => {
    const field = `qa[${index}]`
    if (!isObject(q)) return fail(field, "expected an object")
    const { question, answer, evidence, category } = q
    if (typeof question !== "string" || question.trim().length === 0)
      fail(`${field}.question`, "expected a non-empty string")
    if (typeof category !== "number" || !Number.isInteger(category))
      fail(`${field}.category`, "expected an integer (1–5)")
    if (!Array.isArray(evidence) || !evidence.every((e) => typeof e === "string"))
      fail(`${field}.evidence`, "expected an array of dialogue ids")
    const hasAnswer = typeof answer === "string" || (typeof answer === "number" && Number.isFinite(answer))
    if (ASKED_CATEGORIES.has(category as number) && !hasAnswer) {
      fail(`${field}.answer`, answer === undefined ? "missing" : "expected a string or a number")
    }
    const ids = splitEvidence(evidence as string[])
    const known = ids.filter((id) => byDiaId.has(id)).map((id) => byDiaId.get(id)!)
    return {
      id: String(index),
      index,
      question: (question as string).trim(),
      answer: hasAnswer ? String(answer) : null,
      category: category as number,
      group: String(category),
      checksAnswer: ANSWER_CATEGORIES.has(category as number) && hasAnswer,
      evidence: known,
      unknownEvidence: ids.filter((id) => !byDiaId.has(id)),
      evidenceSessions: [...new Set(known.map((id) => sessionOf.get(id)!))],
      askedAt: null,
    }
  })
  return { name, file, sessions: sessionNumbers.length, turns, questions, reorderedTurns }
}

/** Parses one file's text: its conversations, or null when it is not LoCoMo-shaped. */
export const parseLocomoFile = (text: string, file: string): Conversation[] | null => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new LocomoFormatError(file, "", `not valid JSON: ${(error as Error).message}`)
  }
  if (!hasLocomoShape(json)) return null
  const name = basename(file)
  if (!Array.isArray(json)) return [parseConversation(json, file, name)]
  return json.map((sample, i) => {
    const id = isObject(sample) && typeof sample.sample_id === "string" ? sample.sample_id : String(i)
    return parseConversation(sample, file, `${name}#${id}`, `[${i}].`)
  })
}

// ---------------------------------------------------------------------------
// I/O

export interface LoadedDataset {
  readonly conversations: ReadonlyArray<Conversation>
  /** `*.json` files that are not LoCoMo-shaped. */
  readonly skipped: ReadonlyArray<string>
}

/** Every LoCoMo-shaped `*.json` file of a directory, in name order. */
export const loadLocomoDirectory = (dir: string): LoadedDataset => {
  let names: string[]
  try {
    if (!statSync(dir).isDirectory()) throw new Error("not a directory")
    names = readdirSync(dir)
  } catch (error) {
    throw new Error(`--data ${dir}: ${(error as Error).message}`)
  }
  const files = names.filter((n) => n.toLowerCase().endsWith(".json")).sort()
  const conversations: Conversation[] = []
  const skipped: string[] = []
  for (const name of files) {
    const path = join(dir, name)
    if (!statSync(path).isFile()) continue
    const parsed = parseLocomoFile(readFileSync(path, "utf8"), path)
    if (parsed === null) skipped.push(path)
    else conversations.push(...parsed)
  }
  if (conversations.length === 0) {
    throw new Error(`--data ${dir}: no LoCoMo conversation among ${files.length} .json file(s)`)
  }
  return { conversations, skipped }
}

const conversationName = (c: Conversation) => c.name.replace(/\.json(?=#|$)/i, "")

/** The named conversations (file names without `.json`), in directory order; a name that matches none is an error. */
export const selectConversations = (all: ReadonlyArray<Conversation>, names: ReadonlyArray<string>): Conversation[] => {
  const matches = (c: Conversation, n: string) => conversationName(c) === n || conversationName(c).startsWith(`${n}#`)
  const unknown = names.filter((n) => !all.some((c) => matches(c, n)))
  if (unknown.length > 0)
    throw new Error(
      `--conversations: no conversation named ${unknown.join(", ")} (have ${all.map(conversationName).join(", ")})`,
    )
  return all.filter((c) => names.some((n) => matches(c, n)))
}

/** The conversation with only the questions the benchmark asks (categories 1–4). */
export const askedOnly = (conversation: Conversation): Conversation => ({
  ...conversation,
  questions: conversation.questions.filter((q) => ASKED_CATEGORIES.has(q.category)),
})
