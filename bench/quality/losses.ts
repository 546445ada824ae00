/**
 * Where the evidence is lost, pure: for each evidence turn a build did not
 * serve (as raw text or key points), the first stage of the memory's path
 * that let it go —
 *
 * - `notRanked`: long-term, and not among the `depth` best hits of the
 *   merged ranking for the question (what a recall considers);
 * - `notRecalled`: ranked that high, yet not brought back as a cue;
 * - `packedOut`: in working or recalled as a cue, yet left out of the
 *   context by the packing (other entries took the budget);
 * - `summaryOnly`: served, but only as an abstractive summary (faded form).
 *
 * A turn that faded out of working before the question and was not served
 * is lost at `notRanked` or `notRecalled`; `faded` counts every evidence
 * turn that had left working when the question was asked, served or not.
 *
 * And for answers: `keyPointsDropped`, questions whose answer is in the raw
 * text of their evidence and whose evidence was served, but not the answer
 * (the extract left the sentence out).
 */
import { answerAppears } from "./score.ts"

export const LOSS_STAGES = ["notRanked", "notRecalled", "packedOut", "summaryOnly"] as const
export type LossStage = (typeof LOSS_STAGES)[number]

export interface Losses {
  /** Evidence turns looked at. */
  evidence: number
  served: number
  notRanked: number
  notRecalled: number
  packedOut: number
  summaryOnly: number
  /** Evidence turns that had faded out of working before the question (served or not). */
  faded: number
  /** Questions whose answer is in their evidence's raw text. */
  answerInEvidence: number
  /** …of which every evidence turn was served, and the answer was not in the context. */
  keyPointsDropped: number
}

export const emptyLosses = (): Losses => ({
  evidence: 0,
  served: 0,
  notRanked: 0,
  notRecalled: 0,
  packedOut: 0,
  summaryOnly: 0,
  faded: 0,
  answerInEvidence: 0,
  keyPointsDropped: 0,
})

/** What the system held for a question when it was asked. */
export interface QuestionState {
  /** Native working entries of the agent during the step. */
  readonly working: ReadonlySet<string>
  /** Entries recalled as cues for the step. */
  readonly cues: ReadonlySet<string>
  /** Rank (from 0) of each entry in the merged ranking for the question. */
  readonly rank: ReadonlyMap<string, number>
  /** How many hits a recall considers. */
  readonly depth: number
}

export const stageOf = (
  entryId: string,
  servedForm: string | undefined,
  state: QuestionState,
): LossStage | "served" => {
  if (servedForm === "raw" || servedForm === "keyPoints") return "served"
  if (servedForm === "summary") return "summaryOnly"
  if (state.working.has(entryId) || state.cues.has(entryId)) return "packedOut"
  return (state.rank.get(entryId) ?? Infinity) < state.depth ? "notRecalled" : "notRanked"
}

/** Adds one build's losses to `into`. `rawText` gives an evidence turn's raw text. */
export const countLosses = (
  into: Losses,
  question: {
    readonly evidence: ReadonlyArray<string>
    readonly answer: string | null
    readonly checksAnswer: boolean
  },
  built: { readonly text: string; readonly items: ReadonlyArray<{ readonly entryId: string; readonly form: string }> },
  state: QuestionState,
  rawText: (entryId: string) => string,
): void => {
  const served = new Map(built.items.map((i) => [i.entryId, i.form] as const))
  let all = true
  for (const id of question.evidence) {
    const stage = stageOf(id, served.get(id), state)
    into.evidence++
    into[stage]++
    if (!state.working.has(id)) into.faded++
    if (stage !== "served") all = false
  }
  if (!question.checksAnswer || question.answer === null || question.evidence.length === 0) return
  if (!answerAppears(question.answer, question.evidence.map(rawText).join("\n"))) return
  into.answerInEvidence++
  if (all && !answerAppears(question.answer, built.text)) into.keyPointsDropped++
}
