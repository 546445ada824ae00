"""What the framework adapters share: running a call on the client's event loop, one agent client per agent
(registered on first use where asked), and a local projection of an agent's own entries, followed from its
event log (``view.events``)."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ..client import AgentClient, WorkingMemoryClient
from ..errors import AgentAlreadyRegistered, AgentNotFound, NotConnected, ValidationError
from ..sync import SyncWorkingMemoryClient
from ..types import Origin, Role

R = TypeVar("R")

#: An agent, entry, step or request id: 1-64 characters of A-Za-z0-9_- (contracts/ids.ts).
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: A tag is 1-64 characters (contracts/api.ts), at most 32 per entry.
MAX_TAG_CHARS = 64
MAX_TAGS = 32
#: A correlation id is 1-200 characters.
MAX_CORRELATION_CHARS = 200
#: Events asked for per ``view.events`` request (the API's maximum).
EVENTS_PER_READ = 1000

ClientLike = WorkingMemoryClient | SyncWorkingMemoryClient


def async_client(client: ClientLike) -> WorkingMemoryClient:
    """The async client behind either client (the blocking wrapper runs one on a loop of its own)."""
    return client.client if isinstance(client, SyncWorkingMemoryClient) else client


def is_id(text: str) -> bool:
    return ID_PATTERN.fullmatch(text) is not None


def derived_id(prefix: str, source: str) -> str:
    """A valid id made from a foreign one: ``source`` itself when it is valid, else ``prefix`` and a hash of it
    (the same every time, so a write derived from it stays idempotent)."""
    if is_id(source):
        return source
    return f"{prefix}{hashlib.sha256(source.encode()).hexdigest()[:40]}"


def bounded_tag(prefix: str, text: str) -> str:
    """``prefix + text`` as a tag, or ``prefix`` with ``#`` and a hash of ``text`` when that is too long."""
    tag = prefix + text
    if len(tag) <= MAX_TAG_CHARS:
        return tag
    return f"{prefix}#{hashlib.sha256(text.encode()).hexdigest()[:40]}"


async def on_client_loop(client: WorkingMemoryClient, coroutine: Coroutine[Any, Any, R]) -> R:
    """Awaits ``coroutine`` on the loop the client's connection runs on: here when it is this loop, else handed to
    it (the blocking wrapper's loop thread, or an application loop in another thread). Raises
    :class:`NotConnected` at once when that loop no longer runs."""
    loop = client.loop
    if loop is None or loop is asyncio.get_running_loop():
        return await coroutine
    if loop.is_closed() or not loop.is_running():
        coroutine.close()
        raise NotConnected("the client's event loop no longer runs: the client was closed")
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))


def run_blocking(client: WorkingMemoryClient, coroutine: Coroutine[Any, Any, R], async_name: str) -> R:
    """Runs ``coroutine`` on the client's loop from code that may not await, and waits for its answer. Refused
    (``asyncio.InvalidStateError``) on the client's own loop, where waiting would block the loop that must answer;
    :class:`NotConnected` when that loop no longer runs."""
    loop = client.loop
    try:
        current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    if loop is None or loop is current:
        coroutine.close()
        raise asyncio.InvalidStateError(
            f"a blocking call on the event loop the client runs on would wait for that loop for ever: use {async_name}"
        )
    if loop.is_closed() or not loop.is_running():
        coroutine.close()
        raise NotConnected("the client's event loop no longer runs: the client was closed")
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


class Agents:
    """One :class:`AgentClient` per agent id (so each keeps the highest sequence its writes reached), registered
    with ``role`` on first use when ``role`` is given; without it, an agent that is not registered is
    :class:`AgentNotFound`."""

    def __init__(self, client: WorkingMemoryClient, role: Role | None, budget: int | None = None) -> None:
        self.client = client
        self.role = role
        self.budget = budget
        self._agents: dict[str, AgentClient] = {}
        self._registered: set[str] = set()

    def get(self, agent_id: str, field: str = "agent") -> AgentClient:
        if not is_id(agent_id):
            raise ValidationError(field, f"{agent_id!r} is not an agent id: 1-64 characters of A-Za-z0-9_-")
        agent = self._agents.get(agent_id)
        if agent is None:
            agent = self._agents[agent_id] = self.client.agent(agent_id)
        return agent

    async def ensure_registered(self, agent: AgentClient) -> None:
        """Registers the agent with the configured role once per adapter (idempotent on the server); an agent
        registered before with another configuration keeps it. Nothing when no role is configured."""
        if self.role is None or agent.agent_id in self._registered:
            return
        try:
            await agent.register(role=self.role, budget=self.budget)
        except AgentAlreadyRegistered:
            pass
        self._registered.add(agent.agent_id)


@dataclass
class LoggedEntry:
    """An entry as its ``EntryRecorded`` event holds it: the raw text whatever its rung today."""

    entry_id: str
    seq: int
    timestamp: int
    origin: Origin
    content: str
    tags: tuple[str, ...]
    correlation_id: str | None


class EntryLog:
    """The entries of one agent that ``keep`` selects (by their tags), in log order, followed from the agent's own
    events: each :meth:`catch_up` reads what was stored since the last one (every event stored before the request,
    the caller's writes included), and raises :class:`AgentNotFound` for an agent with no event. An
    ``EntryForgotten`` drops its entry and ``AgentForgotten`` every entry: an operator's forget is honoured here
    too."""

    def __init__(self, agent: AgentClient, keep: Callable[[tuple[str, ...]], bool]) -> None:
        self.agent = agent
        self._keep = keep
        self._after_seq = 0
        self._entries: dict[str, LoggedEntry] = {}
        self._lock = asyncio.Lock()
        #: Moves on each change of the entries held.
        self.version = 0

    def __iter__(self) -> Iterator[LoggedEntry]:
        return iter(list(self._entries.values()))

    def get(self, entry_id: str) -> LoggedEntry | None:
        return self._entries.get(entry_id)

    async def catch_up(self) -> None:
        async with self._lock:
            while True:
                reply = await self.agent.read_events(after_seq=self._after_seq, max=EVENTS_PER_READ)
                if self._after_seq == 0 and not reply["events"]:
                    # Registration is an agent's first event: with none, the agent does not exist.
                    raise AgentNotFound(self.agent.agent_id)
                for stored in reply["events"]:
                    self._apply(stored["seq"], stored["event"])
                self._after_seq = max(self._after_seq, reply["lastSeq"])
                if not reply["more"]:
                    return

    def _apply(self, seq: int, event: dict[str, Any]) -> None:
        tag = event.get("_tag")
        if tag == "EntryRecorded":
            tags = tuple(t for t in event.get("tags", ()) if isinstance(t, str))
            if self._keep(tags):
                entry_id = str(event["entryId"])
                self._entries[entry_id] = LoggedEntry(
                    entry_id=entry_id,
                    seq=seq,
                    timestamp=int(event["timestamp"]),
                    origin=event["origin"],
                    content=str(event["content"]),
                    tags=tags,
                    correlation_id=event.get("correlationId"),
                )
                self.version += 1
        elif tag == "EntryForgotten":
            if self._entries.pop(str(event.get("entryId")), None) is not None:
                self.version += 1
        elif tag == "AgentForgotten":
            self._entries.clear()
            self.version += 1

