/**
 * The LoCoMo memory-quality benchmark, end to end: starts a nats-server and
 * the whole system in this process as `npm start` does, feeds each
 * conversation turn by turn into one agent through the SDK, builds the
 * context of every question of categories 1–4 at each budget, and scores it
 * beside FIFO and BM25 fills of the same turns at the same token counts.
 */

import { mkdirSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"
import { jetstreamManager } from "@nats-io/jetstream"
import { Effect, ManagedRuntime } from "effect"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { renderBlock } from "../../domain/render.ts"
import { countTokens } from "../../domain/tokens.ts"
import { startNatsServer } from "../../infra/nats-server.ts"
import { type AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { systemLayer } from "../../services/system.ts"
import { bm25Index, fifoFill, rankedFill } from "./baselines.ts"
import { ASKED_CATEGORIES, type Conversation, ENCODING, loadLocomoDirectory, type Question } from "./dataset.ts"
import { DEFAULT_BUDGETS, detailsPath } from "./options.ts"
import {
  type Cell,
  countServed,
  type Details,
  emptyServedForms,
  formatByCategory,
  formatServed,
  formatSummary,
  formatTimings,
  formattingOf,
  latencyStats,
  METHODS,
  type Method,
  type Progress,
  type ServedForms,
  type Summary,
  silentProgress,
} from "./report.ts"
import { type Aggregate, aggregate, type QuestionScore, type ServedContext, scoreQuestion } from "./score.ts"

export interface LocomoOptions {
  /** A directory of LoCoMo-format `*.json` files. */
  readonly data: string
  readonly budgets?: ReadonlyArray<number>
  /** Where to write the summary JSON; the diagnostics go beside it (see `detailsPath`). */
  readonly out?: string
  /** Where the tables go (default: standard output). */
  readonly print?: (line: string) => void
  readonly progress?: Progress
  /** Only these conversations (file names without `.json`, or `file#sample`); all when absent. */
  readonly conversations?: ReadonlyArray<string>
}

export interface LocomoResult {
  readonly summary: Summary
  readonly details: Details
}

/** Records in flight at once while feeding the conversations. */
const RECORDS_IN_FLIGHT = 64
/** Conversations whose questions are asked at the same time (each agent holds one open step at a time). */
const CONVERSATIONS_IN_FLIGHT = 4
/** The longest question text a focus holds. */
const MAX_FOCUS_CHARS = 4_000
/** After feeding, wait until the log has been quiet this long (services may still be reacting), at most SETTLE_MAX_MS. */
const SETTLE_QUIET_MS = 500
const SETTLE_MAX_MS = 10_000

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

const agentIdFor = (index: number, conversation: Conversation): string =>
  `locomo-${index + 1}-${conversation.name.replace(/\.json$/i, "").replace(/[^A-Za-z0-9_-]/g, "-")}`.slice(0, 64)

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

const conversationName = (c: Conversation) => c.name.replace(/\.json(?=#|$)/i, "")

/** The named conversations, in directory order; a name that matches none is an error. */
const selectConversations = (all: ReadonlyArray<Conversation>, names: ReadonlyArray<string>): Conversation[] => {
  const unknown = names.filter(
    (n) => !all.some((c) => conversationName(c) === n || conversationName(c).startsWith(`${n}#`)),
  )
  if (unknown.length > 0)
    throw new Error(
      `--conversations: no conversation named ${unknown.join(", ")} (have ${all.map(conversationName).join(", ")})`,
    )
  return all.filter((c) => names.some((n) => conversationName(c) === n || conversationName(c).startsWith(`${n}#`)))
}

export const runLocomoBenchmark = async (options: LocomoOptions): Promise<LocomoResult> => {
  const started = performance.now()
  const print = options.print ?? ((line: string) => console.log(line))
  const progress = options.progress ?? silentProgress
  const budgets = [...(options.budgets ?? DEFAULT_BUDGETS)]

  progress.update(`locomo loading ${options.data}`, true)
  const loaded = loadLocomoDirectory(options.data)
  const { skipped } = loaded
  const conversations =
    options.conversations === undefined
      ? loaded.conversations
      : selectConversations(loaded.conversations, options.conversations)
  for (const file of skipped) print(`skipped ${file}: not a LoCoMo conversation`)
  const asked = conversations.map((c) => c.questions.filter((q) => ASKED_CATEGORIES.has(q.category)))
  const totalTurns = conversations.reduce((s, c) => s + c.turns.length, 0)
  const totalQuestions = asked.reduce((s, qs) => s + qs.length, 0)

  const scores = perMethod<QuestionScore[]>(budgets, () => [])
  const served = perMethod<ServedForms>(budgets, emptyServedForms)
  const record = (method: Method, budget: number, question: Question, context: Served) => {
    scores[method].get(budget)!.push(scoreQuestion(question, context))
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
  progress.update(`locomo baselines: ${conversations.length} conversation(s), ${totalQuestions} questions`, true)
  conversations.forEach((conversation, c) => {
    const costs = conversation.turns.map((t) => t.tokens)
    const index = bm25Index(conversation.turns.map((t) => t.content))
    const fifo = new Map(budgets.map((b) => [b, baselineContext(conversation, fifoFill(costs, b))] as const))
    const positionOf = new Map(conversation.turns.map((t) => [t.entryId, t.position] as const))
    for (const question of asked[c]!) {
      const evidence = question.evidence.map((id) => positionOf.get(id)!).sort((a, b) => a - b)
      ceiling.push(scoreQuestion(question, baselineContext(conversation, evidence)))
      const ranking = index.rank(question.question)
      for (const b of budgets) {
        record("fifo", b, question, fifo.get(b)!)
        record("bm25", b, question, baselineContext(conversation, rankedFill(ranking, costs, b)))
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
    `locomo ${phase}: turns ${recorded}/${totalTurns}, questions ${answered}/${totalQuestions}, ${((performance.now() - started) / 1000).toFixed(1)} s`

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
  try {
    const rt = ManagedRuntime.make(systemLayer((name) => NatsSettings.make({ servers: [server.url], name })))
    runtime = rt as ManagedRuntime.ManagedRuntime<unknown, unknown>
    await rt.runPromise(Effect.void)
    const wm = await WorkingMemoryClient.connect({ servers: server.url, name: "locomo-benchmark" })
    client = wm
    const agents: AgentClient[] = []
    for (const [i, conversation] of conversations.entries()) {
      const agent = wm.agent(agentIdFor(i, conversation))
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
        throw new Error(`turn ${turn.diaId} was recorded as entry '${reply.entryId}', expected '${turn.entryId}'`)
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
    while (performance.now() - quietSince < SETTLE_QUIET_MS && performance.now() - settleStart < SETTLE_MAX_MS) {
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
    const questionsStart = performance.now()
    progress.update(status("asking"), true)
    await pool([...conversations.keys()], CONVERSATIONS_IN_FLIGHT, async (c) => {
      const agent = agents[c]!
      for (const question of asked[c]!) {
        const focus = { query: question.question.slice(0, MAX_FOCUS_CHARS) }
        const { stepId } = await timed(latencies.beginStep, () => agent.beginStep({ focus }))
        for (const b of budgets) {
          const built = await timed(latencies.buildContext, () => agent.buildContext({ stepId, limit: b }))
          if (built.tokens > b) overLimit++
          record("working-memory", b, question, built)
        }
        await timed(latencies.endStep, () => agent.endStep(stepId))
        answered++
        progress.update(status("asking"))
      }
    })
    questionsMs = performance.now() - questionsStart
  } finally {
    progress.update(status("stopping"), true)
    await client?.close()
    await runtime?.dispose()
    await server.stop()
    progress.done()
  }

  // Scores.
  const aggregates = {} as Record<Method, Record<string, Aggregate>>
  const byCategory = {} as Record<Method, Record<string, Record<string, Aggregate>>>
  const methods = {} as Record<Method, Record<string, Cell>>
  for (const method of METHODS) {
    aggregates[method] = {}
    byCategory[method] = {}
    methods[method] = {}
    for (const b of budgets) {
      const all = scores[method].get(b)!
      const a = aggregate(all)
      aggregates[method][String(b)] = a
      methods[method][String(b)] = {
        evidenceRecall: round4(a.evidenceRecall),
        answerInContext: round4(a.answerInContext),
        questions: a.questions,
      }
      const cats: Record<string, Aggregate> = {}
      for (const category of [...new Set(all.map((s) => s.category))].sort((x, y) => x - y)) {
        cats[String(category)] = aggregate(all.filter((s) => s.category === category))
      }
      byCategory[method][String(b)] = cats
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
  const allAsked = asked.flat()
  const details: Details = {
    data: options.data,
    conversations: conversations.map((c, i) => ({
      name: c.name,
      agentId: agentIdFor(i, c),
      sessions: c.sessions,
      turns: c.turns.length,
      tokens: c.turns.reduce((s, t) => s + t.tokens, 0),
      questions: asked[i]!.length,
    })),
    skippedFiles: skipped,
    evidence: {
      unknownIds: allAsked.reduce((s, q) => s + q.unknownEvidence.length, 0),
      questionsWithoutEvidence: allAsked.filter((q) => q.evidence.length === 0).length,
    },
    aggregates,
    byCategory,
    served: servedOut,
    checks: { tokenMismatches, overLimit, agentBudget, eventsWhileSettling },
    timings: {
      totalMs: Math.round(performance.now() - started),
      startupMs: Math.round(startupMs),
      ingestMs: Math.round(ingestMs),
      settleMs: Math.round(settleMs),
      questionsMs: Math.round(questionsMs),
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
    `LoCoMo: ${conversations.length} conversation(s), ${totalTurns} turns, ${summary.tokensPerConversation} tokens per conversation on average; ` +
      `${totalQuestions} questions of categories 1–4 (${allAsked.length - details.evidence.questionsWithoutEvidence} with evidence, ` +
      `${aggregates.fifo[String(budgets[0])]?.withAnswerCheck ?? 0} with an answer check)`,
  )
  print("")
  for (const line of formatSummary(summary)) print(line)
  print("")
  for (const line of formatByCategory(budgets, details)) print(line)
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
