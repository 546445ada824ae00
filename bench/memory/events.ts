/**
 * Events for the memory benchmark, each decoded from its own JSON text as a
 * service decodes a stored event: every entry's text, tags and ids are
 * separate strings on the heap, as they are in production, not one string
 * shared by every view.
 */
import type { Origin } from "../../contracts/entry.ts"
import type { EventOf } from "../../contracts/events.ts"
import { blockTokens } from "../../domain/render.ts"
import { fadeScore } from "../support/full-view.ts"
import { keyPointsOf, memoryText, summaryOf } from "../support/realistic-entries.ts"

/** A text an entry is recorded with, and its forms once faded, with their token counts. */
export interface EntryText {
  readonly origin: Origin
  readonly tags: ReadonlyArray<string>
  readonly content: string
  readonly rawTokens: number
  readonly keyPoints: { readonly text: string; readonly tokens: number }
  readonly summary: { readonly text: string; readonly tokens: number }
}

export type EntryKind = "note" | "toolResult"

/** What each kind of entry is: a short note (about 40 tokens) or a tool's result (about 400). */
export const ENTRY_KINDS: Readonly<Record<EntryKind, { readonly origin: Origin; readonly targetTokens: number }>> = {
  note: { origin: "INTERNAL", targetTokens: 40 },
  toolResult: { origin: "SYSTEM", targetTokens: 400 },
}

/** The first words of `source` that make at least `tokens` tokens as a block (label and all). */
const cutToTokens = (source: string, origin: Origin, tokens: number): string => {
  const words = source.split(" ")
  const count = (n: number) => blockTokens({ timestamp: 0, origin }, "raw", words.slice(0, n).join(" "), "o200k_base")
  let lo = 1
  let hi = words.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (count(mid) >= tokens) hi = mid
    else lo = mid + 1
  }
  return words.slice(0, lo).join(" ")
}

/** `count` distinct texts of one kind, tokenised once (the benchmark folds copies of them, decoded afresh). */
export const entryTexts = (kind: EntryKind, count: number, seed = 0): EntryText[] => {
  const { origin, targetTokens } = ENTRY_KINDS[kind]
  const texts: EntryText[] = []
  for (let i = 0; i < count; i++) {
    // Realistic memories, more than enough of them (over 3 characters a token), cut to the size.
    let source = kind === "toolResult" ? "Tool result:" : ""
    for (let k = 0; source.length < targetTokens * 8; k++)
      source = `${source}${source === "" ? "" : " "}${memoryText(seed + i * 97 + k)}`
    const content = cutToTokens(source, origin, targetTokens)
    const at = { timestamp: 0, origin }
    const keyPoints = keyPointsOf(content)
    const summary = summaryOf({ origin, content, emotionalWeight: 0, tags: [] })
    texts.push({
      origin,
      tags: kind === "toolResult" ? ["tool"] : [],
      content,
      rawTokens: blockTokens(at, "raw", content, "o200k_base"),
      keyPoints: { text: keyPoints, tokens: blockTokens(at, "keyPoints", keyPoints, "o200k_base") },
      summary: { text: summary, tokens: blockTokens(at, "summary", summary, "o200k_base") },
    })
  }
  return texts
}

/** A fresh copy, as JSON decoding of a stored event makes one. */
const decoded = <T>(event: T): T => JSON.parse(JSON.stringify(event)) as T

let events = 0
const envelope = (agentId: string, at: number) => ({
  v: 1 as const,
  eventId: `${agentId}:${(events++).toString(36).padStart(12, "0")}`,
  agentId,
  at,
  causationId: null,
  correlationId: null,
})

/** Agent ids as an operator would name them. */
export const agentIdOf = (n: number): string => `agent-${String(n).padStart(6, "0")}`

/** Entry ids of the length the gateway gives them (a request id, a NUID: 22 characters). */
export const entryIdOf = (n: number): string => `E${n.toString(36).toUpperCase().padStart(21, "0")}`

export const registeredEvent = (agentId: string, budget: number): EventOf<"AgentRegistered"> =>
  decoded({
    _tag: "AgentRegistered",
    ...envelope(agentId, 0),
    config: { id: agentId, role: "main", budget, encoding: "o200k_base" },
  })

// Step events are not decoded afresh: a view keeps nothing of them once the step has ended.
export const stepStartedEvent = (agentId: string, stepId: string, at: number): EventOf<"StepStarted"> => ({
  _tag: "StepStarted",
  ...envelope(agentId, at),
  stepId,
  focus: { task: "weekly planning" },
})

export const stepEndedEvent = (agentId: string, stepId: string, at: number): EventOf<"StepEnded"> => ({
  _tag: "StepEnded",
  ...envelope(agentId, at),
  stepId,
})

export const recordedEvent = (
  agentId: string,
  entryId: string,
  text: EntryText,
  at: number,
): EventOf<"EntryRecorded"> =>
  decoded({
    _tag: "EntryRecorded",
    ...envelope(agentId, at),
    entryId,
    timestamp: at,
    origin: text.origin,
    content: text.content,
    tags: [...text.tags],
    moodSnapshot: null,
    emotionalWeight: 0,
    tokens: text.rawTokens,
  })

/** The fade's rung change: to key points (1) or to the summary (2). */
export const fadedEvent = (
  agentId: string,
  entryId: string,
  text: EntryText,
  to: 1 | 2,
  at: number,
): EventOf<"RungChanged"> => {
  const form = to === 1 ? text.keyPoints : text.summary
  return decoded({
    _tag: "RungChanged",
    ...envelope(agentId, at),
    entryId,
    from: to === 1 ? 0 : 1,
    to,
    text: form.text,
    tokens: form.tokens,
    score: fadeScore(at, 0.9),
    producer: { kind: to === 1 ? "extractive" : "offline", model: "bench", fallbackReason: null, attempts: 1 },
  })
}

/**
 * The fade's demotion of a summarised entry to long-term. The embedding is
 * left empty: the working view does not keep it (the long-term index does,
 * measured by `npm run bench:speed`).
 */
export const demotedEvent = (
  agentId: string,
  entryId: string,
  text: EntryText,
  recordedAt: number,
  at: number,
): EventOf<"EntryDemoted"> =>
  decoded({
    _tag: "EntryDemoted",
    ...envelope(agentId, at),
    v: 2,
    entryId,
    from: 2,
    score: fadeScore(at, 0.9),
    embedding: {
      model: "bench",
      dims: 0,
      vector: "",
      producer: { kind: "offline", model: "bench", fallbackReason: null, attempts: 1 },
    },
    entry: {
      timestamp: recordedAt,
      origin: text.origin,
      correlationId: null,
      tags: [...text.tags],
      moodSnapshot: null,
      emotionalWeight: 0,
      rawTokens: text.rawTokens,
      keyPoints: null,
      summary: text.summary,
      citationCount: 0,
    },
  })
