/**
 * A fast replay of a memory-quality benchmark's ranking and packing, in
 * process: every turn of a conversation is a long-term record (its vector by
 * the offline embedder, its key points made as fading makes them), each
 * question is ranked by the retrieval's own `rankBothTiers` over the same
 * lexical, episode and dense indexes, its hits become cues as retrieval
 * plans them (domain/cue-plan.ts), and the context builder packs them. A
 * question asked at a time of its own is, as in the full run, an entry of
 * working memory. No NATS and no fading in flight: seconds instead of
 * minutes, for comparing ranking and packing choices; the full benchmarks
 * (bench/locomo.ts, bench/longmemeval.ts) are what report.
 *
 *   node bench/quality/replay.ts --locomo <dir> [--conversations conv-26,conv-30] [--budgets 1024,2048]
 *   node bench/quality/replay.ts --longmemeval <file> [--questions <ids>] [--types <types>] [--budgets …]
 *   … [--split dev|held-out] [--embedder minilm-int8|minilm|offline]   (default: WM_EMBEDDER's default)
 *
 * Prints evidence recall / answer-in-context per budget beside BM25, where
 * the evidence was lost, and the share of the evidence among the N best hits.
 */
import { createHash } from "node:crypto"
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Effect, HashMap } from "effect"
import type { WorkingEntry } from "../../contracts/entry.ts"
import type { LongTermPayload } from "../../contracts/longterm.ts"
import { settings } from "../../contracts/settings.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { buildContext, type Candidate } from "../../domain/context-builder.ts"
import type { Recalled } from "../../domain/cue-decide.ts"
import { planCueForms, rawCue, sizedRawCue } from "../../domain/cue-plan.ts"
import { DEFAULT_FADE_CONFIG } from "../../domain/fade-score.ts"
import { extractKeyPoints, focusTerms } from "../../domain/key-points.ts"
import { blockTokens } from "../../domain/render.ts"
import { terms } from "../../domain/terms.ts"
import { makeEmbeddedStore } from "../../services/memory/longterm/embedded-store.ts"
import { EpisodeIndex } from "../../services/memory/retrieval/episodes.ts"
import { LexicalIndex } from "../../services/memory/retrieval/lexical-index.ts"
import { type RankingSources, rankBothTiers } from "../../services/memory/retrieval/rank.ts"
import type { Embedder } from "../../services/platform/embedding/embedder.ts"
import { offlineProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { loadLocalEmbedder } from "../../services/platform/embedding/local-embedders.ts"
import { bm25Index, rankedFill } from "./baselines.ts"
import { type Conversation, ENCODING, type Question, type Turn } from "./dataset.ts"
import { askedOnly, loadLocomoDirectory, selectConversations } from "./locomo-dataset.ts"
import { loadLongMemEval } from "./longmemeval-dataset.ts"
import { countLosses, emptyLosses, LOSS_STAGES } from "./losses.ts"
import { parseBudgets, parseNames, splitMembers } from "./options.ts"
import { aggregate, type QuestionScore, scoreQuestion } from "./score.ts"

const RECALL_DEPTH = settings.WM_RECALL_DEPTH.default === "150" ? 150 : Number(settings.WM_RECALL_DEPTH.default)
const RANK_DEPTHS = [10, 20, 40, 80, 150]
/** The budget of the benchmarks' agents (role `main`): the room recalled cues may fill. */
const AGENT_BUDGET = 8_000

const entryOf = (turn: Turn, ordinal: number, transient: boolean): WorkingEntry => {
  const keyPoints = extractKeyPoints(turn.content, DEFAULT_FADE_CONFIG.keyPointsShare, ENCODING)
  const held = keyPoints !== turn.content.trim()
  return {
    id: turn.entryId,
    timestamp: turn.timestamp,
    origin: "USER",
    content: turn.content,
    correlationId: null,
    tags: [],
    moodSnapshot: null,
    rung: transient ? 2 : 0,
    referenceCount: 0,
    citationCount: 0,
    emotionalWeight: 0,
    keyPoints: held ? keyPoints : null,
    summary: null,
    tokens: {
      raw: turn.tokens,
      ...(held
        ? { keyPoints: blockTokens({ timestamp: turn.timestamp, origin: "USER" }, "keyPoints", keyPoints, ENCODING) }
        : {}),
    },
    lastEventSeq: 0,
    ordinal,
    trackedSince: turn.timestamp,
    lastReadAt: null,
    lastCitedAt: null,
    transient,
  } as WorkingEntry
}

/**
 * The embedder with its vectors kept in a file under the system's temporary
 * directory, by model and text: a sentence model takes minutes over a
 * LongMemEval set, and a replay is run many times over the same texts.
 */
const cachedEmbedder = async (embedder: Embedder): Promise<Embedder> => {
  const file = join(tmpdir(), `wm-replay-vectors-${embedder.model.replace(/[^A-Za-z0-9_.-]/g, "_")}.bin`)
  const known = new Map<string, Float32Array>()
  const keyOf = (text: string) => createHash("sha1").update(text).digest("base64")
  if (existsSync(file)) {
    const bytes = readFileSync(file)
    const record = 28 + 4 * embedder.dims
    for (let at = 0; at + record <= bytes.length; at += record) {
      const key = bytes.subarray(at, at + 28).toString("latin1")
      known.set(key, new Float32Array(bytes.buffer.slice(bytes.byteOffset + at + 28, bytes.byteOffset + at + record)))
    }
  }
  return {
    model: embedder.model,
    dims: embedder.dims,
    embed: async (texts) => {
      const keys = texts.map(keyOf)
      const missing = [...new Set(texts.filter((_, i) => !known.has(keys[i]!)))]
      if (missing.length > 0) {
        const vectors = await embedder.embed(missing)
        const chunks: Buffer[] = []
        missing.forEach((text, i) => {
          const key = keyOf(text)
          known.set(key, vectors[i]!)
          chunks.push(
            Buffer.from(key, "latin1"),
            Buffer.from(vectors[i]!.buffer, vectors[i]!.byteOffset, vectors[i]!.byteLength),
          )
        })
        appendFileSync(file, Buffer.concat(chunks))
      }
      return keys.map((k) => known.get(k)!)
    },
  }
}

const load = (values: Record<string, string | undefined>): Conversation[] => {
  if (values.locomo !== undefined) {
    const all = loadLocomoDirectory(values.locomo).conversations
    const names =
      values.conversations !== undefined
        ? parseNames("--conversations", values.conversations)
        : values.split !== undefined
          ? splitMembers("locomo", values.split)
          : undefined
    const chosen = names === undefined ? all : selectConversations(all, names)
    return chosen.map(askedOnly)
  }
  if (values.longmemeval !== undefined) {
    const ids =
      values.questions !== undefined
        ? parseNames("--questions", values.questions)
        : values.split !== undefined
          ? splitMembers("longmemeval", values.split)
          : undefined
    const types = values.types === undefined ? undefined : parseNames("--types", values.types)
    return loadLongMemEval(values.longmemeval).conversations.filter(
      (c) =>
        (ids === undefined || ids.includes(c.name)) && (types === undefined || types.includes(c.questions[0]!.group)),
    )
  }
  throw new Error("--locomo <dir> or --longmemeval <file> is required")
}

const main = async () => {
  const { values } = parseArgs({
    options: {
      locomo: { type: "string" },
      longmemeval: { type: "string" },
      budgets: { type: "string", default: "1024,2048,4096" },
      conversations: { type: "string" },
      split: { type: "string" },
      questions: { type: "string" },
      types: { type: "string" },
      dump: { type: "string" },
      embedder: { type: "string", default: settings.WM_EMBEDDER.default },
    },
  })
  const budgets = parseBudgets(values.budgets)
  const conversations = load(values)
  const embedder = await cachedEmbedder(
    await Effect.runPromise(
      loadLocalEmbedder(values.embedder ?? settings.WM_EMBEDDER.default, {
        ...(process.env.WM_MODELS_DIR ? { modelsDir: process.env.WM_MODELS_DIR } : {}),
      }),
    ),
  )
  const scores = new Map(budgets.map((b) => [b, [] as QuestionScore[]] as const))
  const bm25Scores = new Map(budgets.map((b) => [b, [] as QuestionScore[]] as const))
  const losses = new Map(budgets.map((b) => [b, emptyLosses()] as const))
  const ranked = RANK_DEPTHS.map(() => 0)
  const bm25Ranked = RANK_DEPTHS.map(() => 0)
  const dump: unknown[] = []
  let withEvidence = 0
  let rankMs = 0
  let queries = 0
  for (const conversation of conversations) {
    const agentId = conversation.name.replace(/[^A-Za-z0-9_-]/g, "-")
    const store = makeEmbeddedStore()
    const sources: RankingSources = {
      store,
      embeddings: offlineProvider(embedder),
      lexical: new LexicalIndex(),
      episodes: new EpisodeIndex(),
      workingVectors: (_agent, entries) => Effect.promise(() => embedder.embed(entries.map((e) => e.content ?? ""))),
    }
    const vectors = await embedder.embed(conversation.turns.map((t) => t.content))
    const records = conversation.turns.map((turn, i) => ({
      payload: {
        agentId,
        entryId: turn.entryId,
        origin: "USER",
        tags: [],
        correlationId: null,
        moodSnapshot: null,
        emotionalWeight: 0,
        timestamp: turn.timestamp,
        demotedAt: turn.timestamp,
        summary: turn.content,
        summaryForm: "raw",
        summaryTokens: turn.tokens,
        keyPoints: null,
        keyPointsTokens: null,
        rawTokens: turn.tokens,
        citationCount: 0,
        model: embedder.model,
      } as LongTermPayload,
      vector: vectors[i]!,
    }))
    await Effect.runPromise(store.upsert(records))
    for (const turn of conversation.turns) {
      sources.lexical.add(agentId, turn.entryId, terms(turn.content))
      sources.episodes.add(agentId, turn.entryId, turn.timestamp, null)
    }
    const entries = new Map(conversation.turns.map((t, i) => [t.entryId, entryOf(t, i, true)] as const))
    const rawOf = new Map(conversation.turns.map((t) => [t.entryId, t.content] as const))
    const sessionOf = new Map(conversation.turns.map((t) => [t.entryId, t.session] as const))
    const costs = conversation.turns.map((t) => t.tokens)
    const bm25 = bm25Index(conversation.turns.map((t) => t.content))
    const clock = conversation.turns.at(-1)?.timestamp ?? 0
    for (const [q, question] of conversation.questions.entries()) {
      const asked = askedEntry(question, q, conversation.turns.length)
      if (asked !== null) {
        sources.lexical.add(agentId, asked.id, terms(asked.content!))
        sources.episodes.add(agentId, asked.id, asked.timestamp, null)
      }
      const view = {
        config: { id: agentId, encoding: ENCODING },
        entries: asked === null ? HashMap.empty() : HashMap.make([asked.id, asked]),
        clock: Math.max(clock, asked?.timestamp ?? 0),
      } as unknown as AgentView
      const started = performance.now()
      const hits = await Effect.runPromise(rankBothTiers(view, question.question, { limit: RECALL_DEPTH }, sources))
      rankMs += performance.now() - started
      queries++
      const position = new Map(hits.map((h, i) => [h.entryId, i] as const))
      if (question.evidence.length > 0) {
        withEvidence++
        RANK_DEPTHS.forEach((depth, d) => {
          const found = question.evidence.filter((id) => (position.get(id) ?? Infinity) < depth).length
          ranked[d]! += found / question.evidence.length
        })
      }
      const focus = focusTerms(question.question, (t) => sources.lexical.inverseDocumentFrequency(agentId, t))
      const longTermHits = hits.filter((h) => h.tier === "long-term")
      const planned = planCueForms(longTermHits, AGENT_BUDGET, (hit) => {
        const e = entries.get(hit.entryId)!
        return {
          rawTokens: e.tokens.raw,
          keyPoints: e.keyPoints !== null ? { text: e.keyPoints, tokens: e.tokens.keyPoints! } : undefined,
          summaryTokens: Infinity,
        }
      })
      // As a recall does, only the cues a build at the agent's budget would serve are read and extracted: chosen
      // by their sizes, then again with the extracts made, until no other would be served.
      const cueOf = (hit: (typeof planned)[number]["hit"], recalled: Recalled): Candidate => {
        const entry = entries.get(hit.entryId)!
        const cue: WorkingEntry = {
          ...entry,
          keyPoints: recalled.keyPoints?.text ?? null,
          tokens: { raw: entry.tokens.raw, ...(recalled.keyPoints ? { keyPoints: recalled.keyPoints.tokens } : {}) },
        }
        return { entry: cue, priority: hit.relevance, cue: true }
      }
      const askedCandidates = (): Candidate[] => {
        if (asked === null) return []
        const hit = hits.find((h) => h.entryId === asked.id)
        return [{ entry: asked, priority: hit?.relevance ?? 0, cue: false }]
      }
      const read = new Map<string, Candidate>()
      for (let round = 0; round < planned.length; round++) {
        const trial = planned.map(
          ({ hit, keyPoints }) =>
            read.get(hit.entryId) ??
            cueOf(
              hit,
              sizedRawCue({ ...entries.get(hit.entryId)!, tags: [] }, entries.get(hit.entryId)!.tokens.raw, keyPoints),
            ),
        )
        const served = new Set(
          buildContext([...trial, ...askedCandidates()], AGENT_BUDGET, "timestamp", ENCODING)
            .items.filter((i) => i.cue)
            .map((i) => i.entryId),
        )
        const unread = planned.filter((p) => served.has(p.hit.entryId) && !read.has(p.hit.entryId))
        if (unread.length === 0) break
        for (const { hit, keyPoints } of unread) {
          const entry = entries.get(hit.entryId)!
          const recalled = rawCue(
            { ...entry, tags: [] },
            { content: entry.content!, tokens: entry.tokens.raw },
            keyPoints,
            focus,
            ENCODING,
          )
          read.set(hit.entryId, cueOf(hit, recalled))
        }
      }
      const candidates: Candidate[] = [...planned.flatMap((p) => read.get(p.hit.entryId) ?? []), ...askedCandidates()]
      const cues = new Set(planned.map((p) => p.hit.entryId))
      const state = { working: new Set<string>(), cues, rank: position, depth: RECALL_DEPTH }
      const bm25Ranking = bm25.rank(question.question)
      if (question.evidence.length > 0) {
        const at = new Map(bm25Ranking.map((p, i) => [conversation.turns[p]!.entryId, i] as const))
        RANK_DEPTHS.forEach((depth, d) => {
          const found = question.evidence.filter((id) => (at.get(id) ?? Infinity) < depth).length
          bm25Ranked[d]! += found / question.evidence.length
        })
      }
      const dumped: Record<string, unknown> = {
        id: question.id,
        group: question.group,
        question: question.question,
        answer: question.answer,
        evidence: question.evidence.map((id) => ({ id, rank: position.get(id) ?? null, text: rawOf.get(id) })),
      }
      dump.push(dumped)
      // As a recall does, only the cues a build at the agent's budget serves are rehydrated.
      const atAgentBudget = new Set(
        buildContext(candidates, AGENT_BUDGET, "timestamp", ENCODING)
          .items.filter((i) => i.cue)
          .map((i) => i.entryId),
      )
      const trimmed = candidates.filter((c) => !c.cue || atAgentBudget.has(c.entry.id))
      for (const budget of budgets) {
        const built = buildContext(trimmed, budget, "timestamp", ENCODING)
        const score = scoreQuestion(question, built, (id) => sessionOf.get(id))
        scores.get(budget)!.push(score)
        dumped[`wm${budget}`] = { recall: score.evidenceRecall, answer: score.answerInContext, text: built.text }
        countLosses(losses.get(budget)!, question, built, state, (id) => rawOf.get(id) ?? "")
        const fill = rankedFill(bm25Ranking, costs, budget)
        let text = ""
        for (const p of fill) text += `${conversation.turns[p]!.content}\n`
        const items = fill.map((p) => ({ entryId: conversation.turns[p]!.entryId, form: "raw" }))
        const tokens = fill.reduce((s, p) => s + costs[p]!, 0)
        const bm25Score = scoreQuestion(question, { text, items, tokens }, (id) => sessionOf.get(id))
        bm25Scores.get(budget)!.push(bm25Score)
        dumped[`bm25${budget}`] = { recall: bm25Score.evidenceRecall, answer: bm25Score.answerInContext, text }
      }
    }
  }
  if (values.dump !== undefined) writeFileSync(values.dump, JSON.stringify(dump, null, 1))
  console.log(`replay: ${conversations.length} conversation(s), ${queries} questions`)
  for (const budget of budgets) {
    const a = aggregate(scores.get(budget)!)
    const b = aggregate(bm25Scores.get(budget)!)
    const l = losses.get(budget)!
    console.log(
      `@${budget}  recall ${a.evidenceRecall.toFixed(3)} (bm25 ${b.evidenceRecall.toFixed(3)})  answer ${a.answerInContext.toFixed(3)} (bm25 ${b.answerInContext.toFixed(3)})  raw ${a.rawEvidenceRecall.toFixed(3)}  session ${a.sessionRecall.toFixed(3)}  lost: ${LOSS_STAGES.map((s) => `${s} ${(l[s] / Math.max(1, l.evidence)).toFixed(3)}`).join(", ")}; kp dropped ${l.keyPointsDropped}/${l.answerInEvidence}`,
    )
  }
  const groups = [...new Set(conversations.flatMap((c) => c.questions.map((q) => q.group)))].sort()
  for (const group of groups) {
    const line = budgets
      .map((b) => {
        const a = aggregate(scores.get(b)!.filter((s) => s.group === group))
        const m = aggregate(bm25Scores.get(b)!.filter((s) => s.group === group))
        return `@${b} ${a.evidenceRecall.toFixed(3)} (${m.evidenceRecall.toFixed(3)})`
      })
      .join("  ")
    console.log(`  ${group.padEnd(26)} ${line}`)
  }
  console.log(
    `evidence among the best hits: ${RANK_DEPTHS.map((d, i) => `${d}: ${(ranked[i]! / withEvidence).toFixed(3)}`).join(", ")}`,
  )
  console.log(
    `evidence among bm25's best:  ${RANK_DEPTHS.map((d, i) => `${d}: ${(bm25Ranked[i]! / withEvidence).toFixed(3)}`).join(", ")}`,
  )
  console.log(`ranking: ${(rankMs / queries).toFixed(1)} ms per question`)
}

/** The working entry a question asked at a time of its own is recorded as (as the full run records it), or null. */
const askedEntry = (question: Question, index: number, ordinal: number): WorkingEntry | null => {
  if (question.askedAt === null) return null
  const content = question.question
  return {
    ...entryOf(
      {
        entryId: `question-${index + 1}`,
        session: "",
        position: ordinal,
        timestamp: question.askedAt,
        content,
        tokens: blockTokens({ timestamp: question.askedAt, origin: "USER" }, "raw", content, ENCODING),
      },
      ordinal,
      false,
    ),
    keyPoints: null,
    tokens: { raw: blockTokens({ timestamp: question.askedAt, origin: "USER" }, "raw", content, ENCODING) },
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
