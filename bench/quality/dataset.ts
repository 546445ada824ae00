/**
 * What a memory-quality benchmark feeds and asks, whatever dataset it came
 * from: conversations of turns (each recorded as one entry of one agent) and
 * the questions asked of them, with the turns that hold each answer.
 * LoCoMo (locomo-dataset.ts) and LongMemEval (longmemeval-dataset.ts) both
 * load into these.
 */
import type { Encoding } from "../../contracts/agent.ts"

/** The encoding the benchmarks' agents count tokens in (the API's default). */
export const ENCODING: Encoding = "o200k_base"
/** The step added per turn inside a session, so turns keep their order. */
export const TURN_STEP_MS = 30_000

export interface Turn {
  /** The entry id (and request id) it is recorded under. */
  readonly entryId: string
  /** The session it belongs to, as the dataset names it. */
  readonly session: string
  /** Position in the conversation, from 0. */
  readonly position: number
  readonly timestamp: number
  /** "<speaker>: <text>". */
  readonly content: string
  /** Block tokens of the raw form, exactly as the context builder charges them. */
  readonly tokens: number
}

export interface Question {
  /** The dataset's id of the question. */
  readonly id: string
  readonly question: string
  /** The answer as text; null when the question has none. */
  readonly answer: string | null
  /** What results are broken down by: LoCoMo's category, LongMemEval's question type. */
  readonly group: string
  /** Whether the answer is looked for in the context. */
  readonly checksAnswer: boolean
  /** Entry ids of the evidence turns that exist in the conversation, without repeats. */
  readonly evidence: ReadonlyArray<string>
  /** Evidence ids that name no turn of the conversation. */
  readonly unknownEvidence: ReadonlyArray<string>
  /** The sessions that hold evidence. */
  readonly evidenceSessions: ReadonlyArray<string>
  /**
   * When the question is asked. Null: after the whole conversation, as a
   * focused step. A time: the question is first recorded as what the agent
   * heard at that time, as an agent loop records a user's message, then
   * asked as a step focused on it.
   */
  readonly askedAt: number | null
}

export interface Conversation {
  /** Its name in reports and in `--conversations` / `--questions`. */
  readonly name: string
  readonly file: string
  readonly sessions: number
  readonly turns: ReadonlyArray<Turn>
  readonly questions: ReadonlyArray<Question>
  /** Turns moved later by a few seconds because a session began before the previous one ended. */
  readonly reorderedTurns: number
}

/** A dataset file or field that is not what the format says, named with the reason. */
export class DatasetFormatError extends Error {
  override readonly name: string = "DatasetFormatError"
  readonly file: string
  readonly field: string
  readonly reason: string
  constructor(file: string, field: string, reason: string) {
    super(field.length > 0 ? `${file}: field '${field}': ${reason}` : `${file}: ${reason}`)
    this.file = file
    this.field = field
    this.reason = reason
  }
}

/**
 * Turn times for sessions laid out in order: each turn TURN_STEP_MS after
 * the one before inside its session; a turn that would not come after the
 * previous one (a session that began before the last one ended) moves a
 * second after it. Returns the times and how many moved.
 */
export const turnTimes = (
  sessions: ReadonlyArray<{ readonly start: number; readonly turns: number }>,
): { readonly times: number[][]; readonly reordered: number } => {
  let previous = -Infinity
  let reordered = 0
  const times = sessions.map(({ start, turns }) =>
    Array.from({ length: turns }, (_, i) => {
      const planned = start + TURN_STEP_MS * i
      const timestamp = planned > previous ? planned : previous + 1_000
      if (timestamp !== planned) reordered++
      previous = timestamp
      return timestamp
    }),
  )
  return { times, reordered }
}
