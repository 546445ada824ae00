"""The LangGraph store against the running system: items are versions in an agent's log, namespaces its tags,
deletes tombstones; batches run from async code, from other threads and on the blocking client; bad input and a
closed client are typed errors."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from conftest import System
from working_memory import AgentNotFound, NotConnected, ValidationError, WorkingMemoryClient
from working_memory.integrations.langgraph import WorkingMemoryStore
from working_memory.sync import connect

#: Bounds a call that must answer at once, so that a hang fails the test instead of stalling the suite.
NO_HANG_S = 30


async def recorded(wm: WorkingMemoryClient, agent_id: str) -> list[dict[str, Any]]:
    """The agent's EntryRecorded events, in log order."""
    events = await wm.agent(agent_id).read_own_events()
    return [e["event"] for e in events if e["event"]["_tag"] == "EntryRecorded"]


async def test_items_are_entries_of_the_agent_tagged_with_their_namespace(wm: WorkingMemoryClient, agent_id: str) -> None:
    await wm.agent(agent_id).register(role="main")
    store = WorkingMemoryStore(wm, agent_id=agent_id)
    await store.aput(("memories", "ana"), "cat", {"text": "My cat is called Miso."})
    await store.aput(("memories", "ana"), "trip", {"place": "Lisbon", "nights": 4})
    await store.aput(("notes",), "n1", {"text": "Water the plants."}, index=False)

    item = await store.aget(("memories", "ana"), "cat")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("memories", "ana"), "cat", {"text": "My cat is called Miso."})
    trip = await store.aget(("memories", "ana"), "trip")
    assert trip is not None and trip.value == {"place": "Lisbon", "nights": 4}
    assert await store.aget(("memories", "ana"), "dog") is None

    entries = {e["content"]: e for e in await recorded(wm, agent_id)}
    cat = entries["My cat is called Miso."]
    assert cat["tags"] == ["lg", "lg:memories", "lg:memories.ana", "lg-text:text"]
    assert cat["origin"] == "INTERNAL"
    assert cat["correlationId"] == 'lg:["memories","ana","cat"]'
    assert json.loads(next(c for c in entries if c.startswith("{"))) == {"place": "Lisbon", "nights": 4}
    assert entries["Water the plants."]["tags"] == ["lg", "lg:notes", "lg-text:text", "lg-noindex"]

    hits = await store.asearch(("memories",), query="What is my cat called?")
    assert hits[0].key == "cat" and hits[0].namespace == ("memories", "ana")
    assert hits[0].score is not None and hits[0].score > 0
    assert await store.asearch(("notes",), query="Water the plants") == []  # index=False: no query search
    assert [i.key for i in await store.asearch(("notes",))] == ["n1"]
    assert [i.key for i in await store.asearch(("memories",), filter={"nights": {"$gte": 4}})] == ["trip"]
    assert [i.key for i in await store.asearch(("memories", "ana"), filter={"place": "Porto"})] == []
    assert await store.asearch(("memories", "bo"), query="cat") == []
    assert await store.alist_namespaces() == [("memories", "ana"), ("notes",)]
    assert await store.alist_namespaces(prefix=("memories",)) == [("memories", "ana")]
    assert await store.alist_namespaces(max_depth=1) == [("memories",), ("notes",)]


async def test_a_put_is_a_version_and_a_delete_a_tombstone_the_log_keeps(wm: WorkingMemoryClient, agent_id: str) -> None:
    await wm.agent(agent_id).register(role="main")
    store = WorkingMemoryStore(wm, agent_id=agent_id)
    namespace = ("prefs",)
    await store.aput(namespace, "tea", {"text": "Ana takes her tea black."})
    first = await store.aget(namespace, "tea")
    await store.aput(namespace, "tea", {"text": "Ana takes her tea with lemon."})
    second = await store.aget(namespace, "tea")
    assert first is not None and second is not None
    assert second.value == {"text": "Ana takes her tea with lemon."}
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    [hit] = await store.asearch(namespace, query="tea")  # the current version only
    assert hit.value == second.value

    await store.adelete(namespace, "tea")
    assert await store.aget(namespace, "tea") is None
    assert await store.asearch(namespace, query="tea") == []
    assert await store.asearch(namespace) == []
    assert await store.alist_namespaces() == []
    # Append-only and audited: both versions stay in the log, with the tombstone after them.
    versions = [e for e in await recorded(wm, agent_id) if e["correlationId"] == 'lg:["prefs","tea"]']
    assert [e["content"] for e in versions[:2]] == ["Ana takes her tea black.", "Ana takes her tea with lemon."]
    assert "lg-deleted" in versions[2]["tags"] and len(versions) == 3
    # Deleting what is not there writes nothing; a put after a delete starts the item anew.
    await store.adelete(namespace, "tea")
    assert len(await recorded(wm, agent_id)) == 3
    await store.aput(namespace, "tea", {"text": "Ana drinks coffee now."})
    again = await store.aget(namespace, "tea")
    assert again is not None and again.value == {"text": "Ana drinks coffee now."}
    assert again.created_at > second.created_at


def ops(agent_id: str) -> list[Any]:
    return [
        PutOp((agent_id, "notes"), "a", {"text": "alpha"}),
        PutOp((agent_id, "notes"), "b", {"n": 1, "tags": ["x"]}),
        GetOp((agent_id, "notes"), "a"),
        SearchOp((agent_id,), filter={"n": 1}),
        PutOp((agent_id, "notes"), "a", None),
        GetOp((agent_id, "notes"), "a"),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", (agent_id,)),)),
    ]


def check(results: list[Any], agent_id: str) -> None:
    assert results[0] is None and results[1] is None
    assert results[2].value == {"text": "alpha"} and results[2].namespace == (agent_id, "notes")
    assert [(i.key, i.value) for i in results[3]] == [("b", {"n": 1, "tags": ["x"]})]
    assert results[4] is None and results[5] is None
    assert results[6] == [(agent_id, "notes")]


async def test_abatch_answers_each_operation_in_order(wm: WorkingMemoryClient, agent_id: str) -> None:
    await wm.agent(agent_id).register(role="main")
    check(await WorkingMemoryStore(wm).abatch(ops(agent_id)), agent_id)


def test_batch_blocks_on_the_blocking_client(system: System, agent_id: str) -> None:
    with connect(system.nats_url) as wm:
        wm.agent(agent_id).register(role="main")
        store = WorkingMemoryStore(wm)
        check(store.batch(ops(agent_id)), agent_id)
        store.put((agent_id, "more"), "k", {"text": "kappa"})
        got = store.get((agent_id, "more"), "k")
        assert got is not None and got.value == {"text": "kappa"}


async def test_batch_from_another_thread_and_abatch_on_another_loop(system: System, wm: WorkingMemoryClient, agent_id: str) -> None:
    await wm.agent(agent_id).register(role="main")
    store = WorkingMemoryStore(wm)
    # A synchronous node of a graph run by ainvoke: a worker thread, while the client's loop serves.
    results = await asyncio.to_thread(store.batch, ops(agent_id))
    check(results, agent_id)
    # The blocking client's connection runs on its own loop: abatch from this one is handed over.
    with connect(system.nats_url) as blocking:
        other = WorkingMemoryStore(blocking, agent_id=agent_id)
        item = await other.aget(("notes",), "b")
        assert item is not None and item.value == {"n": 1, "tags": ["x"]}


async def test_bad_input_is_a_typed_error(wm: WorkingMemoryClient, agent_id: str) -> None:
    store = WorkingMemoryStore(wm)
    with pytest.raises(AgentNotFound):  # a namespace whose agent is not registered
        await store.aget((agent_id, "x"), "k")
    with pytest.raises(ValidationError) as bad:
        await store.aget(("not an agent", "x"), "k")
    assert bad.value.field == "namespace"
    with pytest.raises(ValidationError):
        await store.asearch((), query="cat")
    with pytest.raises(ValidationError):
        await store.alist_namespaces()
    await wm.agent(agent_id).register(role="main")
    with pytest.raises(ValidationError) as big:
        await store.aput((agent_id,), "big", {"text": "x" * (64 * 1024 + 1)})
    assert big.value.field == "content"
    with pytest.raises(ValidationError) as long_key:
        await store.aput((agent_id,), "k" * 200, {"text": "x"})
    assert long_key.value.field == "key"
    with pytest.raises(ValidationError) as not_json:
        await store.aput((agent_id,), "k", {"when": object()})
    assert not_json.value.field == "value"
    assert await store.asearch((agent_id,)) == []  # nothing of it was stored
    # With a role, an agent not registered yet holds nothing, and a put registers it.
    fresh = f"{agent_id}-new"
    registering = WorkingMemoryStore(wm, role="main")
    assert await registering.aget((fresh, "notes"), "k") is None
    await registering.aput((fresh, "notes"), "k", {"text": "hello"})
    assert (await wm.agent(fresh).view())["agent"]["role"] == "main"


async def test_a_closed_client_is_not_connected_without_waiting(system: System, agent_id: str) -> None:
    wm = await WorkingMemoryClient.connect(system.nats_url)
    store = WorkingMemoryStore(wm, agent_id=agent_id)
    # A blocking call on the loop the client runs on is refused rather than deadlocking it.
    with pytest.raises(asyncio.InvalidStateError):
        store.get(("notes",), "k")
    await wm.close()
    with pytest.raises(NotConnected):
        await asyncio.wait_for(store.aget(("notes",), "k"), NO_HANG_S)
    with pytest.raises(NotConnected):
        await asyncio.wait_for(asyncio.to_thread(store.get, ("notes",), "k"), NO_HANG_S)
    # The blocking client, closed: its loop is gone.
    blocking = connect(system.nats_url)
    closed = WorkingMemoryStore(blocking, agent_id=agent_id)
    blocking.close()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            closed.put(("notes",), "k", {"text": "x"})
        except BaseException as error:
            errors.append(error)

    worker = threading.Thread(target=call)
    worker.start()
    worker.join(NO_HANG_S)
    assert not worker.is_alive() and len(errors) == 1 and isinstance(errors[0], NotConnected)
    with pytest.raises(NotConnected):
        await asyncio.wait_for(closed.aget(("notes",), "k"), NO_HANG_S)
