"""A blocking wrapper of the async client, for code without an event loop.

    from working_memory.sync import connect

    with connect() as wm:
        agent = wm.agent("planner")
        agent.register(role="main")
        agent.record(origin="USER", content="Ship the report by Friday.")
        print(agent.build_context()["text"])

The async client runs on an event loop of its own in a background thread; each call blocks until
its answer (with the same retries, request ids and read-your-writes as the async client).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from .client import (
    DEFAULT_ATTEMPTS,
    DEFAULT_OVERLOADED_ATTEMPTS,
    DEFAULT_PING_INTERVAL,
    DEFAULT_TIMEOUT,
    AgentClient,
    OperationName,
    WorkingMemoryClient,
)

P = ParamSpec("P")
R = TypeVar("R")


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="working-memory-client", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, R]) -> R:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def _blocking(method: Callable[Concatenate[AgentClient, P], Awaitable[R]]) -> Callable[Concatenate["SyncAgentClient", P], R]:
    async def call(agent: AgentClient, *args: P.args, **kwargs: P.kwargs) -> R:
        return await method(agent, *args, **kwargs)

    def run(self: SyncAgentClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._loop.run(call(self.agent, *args, **kwargs))

    run.__name__ = method.__name__
    run.__doc__ = method.__doc__
    return run


class SyncAgentClient:
    """One agent's side of the API, blocking. The methods are the async :class:`AgentClient`'s."""

    def __init__(self, loop: _LoopThread, agent: AgentClient) -> None:
        self._loop = loop
        self.agent = agent

    @property
    def agent_id(self) -> str:
        return self.agent.agent_id

    @property
    def last_seq(self) -> int:
        return self.agent.last_seq

    register = _blocking(AgentClient.register)
    retune_budget = _blocking(AgentClient.retune_budget)
    enter_hyperfocus = _blocking(AgentClient.enter_hyperfocus)
    exit_hyperfocus = _blocking(AgentClient.exit_hyperfocus)
    record = _blocking(AgentClient.record)
    record_many = _blocking(AgentClient.record_many)
    begin_step = _blocking(AgentClient.begin_step)
    set_focus = _blocking(AgentClient.set_focus)
    reference = _blocking(AgentClient.reference)
    end_step = _blocking(AgentClient.end_step)
    build_context = _blocking(AgentClient.build_context)
    view = _blocking(AgentClient.view)
    read_events = _blocking(AgentClient.read_events)
    read_own_events = _blocking(AgentClient.read_own_events)
    query = _blocking(AgentClient.query)
    thread = _blocking(AgentClient.thread)
    raw = _blocking(AgentClient.raw)
    recall = _blocking(AgentClient.recall)
    warm_up = _blocking(AgentClient.warm_up)


class SyncWorkingMemoryClient:
    def __init__(self, loop: _LoopThread, client: WorkingMemoryClient) -> None:
        self._loop = loop
        self.client = client

    def agent(self, agent_id: str) -> SyncAgentClient:
        return SyncAgentClient(self._loop, self.client.agent(agent_id))

    def call(self, agent_id: str, operation: OperationName, request: dict[str, Any], *, timeout: float | None = None) -> Any:
        return self._loop.run(self.client.call(agent_id, operation, request, timeout=timeout))

    def close(self) -> None:
        try:
            self._loop.run(self.client.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> SyncWorkingMemoryClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def connect(
    servers: str | Sequence[str] | None = None,
    *,
    user: str | None = None,
    password: str | None = None,
    name: str = "working-memory-sdk",
    inbox_prefix: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = DEFAULT_ATTEMPTS,
    overloaded_attempts: int = DEFAULT_OVERLOADED_ATTEMPTS,
    ping_interval: float = DEFAULT_PING_INTERVAL,
) -> SyncWorkingMemoryClient:
    """Connects as :meth:`WorkingMemoryClient.connect` does (``NATS_URL`` by default), blocking."""
    loop = _LoopThread()
    try:
        client = loop.run(
            WorkingMemoryClient.connect(
                servers,
                user=user,
                password=password,
                name=name,
                inbox_prefix=inbox_prefix,
                timeout=timeout,
                attempts=attempts,
                overloaded_attempts=overloaded_attempts,
                ping_interval=ping_interval,
            )
        )
    except BaseException:
        loop.stop()
        raise
    return SyncWorkingMemoryClient(loop, client)
