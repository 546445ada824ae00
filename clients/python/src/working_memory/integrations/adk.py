"""A Google ADK memory service (``google.adk.memory.BaseMemoryService``) on working memory.

    from google.adk.runners import Runner
    from working_memory import WorkingMemoryClient
    from working_memory.integrations.adk import WorkingMemoryService

    wm = await WorkingMemoryClient.connect()
    memory = WorkingMemoryService(wm, role="main")
    runner = Runner(app_name="pets", agent=agent, session_service=sessions, memory_service=memory)
    ...
    await memory.add_session_to_memory(session)        # after a turn, or when the session ends

The mapping (docs/frameworks-python.md):

- an app's user is an agent: ``<app_name>--<user_id>`` when that is an agent id (1-64 of A-Za-z0-9_-), else
  ``adk-`` and a hash of the two (or what ``agent_for(app_name, user_id)`` answers); ``role`` (and ``budget``)
  register it on its first write;
- ``add_session_to_memory`` and ``add_events_to_memory`` record each final event with text as an entry: the user's
  ``USER``, an agent's ``INTERNAL``, a tool's result ``SYSTEM`` (a call as ``called name(args)``, a result as
  ``name returned: response``), at the event's time, tagged ``adk``, ``adk-session:<id>`` and
  ``adk-author:<author>``, with the session id as correlation id and the event id as request id: adding a session
  again (as ADK may, any number of times) records only its new events, and an event recorded before stands as it
  was first recorded;
- ``add_memory`` records each memory entry (its ``id`` as request id when it has one; ``custom_metadata`` is not
  kept);
- ``search_memory`` is ``memory.query`` over the agent's whole memory, working and long-term (the query's first
  4000 characters; at most ``search_limit`` results): each result is a ``MemoryEntry`` with the text as served
  today (raw, key points or a summary), the entry id as ``id``, its author and time, and ``tier``, ``form`` and
  ``relevance`` in ``custom_metadata``. A user with nothing recorded yet has no memories (not an error);
- ``delete_memory`` records a tombstone entry (tag ``adk-deleted``): the log is append-only and audited, so the
  entry stays in it and in the agent's memory, while ``search_memory`` leaves it out from then on, and adding its
  session again does not bring it back. Erasing content is an operator's ``npm run wm -- forget``;
- the service runs no steps and reports no references: ADK does not tell a memory service what the model used.

Bad input is the client's typed error: a memory id the agent never recorded (``UnknownEntries``), content over the
API's limit (``ValidationError``), a closed client (``NotConnected``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from google.adk.memory import BaseMemoryService
from google.adk.memory.base_memory_service import SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from ..client import AgentClient
from ..errors import AgentNotFound, IdempotencyConflict
from ..types import Origin, RecordEntryRequest, Role
from ._common import (
    MAX_CORRELATION_CHARS,
    Agents,
    ClientLike,
    EntryLog,
    async_client,
    bounded_tag,
    derived_id,
    is_id,
    on_client_loop,
)

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session

__all__ = ["WorkingMemoryService"]

ADK_TAG = "adk"
DELETED_TAG = "adk-deleted"
DELETE_CORRELATION_PREFIX = "adk-delete:"
#: Query texts are at most 4000 characters.
MAX_QUERY_CHARS = 4000
#: Entries per ``entry.recordMany`` request (the gateway's default limit).
BATCH_ENTRIES = 500


def default_agent_for(app_name: str, user_id: str) -> str:
    """``<app_name>--<user_id>`` when it is an agent id, else ``adk-`` and a hash of the pair."""
    joined = f"{app_name}--{user_id}"
    return joined if is_id(joined) else derived_id("adk-", json.dumps([app_name, user_id]))


def _part_text(part: types.Part) -> tuple[str, Origin] | None:
    if part.thought:
        return None
    if part.text:
        return part.text, "INTERNAL"
    if part.function_call is not None:
        call = part.function_call
        return f"called {call.name}({json.dumps(call.args or {}, ensure_ascii=False, default=str)})", "INTERNAL"
    if part.function_response is not None:
        response = part.function_response
        return (
            f"{response.name} returned: {json.dumps(response.response or {}, ensure_ascii=False, default=str)}",
            "SYSTEM",
        )
    return None


def _content_entry(content: types.Content | None, author: str | None) -> tuple[str, Origin] | None:
    """The text of a content and its origin: the user's words ``USER``, a tool's result ``SYSTEM``, else
    ``INTERNAL``."""
    if content is None or not content.parts:
        return None
    parts = [p for p in (_part_text(part) for part in content.parts) if p is not None]
    text = "\n".join(t for t, _ in parts)
    if not text.strip():
        return None
    if author == "user":
        return text, "USER"
    return text, "SYSTEM" if all(origin == "SYSTEM" for _, origin in parts) else "INTERNAL"


def _epoch_ms(iso: str | None) -> int | None:
    if not iso:
        return None
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


class WorkingMemoryService(BaseMemoryService):
    """A Google ADK memory service whose memories are entries of agents' working memory (see the module's
    docstring). ``client`` is a :class:`~working_memory.WorkingMemoryClient` or the blocking
    :class:`~working_memory.sync.SyncWorkingMemoryClient`."""

    def __init__(
        self,
        client: ClientLike,
        *,
        role: Role | None = "main",
        budget: int | None = None,
        agent_for: Callable[[str, str], str] = default_agent_for,
        search_limit: int = 10,
    ) -> None:
        self._client = async_client(client)
        self._agents = Agents(self._client, role, budget)
        self._agent_for = agent_for
        self._search_limit = search_limit
        self._deleted: dict[str, EntryLog] = {}

    def agent(self, app_name: str, user_id: str) -> AgentClient:
        """The agent that holds this app's user's memory."""
        return self._agents.get(self._agent_for(app_name, user_id), "user_id")

    # ---- writes ------------------------------------------------------------------------------------------------

    async def add_session_to_memory(self, session: Session) -> None:
        await on_client_loop(
            self._client, self._add_events(session.app_name, session.user_id, session.events, session.id)
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await on_client_loop(self._client, self._add_events(app_name, user_id, events, session_id))

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        entries: list[RecordEntryRequest] = []
        for memory in memories:
            rendered = _content_entry(memory.content, memory.author)
            if rendered is None:
                continue
            entry: RecordEntryRequest = {
                "content": rendered[0],
                "origin": rendered[1],
                "tags": [ADK_TAG, "adk-memory", *([bounded_tag("adk-author:", memory.author)] if memory.author else [])],
            }
            timestamp = _epoch_ms(memory.timestamp)
            if timestamp is not None:
                entry["timestamp"] = timestamp
            if memory.id:
                entry["requestId"] = derived_id("adk-", memory.id)
            entries.append(entry)
        await on_client_loop(self._client, self._record(self.agent(app_name, user_id), entries))

    async def _add_events(self, app_name: str, user_id: str, events: Sequence[Event], session_id: str | None) -> None:
        agent = self.agent(app_name, user_id)
        tags = [ADK_TAG]
        correlation_id: str | None = None
        if session_id:
            tags.append(bounded_tag("adk-session:", session_id))
            correlation_id = session_id if len(session_id) <= MAX_CORRELATION_CHARS else derived_id("adk-", session_id)
        entries: list[RecordEntryRequest] = []
        for event in events:
            if event.partial:
                continue
            rendered = _content_entry(event.content, event.author)
            if rendered is None:
                continue
            entry: RecordEntryRequest = {
                "content": rendered[0],
                "origin": rendered[1],
                "timestamp": int(event.timestamp * 1000),
                "tags": [*tags, *([bounded_tag("adk-author:", event.author)] if event.author else [])],
            }
            if correlation_id is not None:
                entry["correlationId"] = correlation_id
            if event.id:
                entry["requestId"] = derived_id("adk-", event.id)
            entries.append(entry)
        await self._record(agent, entries, once=True)

    async def _record(self, agent: AgentClient, entries: list[RecordEntryRequest], *, once: bool = False) -> None:
        """Records the entries in batches; with ``once``, an entry whose id was recorded with another body (an
        event added before with another session id) stands as it was first recorded."""
        if not entries:
            return
        await self._agents.ensure_registered(agent)
        for start in range(0, len(entries), BATCH_ENTRIES):
            reply = await agent.record_many(entries[start : start + BATCH_ENTRIES])
            for result in reply["results"]:
                if result["ok"] is False and not (once and isinstance(result["error"], IdempotencyConflict)):
                    raise result["error"]

    # ---- reads and deletes -------------------------------------------------------------------------------------

    def _deletions(self, agent: AgentClient) -> EntryLog:
        log = self._deleted.get(agent.agent_id)
        if log is None:
            log = self._deleted[agent.agent_id] = EntryLog(agent, lambda tags: DELETED_TAG in tags)
        return log

    async def _deleted_ids(self, agent: AgentClient) -> set[str]:
        log = self._deletions(agent)
        await log.catch_up()
        return {
            e.correlation_id[len(DELETE_CORRELATION_PREFIX) :]
            for e in log
            if e.correlation_id and e.correlation_id.startswith(DELETE_CORRELATION_PREFIX)
        } | {e.entry_id for e in log}

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        return await on_client_loop(self._client, self._search(self.agent(app_name, user_id), query))

    async def _search(self, agent: AgentClient, query: str) -> SearchMemoryResponse:
        text = query.strip()[:MAX_QUERY_CHARS]
        if not text:
            return SearchMemoryResponse()
        try:
            deleted = await self._deleted_ids(agent)
            # Deleted entries are asked for too, so that leaving them out still answers ``search_limit`` memories.
            reply = await agent.query(text, limit=min(200, self._search_limit + len(deleted)))
        except AgentNotFound:
            return SearchMemoryResponse()
        memories: list[MemoryEntry] = []
        for hit in reply["results"]:
            if hit["entryId"] in deleted or DELETED_TAG in hit["tags"]:
                continue
            author = next((t[len("adk-author:") :] for t in hit["tags"] if t.startswith("adk-author:")), None)
            if author is None:
                author = "user" if hit["origin"] == "USER" else None
            memories.append(
                MemoryEntry(
                    id=hit["entryId"],
                    content=types.Content(
                        role="user" if hit["origin"] == "USER" else "model", parts=[types.Part.from_text(text=hit["text"])]
                    ),
                    author=author,
                    timestamp=datetime.fromtimestamp(hit["timestamp"] / 1000, tz=timezone.utc).isoformat(),
                    custom_metadata={"tier": hit["tier"], "form": hit["form"], "relevance": hit["relevance"]},
                )
            )
            if len(memories) == self._search_limit:
                break
        return SearchMemoryResponse(memories=memories)

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        if not memory_id:
            return
        await on_client_loop(self._client, self._delete(self.agent(app_name, user_id), memory_id))

    async def _delete(self, agent: AgentClient, memory_id: str) -> None:
        if memory_id in await self._deleted_ids(agent):
            return
        await agent.raw(memory_id)  # UnknownEntries for an entry the agent never recorded
        await agent.record(
            origin="SYSTEM",
            content="A memory was deleted.",
            tags=[ADK_TAG, DELETED_TAG],
            correlation_id=DELETE_CORRELATION_PREFIX + memory_id,
        )
