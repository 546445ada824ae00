/**
 * What the benchmark prints and writes: the summary JSON, the diagnostics,
 * the terminal tables and the progress line.
 */
import { LOSS_STAGES, type Losses } from "./losses.ts"
import type { Aggregate } from "./score.ts"

export const METHODS = ["working-memory", "fifo", "bm25"] as const
export type Method = (typeof METHODS)[number]

export interface Cell {
  readonly evidenceRecall: number
  readonly answerInContext: number
  readonly questions: number
  /** Evidence recall counting only turns served raw. */
  readonly rawEvidenceRecall: number
  /** Share of the evidence sessions some served entry comes from. */
  readonly sessionRecall: number
  /** Mean tokens served. */
  readonly tokens: number
}

/** The `--out` file, exactly. */
export interface Summary {
  readonly budgets: ReadonlyArray<number>
  readonly methods: Readonly<Record<Method, Readonly<Record<string, Cell>>>>
  readonly tokensPerConversation: number
  /** Answer-in-context when every evidence turn of the question is served raw, and nothing else: what a perfect ranking would reach. */
  readonly ceiling: { readonly answerInContext: number }
}

/** How the served entries of every build of one method at one budget were held. */
export interface ServedForms {
  builds: number
  entries: number
  tokens: number
  raw: number
  keyPoints: number
  summary: number
  native: number
  cue: number
  rung0: number
  rung1: number
  rung2: number
  /** Tokens of header lines (dates, sittings). */
  headerTokens: number
  /** Tokens of block labels ("thought: ", "summary: "). */
  labelTokens: number
  /** "…" marks of left-out text (about one token each). */
  markTokens: number
}

export const emptyServedForms = (): ServedForms => ({
  builds: 0,
  entries: 0,
  tokens: 0,
  raw: 0,
  keyPoints: 0,
  summary: 0,
  native: 0,
  cue: 0,
  rung0: 0,
  rung1: 0,
  rung2: 0,
  headerTokens: 0,
  labelTokens: 0,
  markTokens: 0,
})

export interface ServedItem {
  readonly form: string
  readonly cue: boolean
  readonly rung: number
}

const HEADER_LINE = /^\[[^\]\n]*\]$/
const LABEL = /^(?:(?:user|thought|advisor|system)(?: \(summary\))?|summary): /

/** The formatting in a context's text: header lines, block labels and gap marks, in tokens. */
export const formattingOf = (text: string, countTokens: (text: string) => number) => {
  let headerTokens = 0
  let labelTokens = 0
  let markTokens = 0
  for (const line of text.split("\n")) {
    if (line.length === 0) continue
    if (HEADER_LINE.test(line)) {
      headerTokens += countTokens(`${line}\n`)
      continue
    }
    const label = LABEL.exec(line)
    if (label) labelTokens += countTokens(label[0].trimEnd())
    markTokens += line.split("…").length - 1
  }
  return { headerTokens, labelTokens, markTokens }
}

export const countServed = (
  forms: ServedForms,
  items: ReadonlyArray<ServedItem>,
  tokens: number,
  formatting: { readonly headerTokens: number; readonly labelTokens: number; readonly markTokens: number },
): void => {
  forms.builds++
  forms.tokens += tokens
  forms.headerTokens += formatting.headerTokens
  forms.labelTokens += formatting.labelTokens
  forms.markTokens += formatting.markTokens
  for (const item of items) {
    forms.entries++
    if (item.form === "raw") forms.raw++
    else if (item.form === "keyPoints") forms.keyPoints++
    else if (item.form === "summary") forms.summary++
    if (item.cue) forms.cue++
    else forms.native++
    if (item.rung === 0) forms.rung0++
    else if (item.rung === 1) forms.rung1++
    else if (item.rung === 2) forms.rung2++
  }
}

export interface LatencyStats {
  readonly calls: number
  readonly meanMs: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
}

export const latencyStats = (samples: ReadonlyArray<number>): LatencyStats => {
  if (samples.length === 0) return { calls: 0, meanMs: 0, p50Ms: 0, p99Ms: 0, maxMs: 0 }
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
  const round = (x: number) => Math.round(x * 100) / 100
  return {
    calls: sorted.length,
    meanMs: round(sorted.reduce((s, x) => s + x, 0) / sorted.length),
    p50Ms: round(at(0.5)),
    p99Ms: round(at(0.99)),
    maxMs: round(sorted[sorted.length - 1]!),
  }
}

/** One question as working-memory answered it: where each evidence turn ranked and how it was served. */
export interface QuestionDetails {
  readonly conversation: string
  readonly id: string
  readonly group: string
  readonly evidence: ReadonlyArray<{
    readonly entryId: string
    /** Its place (from 0) in the merged ranking for the question; null beyond 200. */
    readonly rank: number | null
    readonly working: boolean
    readonly cue: boolean
    /** The form served at each budget, or null. */
    readonly served: Readonly<Record<string, string | null>>
  }>
  /** Each build's items as "entryId:form:cue|native:rank". */
  readonly builds: Readonly<Record<string, ReadonlyArray<string>>>
}

/** Everything else, for `<out>.details.json` and the terminal. */
export interface Details {
  readonly data: string
  readonly conversations: ReadonlyArray<{
    readonly name: string
    readonly agentId: string
    readonly sessions: number
    readonly turns: number
    readonly tokens: number
    readonly questions: number
  }>
  /** What the loader left out: files that are not of the format, abstention questions. */
  readonly skipped: ReadonlyArray<string>
  /** Evidence ids that name no turn, and questions left without any evidence. */
  readonly evidence: { readonly unknownIds: number; readonly questionsWithoutEvidence: number }
  /** Per method and budget: the aggregate with its denominators. */
  readonly aggregates: Readonly<Record<Method, Readonly<Record<string, Aggregate>>>>
  /** Per method, budget and group (LoCoMo's category, LongMemEval's question type). */
  readonly byGroup: Readonly<Record<Method, Readonly<Record<string, Readonly<Record<string, Aggregate>>>>>>
  readonly served: Readonly<Record<Method, Readonly<Record<string, ServedForms>>>>
  /** Where working-memory lost the evidence it did not serve, per budget (see losses.ts). */
  readonly losses: Readonly<Record<string, Losses>>
  readonly questions: ReadonlyArray<QuestionDetails>
  /** The same per group. */
  readonly lossesByGroup: Readonly<Record<string, Readonly<Record<string, Losses>>>>
  readonly checks: {
    /** Recorded turns whose token count from the gateway differs from the benchmark's. */
    readonly tokenMismatches: number
    /** Builds that served more tokens than their limit. */
    readonly overLimit: number
    /** The agent budget working-memory builds were capped by. */
    readonly agentBudget: number
    /** Events appended by the services between the last recorded turn and the first question. */
    readonly eventsWhileSettling: number
  }
  readonly timings: {
    readonly totalMs: number
    readonly startupMs: number
    readonly ingestMs: number
    readonly settleMs: number
    readonly questionsMs: number
    /** How much the log grew while the questions were asked (absent in files written before it was measured). */
    readonly questionLogBytes?: number
    readonly baselinesMs: number
    readonly turnsPerSecond: number
    readonly record: LatencyStats
    readonly beginStep: LatencyStats
    readonly buildContext: LatencyStats
    readonly endStep: LatencyStats
  }
}

// ---------------------------------------------------------------------------
// Terminal

const f3 = (x: number) => x.toFixed(3)
const pad = (s: string, n: number) => s.padStart(n)
const padEnd = (s: string, n: number) => s.padEnd(n)

/** The main table: methods × budgets, evidence recall and answer-in-context, and the question count. */
export const formatSummary = (summary: Summary): string[] => {
  const w = 9
  const head = padEnd("method", 16) + padEnd("", 18) + summary.budgets.map((b) => pad(String(b), w)).join("")
  const lines = [head, "-".repeat(head.length)]
  for (const method of METHODS) {
    const cells = summary.budgets.map((b) => summary.methods[method][String(b)]!)
    lines.push(
      padEnd(method, 16) + padEnd("evidence recall", 18) + cells.map((c) => pad(f3(c.evidenceRecall), w)).join(""),
    )
    lines.push(
      padEnd("", 16) + padEnd("answer in context", 18) + cells.map((c) => pad(f3(c.answerInContext), w)).join(""),
    )
  }
  const questions = summary.budgets.map((b) => summary.methods["working-memory"][String(b)]!.questions)
  lines.push("-".repeat(head.length))
  lines.push(padEnd("questions", 34) + questions.map((q) => pad(String(q), w)).join(""))
  lines.push(
    `ceiling: every evidence turn served raw, nothing else: answer in context ${f3(summary.ceiling.answerInContext)}`,
  )
  return lines
}

export const formatByGroup = (budgets: ReadonlyArray<number>, details: Details): string[] => {
  const groups = [
    ...new Set(Object.values(details.byGroup["working-memory"]).flatMap((byGroup) => Object.keys(byGroup))),
  ].sort()
  const w = 9
  const head = padEnd("evidence recall by group", 44) + budgets.map((b) => pad(String(b), w)).join("")
  const lines = [head, "-".repeat(head.length)]
  for (const group of groups) {
    for (const method of METHODS) {
      const cells = budgets.map((b) => details.byGroup[method][String(b)]?.[group])
      const n = cells[0]?.withEvidence ?? 0
      lines.push(
        padEnd(`${group} (${n} q)`, 28) +
          padEnd(method, 16) +
          cells.map((c) => pad(c ? f3(c.evidenceRecall) : "-", w)).join(""),
      )
    }
  }
  return lines
}

const LOSS_NAMES: Readonly<Record<(typeof LOSS_STAGES)[number], string>> = {
  notRanked: "not ranked in the recall depth",
  notRecalled: "ranked, not recalled as a cue",
  packedOut: "held or recalled, packed out",
  summaryOnly: "served as a summary only",
}

/** Shares of the evidence turns: served, and each stage that lost the rest; then answers the extract dropped. */
export const formatLosses = (budgets: ReadonlyArray<number>, details: Details): string[] => {
  const w = 9
  const head = padEnd("where working-memory lost the evidence", 44) + budgets.map((b) => pad(String(b), w)).join("")
  const lines = [head, "-".repeat(head.length)]
  const share = (l: Losses | undefined, n: number) => (l && l.evidence > 0 ? f3(n / l.evidence) : "-")
  const row = (label: string, value: (l: Losses | undefined) => string) =>
    lines.push(padEnd(label, 44) + budgets.map((b) => pad(value(details.losses[String(b)]), w)).join(""))
  row("served (raw or key points)", (l) => share(l, l?.served ?? 0))
  for (const stage of LOSS_STAGES) row(LOSS_NAMES[stage], (l) => share(l, l?.[stage] ?? 0))
  row("faded out of working before the question", (l) => share(l, l?.faded ?? 0))
  row("answer in evidence, dropped by key points", (l) =>
    l && l.answerInEvidence > 0 ? `${l.keyPointsDropped}/${l.answerInEvidence}` : "-",
  )
  return lines
}

export const formatServed = (budgets: ReadonlyArray<number>, details: Details): string[] => {
  const head =
    padEnd("served entries per build", 32) +
    ["entries", "tokens", "raw", "keyPts", "summary", "native", "cue", "r0", "r1", "r2", "headers", "labels", "marks"]
      .map((h) => pad(h, 8))
      .join("")
  const lines = [head, "-".repeat(head.length)]
  for (const method of METHODS) {
    for (const b of budgets) {
      const s = details.served[method][String(b)]
      if (!s || s.builds === 0) continue
      const per = (x: number) => pad((x / s.builds).toFixed(1), 8)
      lines.push(
        padEnd(`${method} @${b}`, 32) +
          [
            s.entries,
            s.tokens,
            s.raw,
            s.keyPoints,
            s.summary,
            s.native,
            s.cue,
            s.rung0,
            s.rung1,
            s.rung2,
            s.headerTokens,
            s.labelTokens,
            s.markTokens,
          ]
            .map(per)
            .join(""),
      )
    }
  }
  return lines
}

export const formatTimings = (details: Details): string[] => {
  const t = details.timings
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`
  const lat = (name: string, l: LatencyStats) =>
    `  ${padEnd(name, 13)} ${pad(String(l.calls), 6)} calls  mean ${l.meanMs.toFixed(2)} ms  p50 ${l.p50Ms.toFixed(2)} ms  p99 ${l.p99Ms.toFixed(2)} ms  max ${l.maxMs.toFixed(2)} ms`
  return [
    `wall ${s(t.totalMs)}: start ${s(t.startupMs)}, ingest ${s(t.ingestMs)} (${t.turnsPerSecond} turns/s), settle ${s(t.settleMs)}, questions ${s(t.questionsMs)}, baselines ${s(t.baselinesMs)}`,
    lat("record", t.record),
    lat("beginStep", t.beginStep),
    lat("buildContext", t.buildContext),
    lat("endStep", t.endStep),
    ...(t.questionLogBytes !== undefined && t.beginStep.calls > 0
      ? [
          `  log grew ${(t.questionLogBytes / 1024).toFixed(0)} KiB while the questions were asked (${(t.questionLogBytes / 1024 / t.beginStep.calls).toFixed(1)} KiB a question)`,
        ]
      : []),
  ]
}

// ---------------------------------------------------------------------------
// Progress

export interface Progress {
  /** Shows the state; `force` prints it even between periodic lines. */
  readonly update: (line: string, force?: boolean) => void
  readonly done: () => void
}

export const silentProgress: Progress = { update: () => {}, done: () => {} }

/**
 * On a terminal, one line rewritten in place (at most ten times a second);
 * elsewhere, a plain line every `everyMs` and on each forced update.
 */
export const streamProgress = (
  stream: { readonly isTTY?: boolean; write: (s: string) => unknown },
  everyMs = 5_000,
): Progress => {
  const tty = stream.isTTY === true
  let last = 0
  let pending = ""
  let shown = ""
  return {
    update: (line, force = false) => {
      pending = line
      const now = performance.now()
      if (tty) {
        if (force || now - last >= 100) {
          stream.write(`\r\x1b[2K${line}`)
          shown = line
          last = now
        }
      } else if (force || now - last >= everyMs) {
        stream.write(`${line}\n`)
        shown = line
        last = now
      }
    },
    done: () => {
      if (tty) stream.write(`\r\x1b[2K${pending}\n`)
      else if (pending !== shown) stream.write(`${pending}\n`)
    },
  }
}
