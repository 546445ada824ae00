/**
 * The event model. Every change to memory is one of these, stored once on the
 * WM_EVENTS stream; projections fold them into views. Each event carries a
 * schema version `v`: a new version is added beside the old one, never in
 * its place, so old logs keep decoding.
 */
import { Schema } from "effect"
import { AgentConfig, Budget } from "./agent.ts"
import { EmotionalWeight, Mood, Origin, RepresentationKind, TokenCount, WorkingRung } from "./entry.ts"
import { Embedding, FadeScore, Producer } from "./fade.ts"
import { Focus, TaskKind } from "./focus.ts"
import { AgentId, EntryId, EpochMillis, EventId, StepId } from "./ids.ts"

/** The current schema version of every event type; what deciders write and the decoder upcasts to. */
export const EVENT_VERSIONS = {
  AgentRegistered: 1,
  BudgetChanged: 1,
  EntryRecorded: 1,
  EntriesRead: 1,
  EntriesReferenced: 1,
  StepStarted: 1,
  StepEnded: 1,
  FocusChanged: 1,
  RungChanged: 1,
  EntryDemoted: 2,
  CueRehydrated: 1,
  CuesRehydrated: 1,
  StepRecalled: 1,
  CuePromoted: 1,
  CueDropped: 1,
  CuesDropped: 1,
  EntryForgotten: 1,
  AgentForgotten: 1,
} as const

const stamped = {
  eventId: EventId,
  agentId: AgentId,
  /** When the event was stamped by the service that published it. */
  at: EpochMillis,
  /** The event or request that caused this one. */
  causationId: Schema.NullOr(Schema.String),
  /** The thread this event belongs to, across agents. */
  correlationId: Schema.NullOr(Schema.String),
}

const envelope = { v: Schema.Literal(1), ...stamped }

export const AgentRegistered = Schema.TaggedStruct("AgentRegistered", {
  ...envelope,
  config: AgentConfig,
})

export const BudgetChanged = Schema.TaggedStruct("BudgetChanged", {
  ...envelope,
  reason: Schema.Literals(["retune", "hyperfocus-enter", "hyperfocus-exit"]),
  /** The budget outside hyperfocus. */
  baseBudget: Budget,
  /** The budget in force after this event. */
  budget: Budget,
})

export const EntryRecorded = Schema.TaggedStruct("EntryRecorded", {
  ...envelope,
  entryId: EntryId,
  timestamp: EpochMillis,
  origin: Origin,
  content: Schema.String,
  tags: Schema.Array(Schema.String),
  moodSnapshot: Schema.NullOr(Mood),
  emotionalWeight: EmotionalWeight,
  /** Token cost of the raw representation as serialised. */
  tokens: TokenCount,
})

export const ServedItem = Schema.Struct({
  entryId: EntryId,
  form: RepresentationKind,
  cue: Schema.Boolean,
})

export const EntriesRead = Schema.TaggedStruct("EntriesRead", {
  ...envelope,
  stepId: Schema.NullOr(StepId),
  budget: Budget,
  tokens: TokenCount,
  served: Schema.Array(ServedItem),
})

export const EntriesReferenced = Schema.TaggedStruct("EntriesReferenced", {
  ...envelope,
  stepId: StepId,
  entryIds: Schema.Array(EntryId),
})

export const StepStarted = Schema.TaggedStruct("StepStarted", {
  ...envelope,
  stepId: StepId,
  focus: Schema.NullOr(Focus),
})

export const StepEnded = Schema.TaggedStruct("StepEnded", {
  ...envelope,
  stepId: StepId,
})

export const FocusChanged = Schema.TaggedStruct("FocusChanged", {
  ...envelope,
  focus: Focus,
  taskKind: Schema.NullOr(TaskKind),
  /** True when the task itself changed (a task transition), not only the subgoal or query. */
  transition: Schema.Boolean,
})

export const RungChanged = Schema.TaggedStruct("RungChanged", {
  ...envelope,
  entryId: EntryId,
  from: WorkingRung,
  to: Schema.Literals([1, 2]),
  /** The new representation: key points at rung 1, the summary at rung 2. */
  text: Schema.String,
  tokens: TokenCount,
  score: FadeScore,
  producer: Producer,
})

/**
 * What an entry leaves behind for its long-term record, as working held it
 * when it demoted. Carried by the event so the long-term projection needs
 * nothing from earlier events: it resumes from a checkpoint at any point.
 */
export const DemotedEntry = Schema.Struct({
  timestamp: EpochMillis,
  origin: Origin,
  /** The entry's own correlation id (the event's envelope may carry another). */
  correlationId: Schema.NullOr(Schema.String),
  tags: Schema.Array(Schema.String),
  moodSnapshot: Schema.NullOr(Mood),
  emotionalWeight: EmotionalWeight,
  rawTokens: TokenCount,
  keyPoints: Schema.NullOr(Schema.Struct({ text: Schema.String, tokens: TokenCount })),
  summary: Schema.NullOr(Schema.Struct({ text: Schema.String, tokens: TokenCount })),
  citationCount: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
})
export type DemotedEntry = typeof DemotedEntry.Type

/**
 * v2 carries `entry`. A v1 event (before it) is upcast with `entry: null`:
 * the long-term projection then takes those facts from the entry's earlier
 * events, which it has seen when it rebuilds from the start of the log.
 */
export const EntryDemoted = Schema.TaggedStruct("EntryDemoted", {
  v: Schema.Literal(EVENT_VERSIONS.EntryDemoted),
  ...stamped,
  entryId: EntryId,
  from: WorkingRung,
  score: FadeScore,
  embedding: Embedding,
  entry: Schema.NullOr(DemotedEntry),
})

export const CueTrigger = Schema.Literals(["explicit-reference", "similarity", "task-transition", "warm-up"])

/** Metadata a rehydrated record carries back, so working can serialise it. */
export const RecalledEntry = Schema.Struct({
  timestamp: EpochMillis,
  origin: Origin,
  tags: Schema.Array(Schema.String),
  moodSnapshot: Schema.NullOr(Mood),
  emotionalWeight: EmotionalWeight,
  form: RepresentationKind,
  text: Schema.String,
  tokens: TokenCount,
  /** Key points beside a raw text, so the builder can serve the cheaper form when room is short. */
  keyPoints: Schema.optionalKey(Schema.Struct({ text: Schema.String, tokens: TokenCount })),
})

/** One cue on its entry's subject: a long-term entry named outright, or a recall as earlier versions wrote it. */
export const CueRehydrated = Schema.TaggedStruct("CueRehydrated", {
  ...envelope,
  stepId: StepId,
  entryId: EntryId,
  trigger: CueTrigger,
  relevance: Schema.Finite,
  recalled: RecalledEntry,
})

/**
 * The cues one recall brought back for the open step, best first, in one event on the step's subject: each
 * cue's content sealed under its own entry's key (contracts/sealed.ts), so a forget of the entry destroys
 * its cue here too. A cue applies only while its step is open, working does not hold its entry in full,
 * and its entry was not forgotten during the step (domain/agent-view.ts).
 */
export const CuesRehydrated = Schema.TaggedStruct("CuesRehydrated", {
  ...envelope,
  stepId: StepId,
  trigger: CueTrigger,
  cues: Schema.Array(
    Schema.Struct({
      entryId: EntryId,
      relevance: Schema.Finite,
      /** The entry's correlation id (its episode). */
      correlationId: Schema.NullOr(Schema.String),
      recalled: RecalledEntry,
    }),
  ),
})

/**
 * How relevant retrieval found the open step's working entries to its
 * focus, recorded once so every build of the step (and any replay of it)
 * ranks natives and cues on the same scale.
 */
export const StepRecalled = Schema.TaggedStruct("StepRecalled", {
  ...envelope,
  stepId: StepId,
  trigger: CueTrigger,
  similarities: Schema.Array(Schema.Struct({ entryId: EntryId, similarity: Schema.Finite })),
})

export const CuePromoted = Schema.TaggedStruct("CuePromoted", {
  ...envelope,
  stepId: Schema.NullOr(StepId),
  entryId: EntryId,
  /** Warm-up promotes without a step; a referenced cue promotes within one. */
  trigger: CueTrigger,
  recalled: RecalledEntry,
})

/** One cue dropped at its step's end; written by earlier versions (now: CuesDropped, one per step). */
export const CueDropped = Schema.TaggedStruct("CueDropped", {
  ...envelope,
  stepId: StepId,
  entryId: EntryId,
})

/**
 * The cues of a step the agent did not reference, dropped once the step ended: one event on the step's
 * subject for all of them (ids only, no content), instead of one on each entry's subject.
 */
export const CuesDropped = Schema.TaggedStruct("CuesDropped", {
  ...envelope,
  stepId: StepId,
  entryIds: Schema.Array(EntryId).check(Schema.isMinLength(1)),
})

/**
 * Tombstones of a verifiable forget: the entry's (or the agent's) subjects
 * were purged from the log, and every projection drops what it held.
 */
export const EntryForgotten = Schema.TaggedStruct("EntryForgotten", {
  ...envelope,
  entryId: EntryId,
})

export const AgentForgotten = Schema.TaggedStruct("AgentForgotten", {
  ...envelope,
})

export const MemoryEvent = Schema.Union([
  AgentRegistered,
  BudgetChanged,
  EntryRecorded,
  EntriesRead,
  EntriesReferenced,
  StepStarted,
  StepEnded,
  FocusChanged,
  RungChanged,
  EntryDemoted,
  CueRehydrated,
  CuesRehydrated,
  StepRecalled,
  CuePromoted,
  CueDropped,
  CuesDropped,
  EntryForgotten,
  AgentForgotten,
])
export type MemoryEvent = typeof MemoryEvent.Type
export type MemoryEventTag = MemoryEvent["_tag"]
export type EventOf<T extends MemoryEventTag> = Extract<MemoryEvent, { _tag: T }>

export const EVENT_TAGS: ReadonlyArray<MemoryEventTag> = Object.keys(EVENT_VERSIONS) as MemoryEventTag[]
// Every event type has a current version.
const _everyTagVersioned: Record<MemoryEventTag, number> = EVENT_VERSIONS
void _everyTagVersioned

/** Events that concern one entry; they are published on the entry's own subject. */
export const entryIdOf = (event: MemoryEvent): string | null => {
  switch (event._tag) {
    case "EntryRecorded":
    case "RungChanged":
    case "EntryDemoted":
    case "CueRehydrated":
    case "CuePromoted":
    case "CueDropped":
    case "EntryForgotten":
      return event.entryId
    default:
      return null
  }
}

/** Decodes an event of the current versions from its JSON text; stored events go through contracts/decode.ts, which upcasts. */
export const MemoryEventFromJson = Schema.fromJsonString(MemoryEvent)
