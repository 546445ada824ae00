/**
 * Scoring, pure: evidence recall and answer-in-context of one built context,
 * and their means over questions.
 */
import type { Question } from "./dataset.ts"

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
  readonly group: string
  /** Share of the evidence turns served as raw text or key points; null when the question names none. */
  readonly evidenceRecall: number | null
  /** Share of the evidence turns served as raw text. */
  readonly rawEvidenceRecall: number | null
  /** Share of the sessions holding evidence that some served entry comes from; null when none does. */
  readonly sessionRecall: number | null
  /** Whether the answer is in the context; null for questions without an answer check. */
  readonly answerInContext: boolean | null
  /** Tokens the context served. */
  readonly tokens: number
}

const servedShare = (evidence: ReadonlyArray<string>, served: ReadonlySet<string>): number | null =>
  evidence.length === 0 ? null : evidence.filter((id) => served.has(id)).length / evidence.length

export const evidenceRecall = (evidence: ReadonlyArray<string>, context: ServedContext): number | null =>
  servedShare(evidence, new Set(context.items.filter((i) => EVIDENCE_FORMS.has(i.form)).map((i) => i.entryId)))

/** `sessionOf`: the session an entry id belongs to (undefined for entries of no session, such as the question). */
export const scoreQuestion = (
  question: Question,
  context: ServedContext & { readonly tokens: number },
  sessionOf: (entryId: string) => string | undefined = () => undefined,
): QuestionScore => {
  const sessions = new Set<string>()
  for (const item of context.items) {
    const session = sessionOf(item.entryId)
    if (session !== undefined) sessions.add(session)
  }
  return {
    group: question.group,
    evidenceRecall: evidenceRecall(question.evidence, context),
    rawEvidenceRecall: servedShare(
      question.evidence,
      new Set(context.items.filter((i) => i.form === "raw").map((i) => i.entryId)),
    ),
    sessionRecall: servedShare(question.evidenceSessions, sessions),
    answerInContext:
      question.checksAnswer && question.answer !== null && normaliseText(question.answer).length > 0
        ? answerAppears(question.answer, context.text)
        : null,
    tokens: context.tokens,
  }
}

export interface Aggregate {
  /** Mean evidence recall over the questions that name evidence. */
  readonly evidenceRecall: number
  /** The same, counting only evidence served raw. */
  readonly rawEvidenceRecall: number
  /** Mean session recall over the questions that name evidence sessions. */
  readonly sessionRecall: number
  /** Share of the answer-checked questions whose answer is in the context. */
  readonly answerInContext: number
  /** Mean tokens served. */
  readonly tokens: number
  /** Questions asked. */
  readonly questions: number
  readonly withEvidence: number
  readonly withAnswerCheck: number
}

const mean = (values: ReadonlyArray<number | null>): { readonly mean: number; readonly count: number } => {
  let sum = 0
  let count = 0
  for (const v of values) {
    if (v === null) continue
    sum += v
    count++
  }
  return { mean: count === 0 ? 0 : sum / count, count }
}

export const aggregate = (scores: ReadonlyArray<QuestionScore>): Aggregate => {
  const recall = mean(scores.map((s) => s.evidenceRecall))
  const answers = mean(scores.map((s) => (s.answerInContext === null ? null : s.answerInContext ? 1 : 0)))
  return {
    evidenceRecall: recall.mean,
    rawEvidenceRecall: mean(scores.map((s) => s.rawEvidenceRecall)).mean,
    sessionRecall: mean(scores.map((s) => s.sessionRecall)).mean,
    answerInContext: answers.mean,
    tokens: mean(scores.map((s) => s.tokens)).mean,
    questions: scores.length,
    withEvidence: recall.count,
    withAnswerCheck: answers.count,
  }
}
