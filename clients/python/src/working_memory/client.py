"""Async client of the working-memory API over NATS.

    wm = await WorkingMemoryClient.connect()          # NATS_URL, else nats://127.0.0.1:4222
    agent = wm.agent("planner")
    await agent.register(role="main")
    await agent.record(origin="USER", content="Ship the report by Friday.")
    context = await agent.build_context()

Every call carries a request id; a call that gets no answer (or ``Unavailable``)
is retried with the same id, so it is stored and applied once. The agent client
remembers the highest log sequence its writes reached and asks reads to wait for
it, so an agent always reads its own writes. Behaviour and defaults follow the
TypeScript SDK (``sdk/client.ts``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, cast

import nats
import nats.errors
from nats.aio.client import Client as NatsClient
from nats.nuid import NUID

from .errors import NoResponse, NotCaughtUp, NotConnected, Overloaded, Unavailable, ValidationError, decode_error
from .trace_context import trace_headers
from .types import (
    BudgetResponse,
    BuiltContext,
    ContextOrder,
    Encoding,
    FadeSettings,
    Focus,
    FocusResponse,
    Mood,
    OwnEvent,
    Origin,
    QueryResponse,
    ReadEventsResponse,
    RecallResponse,
    RecordEntryRequest,
    RecordEntryResponse,
    RecordFilter,
    RecordManyResponse,
    RecordManyResult,
    ReferenceResponse,
    RegisterAgentResponse,
    RelevanceWeights,
    Role,
    StepResponse,
    SubstrateRecord,
    ThreadResponse,
    ViewResponse,
    WarmUpResponse,
)

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
#: Per attempt, in seconds (the TypeScript SDK's 5000 ms).
DEFAULT_TIMEOUT = 5.0
#: Attempts per call when the service does not answer.
DEFAULT_ATTEMPTS = 4
#: Attempts per call while the service answers ``Overloaded``, each after the wait it asks for.
DEFAULT_OVERLOADED_ATTEMPTS = 10
#: How long, in seconds, a call keeps asking while no service is subscribed at all: a partition moving between
#: replicas, or services restarting, has no responder for up to a lease's lifetime (WM_LEASE_TTL_MS, 6 s). These
#: retries, every 0.25 s, are not attempts; after the patience, no responders use the attempts as no answer does.
DEFAULT_NO_RESPONDER_PATIENCE = 8.0
#: Seconds between pings; two unanswered and the connection moves to another server. A server cut off by a
#: network partition keeps the connection open without a word, so only a ping notices.
DEFAULT_PING_INTERVAL = 5.0
_NO_RESPONDER_RETRY = 0.25
#: The longest wait, in seconds, an ``Overloaded`` refusal is taken at its word for.
MAX_OVERLOADED_WAIT = 10.0
#: Largest entry content accepted, in UTF-8 bytes.
MAX_CONTENT_BYTES = 64 * 1024

OperationName = Literal[
    "registerAgent",
    "retuneBudget",
    "enterHyperfocus",
    "exitHyperfocus",
    "recordEntry",
    "recordMany",
    "beginStep",
    "setFocus",
    "referenceEntries",
    "endStep",
    "buildContext",
    "getView",
    "readEvents",
    "getRaw",
    "query",
    "thread",
    "recall",
    "warmUp",
]

#: Subject suffix of every operation, after ``wm.api.<agentId>.``.
OPERATIONS: dict[OperationName, str] = {
    "registerAgent": "agent.register",
    "retuneBudget": "budget.retune",
    "enterHyperfocus": "budget.hyperfocus.enter",
    "exitHyperfocus": "budget.hyperfocus.exit",
    "recordEntry": "entry.record",
    "recordMany": "entry.recordMany",
    "beginStep": "step.begin",
    "setFocus": "focus.set",
    "referenceEntries": "step.reference",
    "endStep": "step.end",
    "buildContext": "context.build",
    "getView": "view.get",
    "readEvents": "view.events",
    "getRaw": "substrate.get",
    "query": "memory.query",
    "thread": "memory.thread",
    "recall": "step.recall",
    "warmUp": "agent.warmup",
}


def api_subject(agent_id: str, operation: OperationName) -> str:
    return f"wm.api.{agent_id}.{OPERATIONS[operation]}"


_nuid = NUID()


def new_request_id() -> str:
    """A fresh request id (22 characters of A-Za-z0-9, as the TypeScript SDK's nuid)."""
    return bytes(_nuid.next()).decode()


def _backoff(attempt: int) -> float:
    return min(2.0, 0.1 * float(2**attempt))


def _servers_from_env() -> list[str]:
    return [s.strip() for s in os.environ.get("NATS_URL", DEFAULT_NATS_URL).split(",") if s.strip()]


def _without_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class WorkingMemoryClient:
    """One NATS connection to the working-memory services; :meth:`agent` gives one agent's side of the API."""

    def __init__(
        self,
        nc: NatsClient,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        attempts: int = DEFAULT_ATTEMPTS,
        overloaded_attempts: int = DEFAULT_OVERLOADED_ATTEMPTS,
        no_responder_patience: float = DEFAULT_NO_RESPONDER_PATIENCE,
    ) -> None:
        self.nc = nc
        self.timeout = timeout
        self.attempts = attempts
        self.overloaded_attempts = overloaded_attempts
        self.no_responder_patience = no_responder_patience
        #: The event loop the connection runs on (the one running when the client was made), where every call of
        #: this client must run; the framework adapters (``working_memory.integrations``) hand their calls to it.
        self.loop: asyncio.AbstractEventLoop | None
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @classmethod
    async def connect(
        cls,
        servers: str | Sequence[str] | None = None,
        *,
        user: str | None = None,
        password: str | None = None,
        name: str = "working-memory-sdk",
        inbox_prefix: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        attempts: int = DEFAULT_ATTEMPTS,
        overloaded_attempts: int = DEFAULT_OVERLOADED_ATTEMPTS,
        no_responder_patience: float = DEFAULT_NO_RESPONDER_PATIENCE,
        ping_interval: float = DEFAULT_PING_INTERVAL,
    ) -> WorkingMemoryClient:
        """Connects to ``servers`` (a comma-separated string or a list; default ``NATS_URL``, else
        ``nats://127.0.0.1:4222``) with ``user``/``password`` (default ``NATS_USER``/``NATS_PASS``).

        ``inbox_prefix`` is the prefix of this connection's reply subjects (default ``_INBOX``); under the
        broker permissions of ``infra/auth.ts`` an agent may receive replies only on ``_INBOX_<agentId>``.
        ``timeout`` is per attempt, in seconds; ``attempts`` per call when the service does not answer;
        ``overloaded_attempts`` per call while it answers ``Overloaded`` (each after its ``retryAfterMs``);
        ``no_responder_patience``, in seconds, how long a call asks again while no service is subscribed;
        ``ping_interval``, in seconds, how often the connection pings its server (two pings unanswered and it
        reconnects, to another server of the list when there are several).
        Raises :class:`NotConnected` when no server answers.
        """
        if servers is None:
            server_list = _servers_from_env()
        elif isinstance(servers, str):
            server_list = [s.strip() for s in servers.split(",") if s.strip()]
        else:
            server_list = list(servers)
        user = user if user is not None else os.environ.get("NATS_USER")
        password = password if password is not None else os.environ.get("NATS_PASS")
        errors: list[BaseException] = []

        async def remember_error(error: Exception) -> None:
            errors.append(error)

        nc = NatsClient()
        options: dict[str, Any] = {
            "servers": server_list,
            "name": name,
            "reconnect_time_wait": 0.25,
            "ping_interval": ping_interval,
            "max_outstanding_pings": 2,
            # Like the TypeScript client, the first connection fails once every server has been tried;
            # after that the connection reconnects for ever (set below).
            "max_reconnect_attempts": 1,
            "error_cb": remember_error,
        }
        if user is not None:
            options["user"] = user
        if password is not None:
            options["password"] = password
        if inbox_prefix is not None:
            options["inbox_prefix"] = inbox_prefix
        try:
            await nc.connect(**options)
        except Exception as error:
            await nc.close()
            cause = errors[-1] if errors else error
            raise NotConnected(f"no NATS server answers at {','.join(server_list)}: {cause!r}") from cause
        nc.options["max_reconnect_attempts"] = -1
        return cls(
            nc,
            timeout=timeout,
            attempts=attempts,
            overloaded_attempts=overloaded_attempts,
            no_responder_patience=no_responder_patience,
        )

    def agent(self, agent_id: str) -> AgentClient:
        return AgentClient(self, agent_id)

    async def call(
        self,
        agent_id: str,
        operation: OperationName,
        request: Mapping[str, Any],
        *,
        timeout: float | None = None,
    ) -> Any:
        """Sends one request, retrying with the same body (hence the same request id) while nobody
        answers or the service replies ``Unavailable`` or ``NotCaughtUp``, and after the wait an ``Overloaded`` refusal asks
        for (up to ``overloaded_attempts`` times, then it is raised). Returns the reply's value; raises the
        typed :class:`~working_memory.errors.ApiError` on refusal, :class:`NoResponse` after the last attempt and
        :class:`NotConnected` once the connection is closed."""
        subject = api_subject(agent_id, operation)
        if self.nc.is_closed or self.nc.is_draining:
            raise NotConnected(f"the connection is closed: no request is sent on {subject}")
        body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
        # The connection would refuse it with a bare "max payload exceeded": say which limit, as the API does.
        max_payload = self.nc.max_payload
        if max_payload and len(body) > max_payload:
            raise ValidationError(
                "(body)",
                f"the request is {len(body)} bytes, above the server's max_payload of {max_payload} bytes "
                f"(entry content is limited to {MAX_CONTENT_BYTES} bytes)",
            )
        headers = trace_headers()
        last_error: BaseException | None = None
        attempt = 0
        overloaded = 0
        first_no_responder: float | None = None
        while attempt < self.attempts:
            try:
                reply = await self.nc.request(
                    subject, body, timeout=timeout if timeout is not None else self.timeout, headers=headers
                )
                parsed = json.loads(reply.data)
                if parsed.get("ok") is True:
                    return parsed.get("value")
                error = decode_error(parsed.get("error"))
                if isinstance(error, Overloaded):
                    # Nothing was stored: the same request again once the background work has caught up,
                    # a bounded number of times; these waits are not attempts that went unanswered.
                    overloaded += 1
                    if overloaded >= self.overloaded_attempts:
                        raise error
                    await asyncio.sleep(min(MAX_OVERLOADED_WAIT, max(0, error.retry_after_ms) / 1000))
                    continue
                # Unavailable: nothing was stored. NotCaughtUp: the view had not yet applied the caller's
                # own writes when its wait ran out; the same request again is answered once it has.
                if not isinstance(error, (Unavailable, NotCaughtUp)):
                    raise error
                last_error = error
            except nats.errors.NoRespondersError as error:
                last_error = error
                now = time.monotonic()
                if first_no_responder is None:
                    first_no_responder = now
                if now - first_no_responder < self.no_responder_patience:
                    await asyncio.sleep(_NO_RESPONDER_RETRY)
                    continue
            except nats.errors.TimeoutError as error:
                last_error = error
            except (nats.errors.ConnectionClosedError, nats.errors.ConnectionDrainingError) as error:
                # Closed while the request waited: no attempt can be answered any more.
                raise NotConnected(f"the connection closed during a request on {subject}: {error!r}") from error
            attempt += 1
            if attempt < self.attempts:
                await asyncio.sleep(_backoff(attempt))
        # A view still behind after every attempt is said as such: its typed answer, not "no answer".
        if isinstance(last_error, NotCaughtUp):
            raise last_error
        raise NoResponse(
            f"no answer on {subject} after {self.attempts} attempts: {last_error!r}",
            subject=subject,
            attempts=self.attempts,
            last_error=last_error,
        )

    async def close(self) -> None:
        try:
            await self.nc.drain()
        except Exception:
            await self.nc.close()

    async def __aenter__(self) -> WorkingMemoryClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class AgentClient:
    """One agent's side of the API. Writes carry a fresh request id unless given one; reads wait for
    the highest sequence this client's writes reached (:attr:`last_seq`)."""

    def __init__(self, client: WorkingMemoryClient, agent_id: str) -> None:
        self._client = client
        self.agent_id = agent_id
        #: The highest log sequence this client's writes reached.
        self.last_seq = 0

    async def _write(self, operation: OperationName, request: dict[str, Any], request_id: str | None) -> Any:
        value = await self._client.call(self.agent_id, operation, {"requestId": request_id or new_request_id(), **request})
        seq = value.get("seq") if isinstance(value, dict) else None
        if isinstance(seq, int) and seq > self.last_seq:
            self.last_seq = seq
        return value

    async def _read(self, operation: OperationName, request: dict[str, Any], timeout: float | None = None) -> Any:
        return await self._client.call(self.agent_id, operation, {**request, "afterSeq": self.last_seq}, timeout=timeout)

    async def register(
        self,
        role: Role,
        *,
        budget: int | None = None,
        encoding: Encoding | None = None,
        fade: FadeSettings | None = None,
        relevance: RelevanceWeights | None = None,
        request_id: str | None = None,
    ) -> RegisterAgentResponse:
        """Registers the agent (idempotent for the same configuration). ``budget`` is required for ``custom``."""
        request = _without_none(role=role, budget=budget, encoding=encoding, fade=fade, relevance=relevance)
        return cast(RegisterAgentResponse, await self._write("registerAgent", request, request_id))

    async def retune_budget(self, budget: int, *, request_id: str | None = None) -> BudgetResponse:
        return cast(BudgetResponse, await self._write("retuneBudget", {"budget": budget}, request_id))

    async def enter_hyperfocus(self, budget: int | None = None, *, request_id: str | None = None) -> BudgetResponse:
        """Expands the budget (twice the base budget unless given) until :meth:`exit_hyperfocus`."""
        return cast(BudgetResponse, await self._write("enterHyperfocus", _without_none(budget=budget), request_id))

    async def exit_hyperfocus(self, *, request_id: str | None = None) -> BudgetResponse:
        return cast(BudgetResponse, await self._write("exitHyperfocus", {}, request_id))

    async def record(
        self,
        *,
        origin: Origin,
        content: str,
        timestamp: int | None = None,
        correlation_id: str | None = None,
        tags: Sequence[str] | None = None,
        mood: Mood | None = None,
        emotional_weight: float | None = None,
        request_id: str | None = None,
    ) -> RecordEntryResponse:
        """Records a working entry at full fidelity; its id is the request id. ``timestamp`` (epoch ms)
        defaults to now; set it to import history."""
        request = _without_none(
            content=content,
            origin=origin,
            timestamp=timestamp,
            correlationId=correlation_id,
            tags=list(tags) if tags is not None else None,
            mood=mood,
            emotionalWeight=emotional_weight,
        )
        return cast(RecordEntryResponse, await self._write("recordEntry", request, request_id))

    async def record_many(self, entries: Sequence[RecordEntryRequest]) -> RecordManyResponse:
        """Records a batch of entries (importing a transcript), each as :meth:`record` records it: one
        ``entry.recordMany`` request. Each entry is a dict with the wire's keys (``content``, ``origin``,
        ``timestamp``, ``correlationId``, ``tags``, ``mood``, ``emotionalWeight``, ``requestId``); one without
        a ``requestId`` is given one here, before the first attempt, so a batch retried after a lost reply
        stores nothing twice. Returns one result per entry, in order: an entry refused alone has
        ``ok: False`` and its typed error in ``error`` (not raised); a batch refused whole is raised."""
        request = {"entries": [{**entry, "requestId": entry.get("requestId") or new_request_id()} for entry in entries]}
        value = await self._client.call(self.agent_id, "recordMany", request)
        seq = value.get("seq") if isinstance(value, dict) else None
        if isinstance(seq, int) and seq > self.last_seq:
            self.last_seq = seq
        results: list[RecordManyResult] = []
        for result in value["results"]:
            if result.get("ok") is True:
                results.append(cast(RecordManyResult, result))
            else:
                results.append({"index": result["index"], "ok": False, "error": decode_error(result.get("error"))})
        return {"results": results, "seq": value["seq"]}

    async def begin_step(
        self, *, step_id: str | None = None, focus: Focus | None = None, request_id: str | None = None
    ) -> StepResponse:
        return cast(StepResponse, await self._write("beginStep", _without_none(stepId=step_id, focus=focus), request_id))

    async def set_focus(self, focus: Focus, *, task_kind: str | None = None, request_id: str | None = None) -> FocusResponse:
        """Sets the task, subgoal or query; a new task is a task transition."""
        return cast(FocusResponse, await self._write("setFocus", _without_none(focus=focus, taskKind=task_kind), request_id))

    async def reference(
        self,
        step_id: str,
        entry_ids: Sequence[str],
        quotes: Sequence[str] | None = None,
        *,
        request_id: str | None = None,
    ) -> ReferenceResponse:
        """Reports the entries used in the step, by id and/or by quoting their text."""
        request: dict[str, Any] = {"stepId": step_id, "entryIds": list(entry_ids)}
        if quotes is not None:
            request["quotes"] = list(quotes)
        return cast(ReferenceResponse, await self._write("referenceEntries", request, request_id))

    async def end_step(self, step_id: str, *, request_id: str | None = None) -> StepResponse:
        return cast(StepResponse, await self._write("endStep", {"stepId": step_id}, request_id))

    async def build_context(
        self,
        *,
        step_id: str | None = None,
        limit: int | None = None,
        order: ContextOrder | None = None,
        request_id: str | None = None,
    ) -> BuiltContext:
        """Serialises working memory (and the step's cues) into at most the budget, or ``limit``.
        It records a read event, so it is a write: it carries a request id and moves :attr:`last_seq`."""
        request = _without_none(stepId=step_id, limit=limit, order=order, afterSeq=self.last_seq)
        return cast(BuiltContext, await self._write("buildContext", request, request_id))

    async def view(self) -> ViewResponse:
        """Budget use, entries by rung, the entries and the open step."""
        return cast(ViewResponse, await self._read("getView", {}))

    async def read_events(
        self, *, after_seq: int = 0, max: int | None = None, wait_ms: int | None = None
    ) -> ReadEventsResponse:
        """The agent's own events stored after ``after_seq``, in stream order (at most ``max``; when none is
        stored yet, waits up to ``wait_ms`` for the next). Served on ``view.events``."""
        request = _without_none(afterSeq=after_seq, max=max, waitMs=wait_ms)
        timeout = self._client.timeout + (wait_ms or 0) / 1000
        return cast(ReadEventsResponse, await self._client.call(self.agent_id, "readEvents", request, timeout=timeout))

    async def read_own_events(self, *, from_seq: int = 1, batch: int | None = None) -> list[OwnEvent]:
        """Every event of the agent stored before the call, from stream sequence ``from_seq`` on."""
        after_seq = max(1, from_seq) - 1
        out: list[OwnEvent] = []
        while True:
            reply = await self.read_events(after_seq=after_seq, max=batch)
            out.extend(reply["events"])
            after_seq = reply["lastSeq"]
            if not reply["more"]:
                return out

    async def follow_own_events(
        self, *, from_seq: int = 1, batch: int | None = None, wait_ms: int = 2000
    ) -> AsyncIterator[OwnEvent]:
        """The agent's events from ``from_seq``, then live ones as they are stored (e.g. for a local mirror).
        Each request waits up to ``wait_ms`` for a new event; stop by leaving the ``async for``."""
        after_seq = max(1, from_seq) - 1
        while True:
            reply = await self.read_events(after_seq=after_seq, max=batch, wait_ms=wait_ms)
            for event in reply["events"]:
                yield event
            after_seq = reply["lastSeq"]

    async def query(
        self,
        query: str,
        *,
        limit: int | None = None,
        filter: RecordFilter | None = None,
        explain: bool | None = None,
    ) -> QueryResponse:
        """Searches working and long-term memory; ``explain=True`` adds each result's score parts."""
        return cast(QueryResponse, await self._read("query", _without_none(query=query, limit=limit, filter=filter, explain=explain)))

    async def thread(self, correlation_id: str) -> ThreadResponse:
        """Every entry of a correlation id, across agents and tiers, in time order."""
        return cast(ThreadResponse, await self._read("thread", {"correlationId": correlation_id}))

    async def raw(self, entry_id: str) -> SubstrateRecord:
        """The raw text and metadata of any entry this agent recorded, from the substrate."""
        return cast(SubstrateRecord, await self._read("getRaw", {"entryId": entry_id}))

    async def recall(self, step_id: str) -> RecallResponse:
        """Rehydrates the open step's cues from long-term (the context builder does this itself)."""
        value = await self._read("recall", {"stepId": step_id})
        seq = value.get("seq") if isinstance(value, dict) else None
        if isinstance(seq, int) and seq > self.last_seq:
            self.last_seq = seq
        return cast(RecallResponse, value)

    async def warm_up(self, count: int | None = None, *, request_id: str | None = None) -> WarmUpResponse:
        """After the agent restarts: brings its most recently demoted records back into working."""
        return cast(
            WarmUpResponse,
            await self._write("warmUp", _without_none(count=count, afterSeq=self.last_seq), request_id),
        )
