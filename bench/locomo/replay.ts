/**
 * A fast replay of the LoCoMo benchmark's ranking and packing, in process:
 * every turn of a conversation is a long-term record (its vector by the
 * offline embedder, its key points made as fading makes them), each question
 * is ranked by the retrieval's own `rankBothTiers` over the same lexical,
 * episode and dense indexes, its hits become cues the way retrieval makes
 * them (focused key points beside the raw text), and the context builder
 * packs them. No NATS, no fading in flight: seconds instead of minutes, for
 * comparing ranking and packing choices; the full benchmark (bench/locomo.ts)
 * is what reports.
 *
 *   node bench/locomo/replay.ts --data <dir> [--conversations conv-26,conv-30,conv-41] [--budgets 1024,2048]
 *
 * Prints evidence recall / answer-in-context per budget, and the share of
 * the evidence among the N best hits of the ranking.
 */
import { parseArgs } from "node:util"
import { Effect, HashMap } from "effect"
import type { WorkingEntry } from "../../contracts/entry.ts"
import type { LongTermPayload } from "../../contracts/longterm.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { buildContext, type Candidate } from "../../domain/context-builder.ts"
import { DEFAULT_FADE_CONFIG } from "../../domain/fade-score.ts"
import { extractKeyPoints, recalledKeyPoints } from "../../domain/key-points.ts"
import { blockTokens } from "../../domain/render.ts"
import { terms } from "../../domain/terms.ts"
import { makeEmbeddedStore } from "../../services/memory/longterm/embedded-store.ts"
import { EpisodeIndex } from "../../services/memory/retrieval/episodes.ts"
import { LexicalIndex } from "../../services/memory/retrieval/lexical-index.ts"
import { type RankingSources, rankBothTiers } from "../../services/memory/retrieval/rank.ts"
import { offlineProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { loadOfflineEmbedder } from "../../services/platform/embedding/offline-embedder.ts"
import { ASKED_CATEGORIES, type Conversation, ENCODING, loadLocomoDirectory } from "./dataset.ts"
import { parseBudgets, parseConversationNames } from "./options.ts"
import { aggregate, type QuestionScore, scoreQuestion } from "./score.ts"

/** As many hits as retrieval recalls by default (WM_RECALL_DEPTH). */
const RECALL_DEPTH = 150
const RANK_DEPTHS = [40, 80, 150]

const entryOf = (turn: Conversation["turns"][number], ordinal: number): WorkingEntry => {
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
    rung: 2,
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
    transient: true,
  } as WorkingEntry
}

const main = async () => {
  const { values } = parseArgs({
    options: {
      data: { type: "string" },
      budgets: { type: "string", default: "1024,2048" },
      conversations: { type: "string" },
    },
  })
  if (values.data === undefined) throw new Error("--data is required")
  const budgets = parseBudgets(values.budgets)
  const names = values.conversations === undefined ? undefined : parseConversationNames(values.conversations)
  const conversations = loadLocomoDirectory(values.data).conversations.filter(
    (c) => names === undefined || names.includes(c.name.replace(/\.json$/i, "")),
  )
  const embedder = await loadOfflineEmbedder()
  const store = makeEmbeddedStore()
  const sources: RankingSources = {
    store,
    embeddings: offlineProvider(embedder),
    lexical: new LexicalIndex(),
    episodes: new EpisodeIndex(),
    workingVectors: () => Effect.succeed([]),
  }
  const scores = new Map(budgets.map((b) => [b, [] as QuestionScore[]] as const))
  const ranked = RANK_DEPTHS.map(() => 0)
  let withEvidence = 0
  let rankMs = 0
  let queries = 0
  for (const conversation of conversations) {
    const agentId = conversation.name.replace(/\.json$/i, "")
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
    const entries = new Map(conversation.turns.map((t, i) => [t.entryId, entryOf(t, i)] as const))
    const view = {
      config: { id: agentId, encoding: ENCODING },
      entries: HashMap.empty(),
      clock: conversation.turns.at(-1)?.timestamp ?? 0,
    } as unknown as AgentView
    for (const question of conversation.questions) {
      if (!ASKED_CATEGORIES.has(question.category)) continue
      const started = performance.now()
      const hits = await Effect.runPromise(rankBothTiers(view, question.question, { limit: RECALL_DEPTH }, sources))
      rankMs += performance.now() - started
      queries++
      if (question.evidence.length > 0) {
        withEvidence++
        const position = new Map(hits.map((h, i) => [h.entryId, i] as const))
        RANK_DEPTHS.forEach((depth, d) => {
          const found = question.evidence.filter((id) => (position.get(id) ?? Infinity) < depth).length
          ranked[d]! += found / question.evidence.length
        })
      }
      const focus = new Set(terms(question.question))
      const candidates: Candidate[] = hits.map((hit) => {
        const entry = entries.get(hit.entryId)!
        const keyPoints = recalledKeyPoints(entry, entry.content!, focus, ENCODING)
        const cue: WorkingEntry = {
          ...entry,
          keyPoints: keyPoints?.text ?? null,
          tokens: { raw: entry.tokens.raw, ...(keyPoints ? { keyPoints: keyPoints.tokens } : {}) },
        }
        return { entry: cue, priority: hit.relevance, cue: true }
      })
      for (const budget of budgets)
        scores.get(budget)!.push(scoreQuestion(question, buildContext(candidates, budget, "timestamp", ENCODING)))
    }
  }
  console.log(`replay: ${conversations.map((c) => c.name).join(", ")}; ${queries} questions`)
  for (const budget of budgets) {
    const a = aggregate(scores.get(budget)!)
    console.log(
      `@${budget}  evidence recall ${a.evidenceRecall.toFixed(3)}  answer in context ${a.answerInContext.toFixed(3)}`,
    )
  }
  console.log(
    `evidence among the best hits: ${RANK_DEPTHS.map((d, i) => `${d}: ${(ranked[i]! / withEvidence).toFixed(3)}`).join(", ")}`,
  )
  console.log(`ranking: ${(rankMs / queries).toFixed(1)} ms per question`)
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
