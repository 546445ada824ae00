/** Builders of events for specs of the pure domain, and the view they fold into (`viewOf`). */
import type { AgentConfig, Encoding } from "../../contracts/agent.ts"
import type { Origin } from "../../contracts/entry.ts"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import { blockTokens } from "../../domain/render.ts"

export const AGENT = "agent-1"
let counter = 0
const envelope = (at: number) => ({
  v: 1 as const,
  eventId: `ev-${++counter}`,
  agentId: AGENT,
  at,
  causationId: null,
  correlationId: null,
})

export const registered = (config: Partial<AgentConfig> = {}, at = 0): EventOf<"AgentRegistered"> => ({
  _tag: "AgentRegistered",
  ...envelope(at),
  config: { id: AGENT, role: "main", budget: 8_000, encoding: "o200k_base", ...config },
})

export const recorded = (
  entryId: string,
  content: string,
  timestamp: number,
  options: {
    origin?: Origin
    encoding?: Encoding
    emotionalWeight?: number
    tags?: string[]
    correlationId?: string
  } = {},
): EventOf<"EntryRecorded"> => {
  const origin = options.origin ?? "USER"
  return {
    _tag: "EntryRecorded",
    ...envelope(timestamp),
    correlationId: options.correlationId ?? null,
    entryId,
    timestamp,
    origin,
    content,
    tags: options.tags ?? [],
    moodSnapshot: null,
    emotionalWeight: options.emotionalWeight ?? 0,
    tokens: blockTokens({ timestamp, origin }, "raw", content, options.encoding ?? "o200k_base"),
  }
}

const noScore = {
  total: 1,
  parts: { age: 1, frequency: 0, emotion: 0, focus: 0, pressure: 0 },
  trigger: "threshold" as const,
  threshold: 0.5,
  usage: 0.5,
  tau: 0.8,
  now: 0,
}

export const faded = (
  entry: EventOf<"EntryRecorded">,
  to: 1 | 2,
  text: string,
  encoding: Encoding = "o200k_base",
): EventOf<"RungChanged"> => ({
  _tag: "RungChanged",
  ...envelope(entry.timestamp + 1),
  entryId: entry.entryId,
  from: to === 1 ? 0 : 1,
  to,
  text,
  tokens: blockTokens(entry, to === 1 ? "keyPoints" : "summary", text, encoding),
  score: noScore,
  producer: { kind: to === 1 ? "extractive" : "offline", model: "test", fallbackReason: null, attempts: 1 },
})

/** Folds events in order with the production reducer, numbering them as a log would; undefined before a registration. */
export const foldEvents = (events: ReadonlyArray<MemoryEvent>): AgentView | undefined => {
  let view: AgentView | undefined
  events.forEach((event, i) => {
    view = evolve(view, event, { seq: i + 1 })
  })
  return view
}

/** The view of an agent the events registered, folded as `foldEvents` does. */
export const viewOf = (...events: ReadonlyArray<MemoryEvent>): AgentView => {
  const view = foldEvents(events)
  if (view === undefined) throw new Error("no AgentRegistered among the events")
  return view
}

export const demoted = (
  entryId: string,
  at: number,
  entry: EventOf<"EntryDemoted">["entry"] = null,
): EventOf<"EntryDemoted"> => ({
  _tag: "EntryDemoted",
  ...envelope(at),
  v: 2,
  entryId,
  from: 2,
  score: noScore,
  embedding: {
    model: "test",
    dims: 0,
    vector: "",
    producer: { kind: "offline", model: "test", fallbackReason: null, attempts: 1 },
  },
  entry,
})

export const referenced = (stepId: string, entryIds: string[], at: number): EventOf<"EntriesReferenced"> => ({
  _tag: "EntriesReferenced",
  ...envelope(at),
  stepId,
  entryIds,
})

export const stepStarted = (
  stepId: string,
  at: number,
  focus: EventOf<"StepStarted">["focus"] = null,
): EventOf<"StepStarted"> => ({
  _tag: "StepStarted",
  ...envelope(at),
  stepId,
  focus,
})

export const stepEnded = (stepId: string, at: number): EventOf<"StepEnded"> => ({
  _tag: "StepEnded",
  ...envelope(at),
  stepId,
})

export const focusChanged = (task: string, at: number): EventOf<"FocusChanged"> => ({
  _tag: "FocusChanged",
  ...envelope(at),
  focus: { task },
  taskKind: null,
  transition: true,
})

/** What a cue carries back of an entry: `text` raw, 12 tokens unless `overrides` say otherwise. */
export const recalledEntry = (
  text: string,
  overrides: Partial<EventOf<"CueRehydrated">["recalled"]> = {},
): EventOf<"CueRehydrated">["recalled"] => ({
  timestamp: 1,
  origin: "USER",
  tags: [],
  moodSnapshot: null,
  emotionalWeight: 0,
  form: "raw",
  text,
  tokens: 12,
  ...overrides,
})
