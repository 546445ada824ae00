"""Request and reply shapes of the working-memory API over NATS.

They mirror ``contracts/api.ts`` (JSON Schemas in ``contracts/json/api.schema.json``):
keys are the wire's camelCase names, so a reply is the decoded JSON as it came.
"""


from typing import Any, Literal, NotRequired, TypedDict

Role = Literal["supervisor", "main", "generator", "mood-advisor", "time-actor", "custom"]
Encoding = Literal["o200k_base", "cl100k_base", "p50k_base", "r50k_base"]
Origin = Literal["INTERNAL", "USER", "ADVISOR", "SYSTEM"]
RepresentationKind = Literal["raw", "keyPoints", "summary"]
WorkingRung = Literal[0, 1, 2]
ContextOrder = Literal["timestamp", "priority"]
Tier = Literal["working", "long-term"]
ContextRecall = Literal["served", "unavailable", "none"]


# ---- shared shapes ---------------------------------------------------------


class Mood(TypedDict):
    """valence in [-1, 1], arousal in [0, 1] at the moment of recording."""

    valence: float
    arousal: float


class Focus(TypedDict, total=False):
    """The current task, subgoal and/or query (each 1-4000 characters)."""

    task: str
    subgoal: str
    query: str


class FadeSettings(TypedDict, total=False):
    """The usage threshold τ (0.05..1), overall and per task kind."""

    tau: float
    tauByTaskKind: dict[str, float]


class RelevanceWeights(TypedDict):
    """Weights of r = α·sim + β·recency + γ·frequency + δ·emotion, each in [0, 1] (δ: context builds)."""

    alpha: float
    beta: float
    gamma: float
    delta: NotRequired[float]


# Functional form because one key, `from`, is a Python keyword. Filters: origins; tags (any of);
# correlation id; entry timestamps from (inclusive) and to (exclusive), epoch ms.
RecordFilter = TypedDict(
    "RecordFilter",
    {"origins": list[Origin], "tags": list[str], "correlationId": str, "from": int, "to": int},
    total=False,
)


class AgentConfig(TypedDict):
    id: str
    role: Role
    budget: int
    """The budget outside hyperfocus."""
    encoding: Encoding
    fade: NotRequired[FadeSettings]
    relevance: NotRequired[RelevanceWeights]


class RepresentationTokens(TypedDict):
    raw: int
    keyPoints: NotRequired[int]
    summary: NotRequired[int]


class WorkingEntry(TypedDict):
    id: str
    timestamp: int
    origin: Origin
    content: str | None
    """Raw text; None once the entry has faded to rung 2 (the raw text then lives in the substrate)."""
    correlationId: str | None
    tags: list[str]
    moodSnapshot: Mood | None
    rung: WorkingRung
    referenceCount: int
    citationCount: int
    emotionalWeight: float
    keyPoints: str | None
    summary: str | None
    tokens: RepresentationTokens
    lastEventSeq: int
    ordinal: int
    trackedSince: int
    lastReadAt: int | None
    lastCitedAt: int | None
    transient: bool


# ---- requests ----------------------------------------------------------------


class RegisterAgentRequest(TypedDict):
    requestId: NotRequired[str]
    role: Role
    budget: NotRequired[int]
    encoding: NotRequired[Encoding]
    fade: NotRequired[FadeSettings]
    relevance: NotRequired[RelevanceWeights]


class RetuneBudgetRequest(TypedDict):
    requestId: NotRequired[str]
    budget: int


class EnterHyperfocusRequest(TypedDict):
    requestId: NotRequired[str]
    budget: NotRequired[int]


class ExitHyperfocusRequest(TypedDict):
    requestId: NotRequired[str]


class RecordEntryRequest(TypedDict):
    requestId: NotRequired[str]
    content: str
    origin: Origin
    timestamp: NotRequired[int]
    correlationId: NotRequired[str]
    tags: NotRequired[list[str]]
    mood: NotRequired[Mood]
    emotionalWeight: NotRequired[float]


class RecordManyRequest(TypedDict):
    """A batch: each entry is an ``entry.record`` request (its ``requestId`` its idempotency key and id)."""

    entries: list[RecordEntryRequest]


class BeginStepRequest(TypedDict):
    requestId: NotRequired[str]
    stepId: NotRequired[str]
    focus: NotRequired[Focus]


class SetFocusRequest(TypedDict):
    requestId: NotRequired[str]
    focus: Focus
    taskKind: NotRequired[str]


class ReferenceEntriesRequest(TypedDict):
    requestId: NotRequired[str]
    stepId: str
    entryIds: NotRequired[list[str]]
    quotes: NotRequired[list[str]]


class EndStepRequest(TypedDict):
    requestId: NotRequired[str]
    stepId: str


class BuildContextRequest(TypedDict):
    requestId: NotRequired[str]
    stepId: NotRequired[str]
    limit: NotRequired[int]
    order: NotRequired[ContextOrder]
    afterSeq: NotRequired[int]


class GetViewRequest(TypedDict):
    afterSeq: NotRequired[int]


class ReadEventsRequest(TypedDict):
    afterSeq: NotRequired[int]
    max: NotRequired[int]
    waitMs: NotRequired[int]


class SubstrateGetRequest(TypedDict):
    entryId: str
    afterSeq: NotRequired[int]


class QueryRequest(TypedDict):
    query: str
    limit: NotRequired[int]
    filter: NotRequired[RecordFilter]
    explain: NotRequired[bool]
    afterSeq: NotRequired[int]


class ThreadRequest(TypedDict):
    correlationId: str
    afterSeq: NotRequired[int]


class RecallRequest(TypedDict):
    stepId: str
    afterSeq: NotRequired[int]


class WarmUpRequest(TypedDict):
    requestId: NotRequired[str]
    count: NotRequired[int]
    afterSeq: NotRequired[int]


# ---- replies -----------------------------------------------------------------


class RegisterAgentResponse(TypedDict):
    agent: AgentConfig
    budget: int
    seq: int


class BudgetResponse(TypedDict):
    baseBudget: int
    budget: int
    hyperfocus: bool
    seq: int


class RecordEntryResponse(TypedDict):
    entryId: str
    timestamp: int
    tokens: int
    seq: int
    duplicate: bool
    """True when this requestId had already been stored: nothing new was written."""


class RecordManyRecorded(TypedDict):
    """An entry of a batch that is recorded: what ``entry.record`` answers for it, with its position."""

    index: int
    ok: Literal[True]
    entryId: str
    timestamp: int
    tokens: int
    seq: int
    duplicate: bool


class RecordManyRefused(TypedDict):
    """An entry of a batch refused alone. ``error`` is the typed exception of its refusal (not raised), its field
    named within the batch (``entries.<index>.<field>``); ``error.payload`` is the error as it came on the wire."""

    index: int
    ok: Literal[False]
    error: Any


#: One result per entry of a batch, in the batch's order.
RecordManyResult = RecordManyRecorded | RecordManyRefused


class RecordManyResponse(TypedDict):
    results: list[RecordManyResult]
    seq: int
    """The highest stream sequence of the batch's entries (0 when none was recorded)."""


class StepResponse(TypedDict):
    stepId: str
    seq: int


class FocusResponse(TypedDict):
    transition: bool
    seq: int


class ReferenceResponse(TypedDict):
    entryIds: list[str]
    seq: int


class ContextItem(TypedDict):
    entryId: str
    timestamp: int
    origin: Origin
    rung: WorkingRung
    form: RepresentationKind
    cue: bool
    tokens: int


class BuiltContext(TypedDict):
    text: str
    tokens: int
    budget: int
    items: list[ContextItem]
    omitted: int
    """Working entries that did not fit."""
    recall: NotRequired[ContextRecall]
    """Long-term memory recalled for it: "served", "unavailable" (retrieval did not answer; built from
    working alone, the step's next build asks again) or "none" (no focused step)."""
    seq: int


class ViewStep(TypedDict):
    stepId: str
    focus: Focus | None


EntriesByRung = TypedDict("EntriesByRung", {"0": int, "1": int, "2": int})


class ViewResponse(TypedDict):
    agent: AgentConfig
    budget: int
    hyperfocus: bool
    usage: int
    """Tokens working carries at the entries' current rungs."""
    entriesByRung: EntriesByRung
    step: ViewStep | None
    focus: Focus | None
    entries: list[WorkingEntry]
    appliedSeq: int


class OwnEvent(TypedDict):
    seq: int
    subject: str
    event: dict[str, Any]
    """One event as stored in WM_EVENTS (see contracts/json/events.schema.json)."""
    traceparent: NotRequired[str]
    """The W3C trace context of the request that appended the event, when it was traced (docs/tracing.md)."""


class ReadEventsResponse(TypedDict):
    events: list[OwnEvent]
    lastSeq: int
    """The stream sequence this reply reads up to: the after_seq of the next request."""
    more: bool
    """More of the agent's events were already stored after lastSeq."""


class SubstrateRecord(TypedDict):
    agentId: str
    entryId: str
    timestamp: int
    origin: Origin
    content: str
    tags: list[str]
    correlationId: str | None
    moodSnapshot: Mood | None
    emotionalWeight: float
    tokens: int
    seq: int


class ScoreExplanation(TypedDict):
    similarity: float
    dense: float
    lexical: float
    recency: float
    frequency: float
    weights: RelevanceWeights


class QueryResult(TypedDict):
    entryId: str
    tier: Tier
    origin: Origin
    timestamp: int
    tags: list[str]
    correlationId: str | None
    form: RepresentationKind
    text: str
    relevance: float
    explain: NotRequired[ScoreExplanation]


class QueryResponse(TypedDict):
    results: list[QueryResult]


class ThreadEntry(TypedDict):
    agentId: str
    entryId: str
    tier: Tier
    timestamp: int
    origin: Origin
    form: RepresentationKind
    text: str


class ThreadResponse(TypedDict):
    entries: list[ThreadEntry]


class RecallResponse(TypedDict):
    cues: int
    seq: int


class WarmUpResponse(TypedDict):
    entryIds: list[str]
    seq: int
