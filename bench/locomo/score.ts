/**
 * Scoring, pure: evidence recall and answer-in-context of one built context,
 * and their means over questions.
 */
import type { Question } from "./dataset.ts"
import { ANSWER_CATEGORIES } from "./dataset.ts"

/** The forms that count as the evidence being present (not an abstractive summary). */
export const EVIDENCE_FORMS: ReadonlySet<string> = new Set(["raw", "keyPoints"])

const ARTICLES: ReadonlySet<string> = new Set(["a", "an", "the"])

/** Lowercase, punctuation and symbols removed, articles dropped, whitespace collapsed. */
export const normaliseText = (text: string | number): string =>
  String(text)
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[\p{P}\p{S}]/gu, "")
    .split(/\s+/)
    .filter((word) => word.length > 0 && !ARTICLES.has(word))
    .join(" ")

/** Whether the normalised answer appears, on word boundaries, in the normalised context. */
export const answerAppears = (answer: string | number, context: string): boolean => {
  const a = normaliseText(answer)
  return a.length > 0 && ` ${normaliseText(context)} `.includes(` ${a} `)
}

/** A context as scored: which entries it serves, in which form, and its text. */
export interface ServedContext {
  readonly text: string
  readonly items: ReadonlyArray<{ readonly entryId: string; readonly form: string }>
}

export interface QuestionScore {
  readonly category: number
  /** Share of the evidence turns served as raw text or key points; null when the question names none. */
  readonly evidenceRecall: number | null
  /** Whether the answer is in the context; null for categories without an answer check. */
  readonly answerInContext: boolean | null
}

export const evidenceRecall = (evidence: ReadonlyArray<string>, context: ServedContext): number | null => {
  if (evidence.length === 0) return null
  const served = new Set(context.items.filter((i) => EVIDENCE_FORMS.has(i.form)).map((i) => i.entryId))
  return evidence.filter((id) => served.has(id)).length / evidence.length
}

export const scoreQuestion = (question: Question, context: ServedContext): QuestionScore => ({
  category: question.category,
  evidenceRecall: evidenceRecall(question.evidence, context),
  answerInContext:
    ANSWER_CATEGORIES.has(question.category) && question.answer !== null && normaliseText(question.answer).length > 0
      ? answerAppears(question.answer, context.text)
      : null,
})

export interface Aggregate {
  /** Mean evidence recall over the questions that name evidence. */
  readonly evidenceRecall: number
  /** Share of the answer-checked questions whose answer is in the context. */
  readonly answerInContext: number
  /** Questions asked. */
  readonly questions: number
  readonly withEvidence: number
  readonly withAnswerCheck: number
}

export const aggregate = (scores: ReadonlyArray<QuestionScore>): Aggregate => {
  let recall = 0
  let withEvidence = 0
  let hits = 0
  let withAnswerCheck = 0
  for (const s of scores) {
    if (s.evidenceRecall !== null) {
      recall += s.evidenceRecall
      withEvidence++
    }
    if (s.answerInContext !== null) {
      withAnswerCheck++
      if (s.answerInContext) hits++
    }
  }
  return {
    evidenceRecall: withEvidence === 0 ? 0 : recall / withEvidence,
    answerInContext: withAnswerCheck === 0 ? 0 : hits / withAnswerCheck,
    questions: scores.length,
    withEvidence,
    withAnswerCheck,
  }
}
