/**
 * Request/reply API over NATS. Every operation is served on
 * `wm.api.<agentId>.<subject>` (see subjects.ts) with a JSON request body and
 * a JSON reply that is either `{ "ok": true, "value": ... }` or
 * `{ "ok": false, "error": { "_tag": ..., ... } }`.
 *
 * Writes reply with `seq`, the stream sequence of the stored event. Reads
 * accept `afterSeq` and wait until the view has applied that sequence, so a
 * client always reads its own writes.
 */
import { Schema } from "effect"
import { AgentConfig, Budget, Encoding, RelevanceWeights, Role } from "./agent.ts"
import { EmotionalWeight, Mood, Origin, RepresentationKind, TokenCount, WorkingEntry, WorkingRung } from "./entry.ts"
import { ApiError } from "./errors.ts"
import { FadeSettings } from "./fade.ts"
import { Focus, TaskKind } from "./focus.ts"
import { EntryId, EpochMillis, RequestId, StepId } from "./ids.ts"
import { RecordFilter } from "./longterm.ts"
import { Text } from "./text.ts"

/** Largest entry content accepted, in UTF-8 bytes. */
export const MAX_CONTENT_BYTES = 64 * 1024
export const MAX_TAGS = 32
export const MAX_REFERENCES = 256

const Seq = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
const base = {
  /** Idempotency key: retrying with the same requestId stores and applies the write once. */
  requestId: Schema.optionalKey(RequestId),
}
const utf8 = new TextEncoder()
/**
 * Entry content: at most MAX_CONTENT_BYTES in UTF-8. JSON Schema cannot count
 * bytes, so the JSON Schema says `maxLength` 65536 characters: exact for
 * ASCII, and a necessary bound only for other text (one character can take up
 * to 4 bytes).
 */
const Content = Schema.String.annotate({
  description: `entry text, 1 character to ${MAX_CONTENT_BYTES} bytes of UTF-8. maxLength is exact for ASCII; text with other characters must also stay within ${MAX_CONTENT_BYTES} UTF-8 bytes, which JSON Schema cannot express (the server refuses it with a ValidationError on content)`,
}).check(
  Schema.isMinLength(1),
  // ECMAScript's \s is the set String.prototype.trim removes: content of whitespace only says nothing.
  Schema.isPattern(/\S/u, { message: "must contain visible text" }),
  Schema.makeFilter(
    (content) => {
      const bytes = utf8.encode(content).length
      return bytes <= MAX_CONTENT_BYTES ? undefined : `is ${bytes} bytes; the limit is ${MAX_CONTENT_BYTES} bytes`
    },
    { toJsonSchema: () => [{ maxLength: MAX_CONTENT_BYTES }, true] },
  ),
)
const Tag = Text(1, 64)

export const RegisterAgentRequest = Schema.Struct({
  ...base,
  role: Role,
  /** Defaults to the role's budget; required for the custom role. */
  budget: Schema.optionalKey(Budget),
  encoding: Schema.optionalKey(Encoding),
  /** Fade settings of this agent: τ, overall and per task kind. */
  fade: Schema.optionalKey(FadeSettings),
  /** Weights of the relevance score r = α·sim + β·recency + γ·log(1+freq) for this agent. */
  relevance: Schema.optionalKey(RelevanceWeights),
}).check(
  // JSON Schema carries this rule as an if/then on role (added by json-schema.ts).
  Schema.makeFilter((request) =>
    request.role === "custom" && request.budget === undefined
      ? { path: ["budget"], issue: "is required for the custom role" }
      : undefined,
  ),
)
export const RegisterAgentResponse = Schema.Struct({ agent: AgentConfig, budget: Budget, seq: Seq })

export const RetuneBudgetRequest = Schema.Struct({ ...base, budget: Budget })
export const EnterHyperfocusRequest = Schema.Struct({
  ...base,
  /** The expanded budget; twice the base budget when omitted. */
  budget: Schema.optionalKey(Budget),
})
export const ExitHyperfocusRequest = Schema.Struct({ ...base })
export const BudgetResponse = Schema.Struct({
  baseBudget: Budget,
  budget: Budget,
  hyperfocus: Schema.Boolean,
  seq: Seq,
})

export const RecordEntryRequest = Schema.Struct({
  ...base,
  content: Content,
  origin: Origin,
  /** When the entry happened; now when omitted (set it to import history). */
  timestamp: Schema.optionalKey(EpochMillis),
  correlationId: Schema.optionalKey(Text(1, 200)),
  tags: Schema.optionalKey(Schema.Array(Tag).check(Schema.isMaxLength(MAX_TAGS))),
  mood: Schema.optionalKey(Mood),
  emotionalWeight: Schema.optionalKey(EmotionalWeight),
})
export const RecordEntryResponse = Schema.Struct({
  entryId: EntryId,
  timestamp: EpochMillis,
  tokens: TokenCount,
  seq: Seq,
  /** True when this requestId had already been stored: nothing new was written. */
  duplicate: Schema.Boolean,
})

/** The most entries WM_MAX_BATCH_ENTRIES may let one `entry.recordMany` take, and its default. */
export const MAX_BATCH_ENTRIES = 10_000
export const DEFAULT_BATCH_ENTRIES = 500

/**
 * A batch of entries, each an `entry.record` request of its own (its `requestId` is its idempotency key
 * and entry id, as there). Each item is validated on its own, so the JSON Schema says only that it is
 * there: an item that is not a valid `entry.record` request is refused in its result, and the rest are
 * recorded.
 */
export const RecordManyRequest = Schema.Struct({
  entries: Schema.Array(Schema.Unknown).check(Schema.isMinLength(1)).annotate({
    description:
      "entry.record requests (operations.recordEntry.request), in the order they are appended; each is validated alone, and one that is not valid is refused in its own result while the others are recorded. At most WM_MAX_BATCH_ENTRIES (500 by default) per batch, else BatchTooLarge",
  }),
})
/** The answer for one entry of a batch: what `entry.record` would have answered for it, or its refusal. */
export const RecordManyResult = Schema.Union([
  Schema.Struct({
    /** The entry's position in the batch. */
    index: Seq,
    ok: Schema.Literal(true),
    ...RecordEntryResponse.fields,
  }),
  Schema.Struct({
    index: Seq,
    ok: Schema.Literal(false),
    /** Why this entry was not recorded; a ValidationError names the field as `entries.<index>.<field>`. */
    error: ApiError,
  }),
])
export const RecordManyResponse = Schema.Struct({
  /** One per entry, in the batch's order. */
  results: Schema.Array(RecordManyResult),
  /** The highest stream sequence of the batch's entries (0 when none was recorded): reads wait for it. */
  seq: Seq,
})

export const BeginStepRequest = Schema.Struct({
  ...base,
  stepId: Schema.optionalKey(StepId),
  focus: Schema.optionalKey(Focus),
})
export const StepResponse = Schema.Struct({ stepId: StepId, seq: Seq })

export const SetFocusRequest = Schema.Struct({ ...base, focus: Focus, taskKind: Schema.optionalKey(TaskKind) })
export const FocusResponse = Schema.Struct({ transition: Schema.Boolean, seq: Seq })

export const ReferenceEntriesRequest = Schema.Struct({
  ...base,
  stepId: StepId,
  entryIds: Schema.optionalKey(Schema.Array(EntryId).check(Schema.isMaxLength(MAX_REFERENCES))),
  /** Quotations of entries' content: each refers to the entries (working or long-term) whose text contains it. */
  quotes: Schema.optionalKey(Schema.Array(Text(8, 2_000)).check(Schema.isMaxLength(16))),
}).check(
  // JSON Schema carries this rule as an anyOf (added by json-schema.ts).
  Schema.makeFilter((request) =>
    (request.entryIds ?? []).length > 0 || (request.quotes ?? []).length > 0
      ? undefined
      : { path: ["entryIds"], issue: "name at least one entry, by id or by a quote" },
  ),
)
export const ReferenceResponse = Schema.Struct({ entryIds: Schema.Array(EntryId), seq: Seq })

export const EndStepRequest = Schema.Struct({ ...base, stepId: StepId })

export const ContextOrder = Schema.Literals(["timestamp", "priority"])
export const BuildContextRequest = Schema.Struct({
  ...base,
  stepId: Schema.optionalKey(StepId),
  /** A per-call limit below the agent's budget. */
  limit: Schema.optionalKey(Budget),
  /** timestamp (default): oldest first. priority: the builder's priority order. */
  order: Schema.optionalKey(ContextOrder),
  afterSeq: Schema.optionalKey(Seq),
})
export const ContextItem = Schema.Struct({
  entryId: EntryId,
  timestamp: EpochMillis,
  origin: Origin,
  rung: WorkingRung,
  form: RepresentationKind,
  cue: Schema.Boolean,
  tokens: TokenCount,
})
export const ContextRecall = Schema.Literals(["served", "unavailable", "none"])
export const BuiltContext = Schema.Struct({
  text: Schema.String,
  tokens: TokenCount,
  budget: Budget,
  items: Schema.Array(ContextItem),
  /** Working entries that did not fit. */
  omitted: Schema.Int,
  /**
   * Whether long-term memory was recalled for it: `served` (the focused step's recall is in it, cues or none
   * found), `unavailable` (the step is focused but retrieval did not answer: built from working alone; the
   * step's next build asks again), `none` (no focused step, nothing to recall for). Always set by this server.
   */
  recall: Schema.optionalKey(ContextRecall),
  seq: Seq,
})

export const GetViewRequest = Schema.Struct({ afterSeq: Schema.optionalKey(Seq) })
export const ViewResponse = Schema.Struct({
  agent: AgentConfig,
  budget: Budget,
  hyperfocus: Schema.Boolean,
  /** Tokens working carries at the entries' current rungs. */
  usage: TokenCount,
  entriesByRung: Schema.Struct({ "0": Schema.Int, "1": Schema.Int, "2": Schema.Int }),
  step: Schema.NullOr(Schema.Struct({ stepId: StepId, focus: Schema.NullOr(Focus) })),
  focus: Schema.NullOr(Focus),
  entries: Schema.Array(WorkingEntry),
  appliedSeq: Seq,
})

export const SubstrateGetRequest = Schema.Struct({ entryId: EntryId, afterSeq: Schema.optionalKey(Seq) })
export const SubstrateRecord = Schema.Struct({
  agentId: Schema.String,
  entryId: EntryId,
  timestamp: EpochMillis,
  origin: Origin,
  content: Schema.String,
  tags: Schema.Array(Schema.String),
  correlationId: Schema.NullOr(Schema.String),
  moodSnapshot: Schema.NullOr(Mood),
  emotionalWeight: EmotionalWeight,
  tokens: TokenCount,
  /** Stream sequence of the EntryRecorded event. */
  seq: Seq,
})

const Weights = RelevanceWeights

export const QueryRequest = Schema.Struct({
  query: Text(1, 4_000),
  limit: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 200 }))),
  filter: Schema.optionalKey(RecordFilter),
  /** Include each result's score parts. */
  explain: Schema.optionalKey(Schema.Boolean),
  afterSeq: Schema.optionalKey(Seq),
})
export const ScoreExplanation = Schema.Struct({
  similarity: Schema.Finite,
  dense: Schema.Finite,
  lexical: Schema.Finite,
  recency: Schema.Finite,
  frequency: Schema.Finite,
  weights: Weights,
})
export const QueryResult = Schema.Struct({
  entryId: EntryId,
  tier: Schema.Literals(["working", "long-term"]),
  origin: Origin,
  timestamp: EpochMillis,
  tags: Schema.Array(Schema.String),
  correlationId: Schema.NullOr(Schema.String),
  form: RepresentationKind,
  text: Schema.String,
  relevance: Schema.Finite,
  explain: Schema.optionalKey(ScoreExplanation),
})
export const QueryResponse = Schema.Struct({ results: Schema.Array(QueryResult) })

export const ThreadRequest = Schema.Struct({
  correlationId: Schema.String.check(Schema.isMinLength(1)),
  afterSeq: Schema.optionalKey(Seq),
})
export const ThreadResponse = Schema.Struct({
  entries: Schema.Array(
    Schema.Struct({
      agentId: Schema.String,
      entryId: EntryId,
      tier: Schema.Literals(["working", "long-term"]),
      timestamp: EpochMillis,
      origin: Origin,
      form: RepresentationKind,
      text: Schema.String,
    }),
  ),
})

export const RecallRequest = Schema.Struct({ stepId: StepId, afterSeq: Schema.optionalKey(Seq) })
export const RecallResponse = Schema.Struct({ cues: Schema.Int, seq: Seq })

export const WarmUpRequest = Schema.Struct({
  ...base,
  /** How many of the most recently demoted records come back (default 5). */
  count: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
  /** Chosen once the memory service has seen the log up to here (the caller's last write): its demotions included. */
  afterSeq: Schema.optionalKey(Seq),
})
export const WarmUpResponse = Schema.Struct({ entryIds: Schema.Array(EntryId), seq: Seq })

/** Largest number of events one `view.events` reply carries. */
export const MAX_EVENTS_PER_READ = 1_000
/** Longest a `view.events` request may wait for a new event. */
export const MAX_EVENTS_WAIT_MS = 30_000

export const ReadEventsRequest = Schema.Struct({
  /** Events stored after this stream sequence (default 0: from the start). */
  afterSeq: Schema.optionalKey(Seq),
  /** At most this many events (default 256); a reply also stops short of the server's max_payload. */
  max: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_EVENTS_PER_READ }))),
  /** When nothing is stored after `afterSeq` yet, wait up to this long for the agent's next event (default 0). */
  waitMs: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_EVENTS_WAIT_MS }))),
})
export const ReadEventsResponse = Schema.Struct({
  /** The agent's events in stream order, each with its stream sequence and subject. */
  events: Schema.Array(
    Schema.Struct({
      seq: Seq,
      subject: Schema.String,
      /** The event as stored: one of events.schema.json (decoded by the reader, which may know fewer versions). */
      event: Schema.Unknown.annotate({ description: "One event as stored in WM_EVENTS: see events.schema.json" }),
      /** The W3C trace context of the request that appended the event, when it was traced (docs/tracing.md). */
      traceparent: Schema.optionalKey(Schema.String),
    }),
  ),
  /** The stream sequence this reply reads up to: the `afterSeq` of the next request. */
  lastSeq: Seq,
  /** More of the agent's events were already stored after `lastSeq`. */
  more: Schema.Boolean,
})

export type Operation = {
  /** Subject suffix after `wm.api.<agentId>.` */
  readonly subject: string
  readonly servedBy: "gateway" | "working" | "substrate" | "retrieval"
  readonly summary: string
  readonly request: Schema.Top
  readonly response: Schema.Top
}

export const operations = {
  registerAgent: {
    subject: "agent.register",
    servedBy: "gateway",
    summary: "Register an agent with its role, budget and tokenizer encoding.",
    request: RegisterAgentRequest,
    response: RegisterAgentResponse,
  },
  retuneBudget: {
    subject: "budget.retune",
    servedBy: "gateway",
    summary: "Change the agent's base budget at run time.",
    request: RetuneBudgetRequest,
    response: BudgetResponse,
  },
  enterHyperfocus: {
    subject: "budget.hyperfocus.enter",
    servedBy: "gateway",
    summary: "Expand the budget for a deeper dive (twice the base budget unless given).",
    request: EnterHyperfocusRequest,
    response: BudgetResponse,
  },
  exitHyperfocus: {
    subject: "budget.hyperfocus.exit",
    servedBy: "gateway",
    summary: "Return to the base budget.",
    request: ExitHyperfocusRequest,
    response: BudgetResponse,
  },
  recordEntry: {
    subject: "entry.record",
    servedBy: "gateway",
    summary: "Record a working entry at full fidelity (rung 0).",
    request: RecordEntryRequest,
    response: RecordEntryResponse,
  },
  recordMany: {
    subject: "entry.recordMany",
    servedBy: "gateway",
    summary:
      "Record a batch of entries (importing a transcript): each is recorded as entry.record records it, and answered in its own result.",
    request: RecordManyRequest,
    response: RecordManyResponse,
  },
  beginStep: {
    subject: "step.begin",
    servedBy: "gateway",
    summary: "Begin a reasoning step, optionally with a focus.",
    request: BeginStepRequest,
    response: StepResponse,
  },
  setFocus: {
    subject: "focus.set",
    servedBy: "gateway",
    summary: "Set the current task, subgoal or query; a new task is a task transition.",
    request: SetFocusRequest,
    response: FocusResponse,
  },
  referenceEntries: {
    subject: "step.reference",
    servedBy: "gateway",
    summary: "Report which entries the agent used in the open step.",
    request: ReferenceEntriesRequest,
    response: ReferenceResponse,
  },
  endStep: {
    subject: "step.end",
    servedBy: "gateway",
    summary: "End the open step.",
    request: EndStepRequest,
    response: StepResponse,
  },
  buildContext: {
    subject: "context.build",
    servedBy: "working",
    summary: "Serialise working memory into the prompt context within the budget (publishes a read event).",
    request: BuildContextRequest,
    response: BuiltContext,
  },
  getView: {
    subject: "view.get",
    servedBy: "working",
    summary: "The agent's working view: budget use, entries by rung, the open step.",
    request: GetViewRequest,
    response: ViewResponse,
  },
  readEvents: {
    subject: "view.events",
    servedBy: "working",
    summary: "The agent's own events from the log, in stream order, from a sequence on (what a local mirror follows).",
    request: ReadEventsRequest,
    response: ReadEventsResponse,
  },
  getRaw: {
    subject: "substrate.get",
    servedBy: "substrate",
    summary: "The raw text and metadata of any entry the agent recorded, demoted or not.",
    request: SubstrateGetRequest,
    response: SubstrateRecord,
  },
  query: {
    subject: "memory.query",
    servedBy: "retrieval",
    summary: "Search working and long-term memory; ranked by r = α·sim + β·recency + γ·log(1+freq).",
    request: QueryRequest,
    response: QueryResponse,
  },
  thread: {
    subject: "memory.thread",
    servedBy: "retrieval",
    summary: "Every entry of a correlation id, across agents and tiers, in time order.",
    request: ThreadRequest,
    response: ThreadResponse,
  },
  recall: {
    subject: "step.recall",
    servedBy: "retrieval",
    summary: "Rehydrate the open step's cues from long-term for its focus (the context builder calls this).",
    request: RecallRequest,
    response: RecallResponse,
  },
  warmUp: {
    subject: "agent.warmup",
    servedBy: "retrieval",
    summary: "After an agent restarts: bring its most recently demoted records back as native working entries.",
    request: WarmUpRequest,
    response: WarmUpResponse,
  },
} as const satisfies Record<string, Operation>

export type OperationName = keyof typeof operations
export type RequestOf<O extends OperationName> = (typeof operations)[O]["request"]["Type"]
export type ResponseOf<O extends OperationName> = (typeof operations)[O]["response"]["Type"]

/** The reply envelope of every operation. */
export const replyEnvelope = (value: Schema.Top) =>
  Schema.Union([
    Schema.Struct({ ok: Schema.Literal(true), value }),
    Schema.Struct({ ok: Schema.Literal(false), error: ApiError }),
  ])
