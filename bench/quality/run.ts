/**
 * A memory-quality benchmark, end to end: starts a nats-server and the whole
 * system in this process as `npm start` does, feeds each conversation turn
 * by turn into one agent through the SDK, builds the context of every
 * question at each budget, and scores it beside FIFO and BM25 fills of the
 * same turns at the same token counts. Where an evidence turn was not
 * served, the run says why (losses.ts). LoCoMo and LongMemEval both run
 * through here (bench/locomo.ts, bench/longmemeval.ts).
 */

import { mkdirSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"
import { jetstreamManager } from "@nats-io/jetstream"
import { Effect, ManagedRuntime } from "effect"
import { readStatus } from "../../cli/audit/status.ts"
import { settings } from "../../contracts/settings.ts"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { renderBlock } from "../../domain/render.ts"
import { countTokens } from "../../domain/tokens.ts"
import { startNatsServer } from "../../infra/nats-server.ts"
import { type AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { systemLayer } from "../../services/system.ts"
import { bm25Index, fifoFill, rankedFill } from "./baselines.ts"
import { type Conversation, ENCODING, type Question } from "./dataset.ts"
import { countLosses, emptyLosses, type Losses, type QuestionState } from "./losses.ts"
import { DEFAULT_BUDGETS, detailsPath } from "./options.ts"
import {
  type Cell,
  countServed,
  type Details,
  emptyServedForms,
  formatByGroup,
  formatLosses,
  formatServed,
  formatSummary,
  formatTimings,
  formattingOf,
  latencyStats,
  METHODS,
  type Method,
  type Progress,
  type QuestionDetails,
  type ServedForms,
  type Summary,
  silentProgress,
} from "./report.ts"
import { type Aggregate, aggregate, type QuestionScore, type ServedContext, scoreQuestion } from "./score.ts"

export interface QualityOptions {
  /** What is measured, for the first line of the report ("LoCoMo", "LongMemEval"). */
  readonly title: string
  /** Where the data came from, for the diagnostics. */
  readonly data: string
  /** The conversations, each holding only the questions to ask. */
  readonly conversations: ReadonlyArray<Conversation>
  /** Agent ids are `<prefix>-<n>-<name>`. */
  readonly agentPrefix: string
  readonly budgets?: ReadonlyArray<number>
  /** Where to write the summary JSON; the diagnostics go beside it (see `detailsPath`). */
  readonly out?: string
  /** Where the tables go (default: standard output). */
  readonly print?: (line: string) => void
  readonly progress?: Progress
  /** What the loader left out (files not of the format, abstention questions), for the diagnostics. */
  readonly skipped?: ReadonlyArray<string>
  /** Lines about the data printed under the first (what was skipped, say). */
  readonly notes?: ReadonlyArray<string>
}

export interface QualityResult {
  readonly summary: Summary
  readonly details: Details
}

/** Records in flight at once while feeding the conversations. */
const RECORDS_IN_FLIGHT = 64
/** Conversations whose questions are asked at the same time (each agent holds one open step at a time). */
const CONVERSATIONS_IN_FLIGHT = 4
/** The longest question text a focus holds. */
const MAX_FOCUS_CHARS = 4_000
/**
 * After feeding, wait until the services report no background work behind the log (fading, its
 * summaries and embeddings, long-term writes) and the log has been quiet this long, at most
 * SETTLE_MAX_MS: the questions come long after the history in the datasets' time.
 */
const SETTLE_QUIET_MS = 500
const SETTLE_MAX_MS = 45 * 60_000
/** How many events of a step the loss analysis reads. */
const STEP_EVENTS = 1_000

/** Runs `work` over `items` with at most `limit` running at once. */
const pool = async <T>(items: ReadonlyArray<T>, limit: number, work: (item: T) => Promise<void>): Promise<void> => {
  let next = 0
  const worker = async () => {
    while (next < items.length) await work(items[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
}

const timed = async <T>(samples: number[], call: () => Promise<T>): Promise<T> => {
  const t = performance.now()
  const value = await call()
  samples.push(performance.now() - t)
  return value
}

const agentIdFor = (prefix: string, index: number, conversation: Conversation): string =>
  `${prefix}-${index + 1}-${conversation.name.replace(/\.json$/i, "").replace(/[^A-Za-z0-9_-]/g, "-")}`.slice(0, 64)

/** The entry a question asked at a time of its own is recorded as. */
const questionEntryId = (index: number) => `question-${index + 1}`

const round4 = (x: number) => Math.round(x * 10_000) / 10_000

type PerBudget<T> = Map<number, T>
type PerMethod<T> = Record<Method, PerBudget<T>>
const perMethod = <T>(budgets: ReadonlyArray<number>, make: () => T): PerMethod<T> => {
  const one = () => new Map(budgets.map((b) => [b, make()] as const))
  return { "working-memory": one(), fifo: one(), bm25: one() }
}

/** A built context as scored and counted. */
interface Served extends ServedContext {
  readonly tokens: number
  readonly items: ReadonlyArray<{
    readonly entryId: string
    readonly form: string
    readonly cue: boolean
    readonly rung: number
  }>
}

/** The context a baseline serves: the chosen turns as raw blocks, in conversation order. */
const baselineContext = (conversation: Conversation, positions: ReadonlyArray<number>): Served => {
  let text = ""
  let tokens = 0
  const items = positions.map((p) => {
    const turn = conversation.turns[p]!
    text += renderBlock({ timestamp: turn.timestamp, origin: "USER" }, "raw", turn.content)
    tokens += turn.tokens
    return { entryId: turn.entryId, form: "raw", cue: false, rung: 0 }
  })
  return { text, items, tokens }
}

/** What the system held for the open step: its working entries, its cues, the merged ranking for the question. */
const questionState = async (
  wm: WorkingMemoryClient,
  agent: AgentClient,
  question: Question,
  afterSeq: number,
): Promise<QuestionState> => {
  const depth = Number(process.env.WM_RECALL_DEPTH ?? settings.WM_RECALL_DEPTH.default)
  const view = await agent.view()
  const { results } = await agent.query(question.question.slice(0, MAX_FOCUS_CHARS), { limit: 200 })
  const events = await wm.call(agent.agentId, "readEvents", { afterSeq, max: STEP_EVENTS })
  const cues = new Set<string>()
  for (const { event } of events.events) {
    const e = event as { _tag?: string; entryId?: string; cues?: ReadonlyArray<{ readonly entryId: string }> }
    if (e._tag === "CueRehydrated" && e.entryId !== undefined) cues.add(e.entryId)
    if (e._tag === "CuesRehydrated") for (const cue of e.cues ?? []) cues.add(cue.entryId)
  }
  return {
    // Native working entries only: a recalled cue is listed in the view too, marked transient.
    working: new Set(view.entries.filter((e) => !e.transient).map((e) => e.id)),
    cues,
    rank: new Map(results.map((r, i) => [r.entryId, i] as const)),
    depth,
  }
}

export const runQualityBenchmark = async (options: QualityOptions): Promise<QualityResult> => {
  const started = performance.now()
  const print = options.print ?? ((line: string) => console.log(line))
  const progress = options.progress ?? silentProgress
  const budgets = [...(options.budgets ?? DEFAULT_BUDGETS)]
  const { conversations, title } = options
  const totalTurns = conversations.reduce((s, c) => s + c.turns.length, 0)
  const totalQuestions = conversations.reduce((s, c) => s + c.questions.length, 0)
  const sessionOf = conversations.map((c) => new Map(c.turns.map((t) => [t.entryId, t.session] as const)))
  const rawOf = conversations.map((c) => new Map(c.turns.map((t) => [t.entryId, t.content] as const)))

  const scores = perMethod<QuestionScore[]>(budgets, () => [])
  const served = perMethod<ServedForms>(budgets, emptyServedForms)
  const losses = new Map(budgets.map((b) => [b, emptyLosses()] as const))
  const lossesByGroup = new Map<string, Map<number, Losses>>()
  const perQuestion: QuestionDetails[] = []
  const record = (method: Method, budget: number, c: number, question: Question, context: Served) => {
    scores[method].get(budget)!.push(scoreQuestion(question, context, (id) => sessionOf[c]!.get(id)))
    countServed(
      served[method].get(budget)!,
      context.items,
      context.tokens,
      formattingOf(context.text, (t) => countTokens(t, ENCODING)),
    )
  }

  // Baselines: pure, over the same turns and token counts.
  const ceiling: QuestionScore[] = []
  const baselinesStart = performance.now()
  progress.update(`${title} baselines: ${conversations.length} conversation(s), ${totalQuestions} questions`, true)
  conversations.forEach((conversation, c) => {
    const costs = conversation.turns.map((t) => t.tokens)
    const index = bm25Index(conversation.turns.map((t) => t.content))
    const fifo = new Map(budgets.map((b) => [b, baselineContext(conversation, fifoFill(costs, b))] as const))
    const positionOf = new Map(conversation.turns.map((t) => [t.entryId, t.position] as const))
    for (const question of conversation.questions) {
      const evidence = question.evidence.map((id) => positionOf.get(id)!).sort((a, b) => a - b)
      ceiling.push(scoreQuestion(question, baselineContext(conversation, evidence)))
      const ranking = index.rank(question.question)
      for (const b of budgets) {
        record("fifo", b, c, question, fifo.get(b)!)
        record("bm25", b, c, question, baselineContext(conversation, rankedFill(ranking, costs, b)))
      }
    }
  })
  const baselinesMs = performance.now() - baselinesStart

  // The system, as `npm start` composes it.
  const latencies = {
    record: [] as number[],
    beginStep: [] as number[],
    buildContext: [] as number[],
    endStep: [] as number[],
  }
  let recorded = 0
  let answered = 0
  const status = (phase: string) =>
    `${title} ${phase}: turns ${recorded}/${totalTurns}, questions ${answered}/${totalQuestions}, ${((performance.now() - started) / 1000).toFixed(1)} s`

  const startupStart = performance.now()
  progress.update(status("starting"), true)
  const server = await startNatsServer()
  let runtime: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined
  let client: WorkingMemoryClient | undefined
  let agentBudget = 0
  let tokenMismatches = 0
  let overLimit = 0
  let eventsWhileSettling = 0
  let startupMs = 0
  let ingestMs = 0
  let settleMs = 0
  let questionsMs = 0
  /** How much the log grew while the questions were asked: their steps, recalls and cues, and fading meanwhile. */
  let questionLogBytes = 0
  try {
    const rt = ManagedRuntime.make(systemLayer((name) => NatsSettings.make({ servers: [server.url], name })))
    runtime = rt as ManagedRuntime.ManagedRuntime<unknown, unknown>
    await rt.runPromise(Effect.void)
    const wm = await WorkingMemoryClient.connect({ servers: server.url, name: `${options.agentPrefix}-benchmark` })
    client = wm
    const agents: AgentClient[] = []
    for (const [i, conversation] of conversations.entries()) {
      const agent = wm.agent(agentIdFor(options.agentPrefix, i, conversation))
      const registered = await agent.register({ role: "main" })
      agentBudget = agentBudget === 0 ? registered.budget : Math.min(agentBudget, registered.budget)
      agents.push(agent)
    }
    startupMs = performance.now() - startupStart
    const capped = budgets.filter((b) => b > agentBudget)
    if (capped.length > 0)
      print(
        `note: the agents' budget is ${agentBudget}; working-memory builds at ${capped.join(", ")} are capped there`,
      )

    // Feed every turn, in conversation order, with a bounded number in flight.
    const ingestStart = performance.now()
    progress.update(status("feeding"), true)
    const jobs = conversations.flatMap((conversation, c) =>
      conversation.turns.map((turn) => ({ agent: agents[c]!, turn })),
    )
    await pool(jobs, RECORDS_IN_FLIGHT, async ({ agent, turn }) => {
      const reply = await timed(latencies.record, () =>
        agent.record({ requestId: turn.entryId, origin: "USER", content: turn.content, timestamp: turn.timestamp }),
      )
      if (reply.entryId !== turn.entryId) {
        throw new Error(`turn ${turn.entryId} was recorded as entry '${reply.entryId}', expected '${turn.entryId}'`)
      }
      if (reply.tokens !== turn.tokens) tokenMismatches++
      recorded++
      progress.update(status("feeding"))
    })
    ingestMs = performance.now() - ingestStart

    // Let the services finish what the feeding set off before asking.
    const settleStart = performance.now()
    progress.update(status("settling"), true)
    const jsm = await jetstreamManager(wm.nc)
    const lastSeq = async () => (await jsm.streams.info(EVENTS_STREAM)).state.last_seq
    const fed = Math.max(...agents.map((a) => a.lastSeq))
    let seq = await lastSeq()
    let quietSince = performance.now()
    const behind = async () =>
      (await readStatus(wm.nc, 0)).partitions.reduce((sum, p) => sum + (p.background ? p.lag : 0), 0)
    while (
      (performance.now() - quietSince < SETTLE_QUIET_MS || (await behind()) > 0) &&
      performance.now() - settleStart < SETTLE_MAX_MS
    ) {
      await new Promise((r) => setTimeout(r, 100))
      const now = await lastSeq()
      if (now !== seq) {
        seq = now
        quietSince = performance.now()
      }
    }
    eventsWhileSettling = Math.max(0, seq - fed)
    settleMs = performance.now() - settleStart

    // Ask: one step per question, one build per budget.
    const logBytes = async () => (await jsm.streams.info(EVENTS_STREAM)).state.bytes
    const bytesBeforeQuestions = await logBytes()
    const questionsStart = performance.now()
    progress.update(status("asking"), true)
    await pool([...conversations.keys()], CONVERSATIONS_IN_FLIGHT, async (c) => {
      const agent = agents[c]!
      for (const [q, question] of conversations[c]!.questions.entries()) {
        const text = question.question.slice(0, MAX_FOCUS_CHARS)
        if (question.askedAt !== null) {
          await timed(latencies.record, () =>
            agent.record({
              requestId: questionEntryId(q),
              origin: "USER",
              content: text,
              timestamp: question.askedAt!,
            }),
          )
        }
        const { stepId, seq: begun } = await timed(latencies.beginStep, () =>
          agent.beginStep({ focus: { query: text } }),
        )
        const builds: Array<{ budget: number; built: Served }> = []
        for (const b of budgets) {
          const built = await timed(latencies.buildContext, () => agent.buildContext({ stepId, limit: b }))
          if (built.tokens > b) overLimit++
          record("working-memory", b, c, question, built)
          builds.push({ budget: b, built })
        }
        const state = await questionState(wm, agent, question, begun)
        perQuestion.push({
          conversation: conversations[c]!.name,
          id: question.id,
          group: question.group,
          evidence: question.evidence.map((id) => ({
            entryId: id,
            rank: state.rank.get(id) ?? null,
            working: state.working.has(id),
            cue: state.cues.has(id),
            served: Object.fromEntries(
              builds.map(({ budget, built }) => [
                String(budget),
                built.items.find((i) => i.entryId === id)?.form ?? null,
              ]),
            ),
          })),
          builds: Object.fromEntries(
            builds.map(({ budget, built }) => [
              String(budget),
              built.items.map(
                (i) => `${i.entryId}:${i.form}:${i.cue ? "cue" : "native"}:${state.rank.get(i.entryId) ?? "-"}`,
              ),
            ]),
          ),
        })
        for (const { budget, built } of builds) {
          const rawText = (id: string) => rawOf[c]!.get(id) ?? ""
          countLosses(losses.get(budget)!, question, built, state, rawText)
          if (!lossesByGroup.has(question.group))
            lossesByGroup.set(question.group, new Map(budgets.map((x) => [x, emptyLosses()] as const)))
          countLosses(lossesByGroup.get(question.group)!.get(budget)!, question, built, state, rawText)
        }
        await timed(latencies.endStep, () => agent.endStep(stepId))
        answered++
        progress.update(status("asking"))
      }
    })
    questionsMs = performance.now() - questionsStart
    questionLogBytes = (await logBytes()) - bytesBeforeQuestions
  } finally {
    progress.update(status("stopping"), true)
    await client?.close()
    await runtime?.dispose()
    await server.stop()
    progress.done()
  }

  // Scores.
  const aggregates = {} as Record<Method, Record<string, Aggregate>>
  const byGroup = {} as Record<Method, Record<string, Record<string, Aggregate>>>
  const methods = {} as Record<Method, Record<string, Cell>>
  for (const method of METHODS) {
    aggregates[method] = {}
    byGroup[method] = {}
    methods[method] = {}
    for (const b of budgets) {
      const all = scores[method].get(b)!
      const a = aggregate(all)
      aggregates[method][String(b)] = a
      methods[method][String(b)] = {
        evidenceRecall: round4(a.evidenceRecall),
        answerInContext: round4(a.answerInContext),
        questions: a.questions,
        rawEvidenceRecall: round4(a.rawEvidenceRecall),
        sessionRecall: round4(a.sessionRecall),
        tokens: Math.round(a.tokens),
      }
      const groups: Record<string, Aggregate> = {}
      for (const group of [...new Set(all.map((s) => s.group))].sort()) {
        groups[group] = aggregate(all.filter((s) => s.group === group))
      }
      byGroup[method][String(b)] = groups
    }
  }
  const totalTokens = conversations.reduce((s, c) => s + c.turns.reduce((t, turn) => t + turn.tokens, 0), 0)
  const summary: Summary = {
    budgets,
    methods,
    tokensPerConversation: Math.round(totalTokens / conversations.length),
    ceiling: { answerInContext: round4(aggregate(ceiling).answerInContext) },
  }
  const servedOut = {} as Record<Method, Record<string, ServedForms>>
  for (const method of METHODS) servedOut[method] = Object.fromEntries(served[method])
  const allAsked = conversations.flatMap((c) => c.questions)
  const details: Details = {
    data: options.data,
    conversations: conversations.map((c, i) => ({
      name: c.name,
      agentId: agentIdFor(options.agentPrefix, i, c),
      sessions: c.sessions,
      turns: c.turns.length,
      tokens: c.turns.reduce((s, t) => s + t.tokens, 0),
      questions: c.questions.length,
    })),
    skipped: options.skipped ?? [],
    evidence: {
      unknownIds: allAsked.reduce((s, q) => s + q.unknownEvidence.length, 0),
      questionsWithoutEvidence: allAsked.filter((q) => q.evidence.length === 0).length,
    },
    aggregates,
    byGroup,
    served: servedOut,
    losses: Object.fromEntries(losses),
    lossesByGroup: Object.fromEntries([...lossesByGroup].map(([g, m]) => [g, Object.fromEntries(m)])),
    questions: perQuestion,
    checks: { tokenMismatches, overLimit, agentBudget, eventsWhileSettling },
    timings: {
      totalMs: Math.round(performance.now() - started),
      startupMs: Math.round(startupMs),
      ingestMs: Math.round(ingestMs),
      settleMs: Math.round(settleMs),
      questionsMs: Math.round(questionsMs),
      questionLogBytes,
      baselinesMs: Math.round(baselinesMs),
      turnsPerSecond: ingestMs > 0 ? Math.round(totalTurns / (ingestMs / 1000)) : 0,
      record: latencyStats(latencies.record),
      beginStep: latencyStats(latencies.beginStep),
      buildContext: latencyStats(latencies.buildContext),
      endStep: latencyStats(latencies.endStep),
    },
  }

  if (options.out !== undefined) {
    mkdirSync(dirname(options.out), { recursive: true })
    writeFileSync(options.out, `${JSON.stringify(summary, null, 2)}\n`)
    writeFileSync(detailsPath(options.out), `${JSON.stringify(details, null, 2)}\n`)
  }

  print(
    `${title}: ${conversations.length} conversation(s), ${totalTurns} turns, ${summary.tokensPerConversation} tokens per conversation on average; ` +
      `${totalQuestions} questions (${allAsked.length - details.evidence.questionsWithoutEvidence} with evidence, ` +
      `${aggregates.fifo[String(budgets[0])]?.withAnswerCheck ?? 0} with an answer check)`,
  )
  for (const note of options.notes ?? []) print(note)
  print("")
  for (const line of formatSummary(summary)) print(line)
  print("")
  for (const line of formatByGroup(budgets, details)) print(line)
  print("")
  for (const line of formatLosses(budgets, details)) print(line)
  print("")
  for (const line of formatServed(budgets, details)) print(line)
  print("")
  for (const line of formatTimings(details)) print(line)
  const warnings = [
    tokenMismatches > 0
      ? `${tokenMismatches} turn(s) were charged a different token count by the system than by the baselines`
      : "",
    overLimit > 0 ? `${overLimit} build(s) served more tokens than their limit` : "",
    details.evidence.unknownIds > 0
      ? `${details.evidence.unknownIds} evidence id(s) name no turn and were ignored`
      : "",
    eventsWhileSettling > 0
      ? `the services appended ${eventsWhileSettling} event(s) after the last turn was recorded`
      : "",
    conversations.some((c) => c.reorderedTurns > 0)
      ? "some sessions began before the previous one ended; their turns were moved a second after it"
      : "",
  ].filter((w) => w.length > 0)
  if (warnings.length > 0) print("")
  for (const warning of warnings) print(`note: ${warning}`)
  if (options.out !== undefined) print(`\nwrote ${options.out} and ${detailsPath(options.out)}`)
  return { summary, details }
}
