"""The Google ADK memory service against the running system: sessions and events become entries of the user's
agent (adding a session again records nothing twice), search is the merged retrieval, a delete is a tombstone the
log keeps, and bad input and a closed client are typed errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from conftest import System
from working_memory import NotConnected, UnknownEntries, ValidationError, WorkingMemoryClient, new_request_id
from working_memory.integrations.adk import WorkingMemoryService, default_agent_for

NO_HANG_S = 30


def event(author: str, *parts: types.Part, at: float) -> Event:
    return Event(id=new_request_id(), invocation_id="inv", author=author, timestamp=at, content=types.Content(role="user" if author == "user" else "model", parts=list(parts)))


def text(value: str) -> types.Part:
    return types.Part.from_text(text=value)


async def recorded(wm: WorkingMemoryClient, agent_id: str) -> list[dict[str, Any]]:
    events = await wm.agent(agent_id).read_own_events()
    return [e["event"] for e in events if e["event"]["_tag"] == "EntryRecorded"]


async def test_a_session_becomes_entries_of_the_user_s_agent_once(wm: WorkingMemoryClient, agent_id: str) -> None:
    memory = WorkingMemoryService(wm)
    user = agent_id[-20:]
    agent = memory.agent("pets", user).agent_id
    assert agent == f"pets--{user}" == default_agent_for("pets", user)
    session = Session(id="s1", app_name="pets", user_id=user, events=[
        event("user", text("My cat is called Miso."), at=1_700_000_000.0),
        event("assistant", types.Part(function_call=types.FunctionCall(name="note", args={"pet": "Miso"})), at=1_700_000_001.0),
        event("assistant", types.Part(function_response=types.FunctionResponse(name="note", response={"ok": True})), at=1_700_000_002.0),
        event("assistant", types.Part(text="thinking…", thought=True), text("Noted."), at=1_700_000_003.0),
        event("assistant", at=1_700_000_004.0),  # no content: nothing to remember
    ])
    await memory.add_session_to_memory(session)
    entries = await recorded(wm, agent)
    assert [(e["origin"], e["content"], e["timestamp"]) for e in entries] == [
        ("USER", "My cat is called Miso.", 1_700_000_000_000),
        ("INTERNAL", 'called note({"pet": "Miso"})', 1_700_000_001_000),
        ("SYSTEM", 'note returned: {"ok": true}', 1_700_000_002_000),
        ("INTERNAL", "Noted.", 1_700_000_003_000),
    ]
    assert entries[0]["tags"] == ["adk", "adk-session:s1", "adk-author:user"]
    assert entries[0]["entryId"] == session.events[0].id and entries[0]["correlationId"] == "s1"
    # ADK may add a session any number of times: only its new events are recorded.
    session.events.append(event("user", text("The weather is lovely today."), at=1_700_000_005.0))
    await memory.add_session_to_memory(session)
    await memory.add_events_to_memory(app_name="pets", user_id=user, events=session.events[-1:], session_id="s1")
    await memory.add_events_to_memory(app_name="pets", user_id=user, events=session.events[-1:])  # as first recorded
    assert len(await recorded(wm, agent)) == 5

    found = await memory.search_memory(app_name="pets", user_id=user, query="What is my cat called?")
    first = found.memories[0]
    assert first.id == session.events[0].id and first.author == "user"
    assert first.content.parts is not None and first.content.parts[0].text == "My cat is called Miso."
    assert first.content.role == "user" and first.timestamp == "2023-11-14T22:13:20+00:00"
    assert first.custom_metadata["tier"] == "working" and first.custom_metadata["form"] == "raw"
    assert first.custom_metadata["relevance"] > 0
    # A user with nothing recorded has no memories; an empty query finds nothing.
    assert (await memory.search_memory(app_name="pets", user_id=f"{user}-new", query="cat")).memories == []
    assert (await memory.search_memory(app_name="pets", user_id=user, query="  ")).memories == []


async def test_memories_added_and_deleted(wm: WorkingMemoryClient, agent_id: str) -> None:
    await wm.agent(agent_id).register(role="custom", budget=3000)  # registered before: its configuration stands
    memory = WorkingMemoryService(wm, agent_for=lambda app, user: agent_id, search_limit=2)
    note = MemoryEntry(
        id="m-1", author="user", timestamp="2024-05-08T09:10:00+00:00",
        content=types.Content(role="user", parts=[text("Ana's cat Miso is afraid of the vacuum cleaner.")]),
    )
    await memory.add_memory(app_name="pets", user_id="ana", memories=[note])
    await memory.add_memory(app_name="pets", user_id="ana", memories=[note])  # its id makes it idempotent
    [entry] = await recorded(wm, agent_id)
    assert entry["entryId"] == "m-1" and entry["timestamp"] == 1715159400000
    assert entry["tags"] == ["adk", "adk-memory", "adk-author:user"]
    session = Session(id="s2", app_name="pets", user_id="ana", events=[
        event("user", text("Miso the cat sleeps on the sofa."), at=1_700_000_000.0),
        event("user", text("Miso the cat eats fish."), at=1_700_000_001.0),
    ])
    await memory.add_session_to_memory(session)
    ids = [m.id for m in (await memory.search_memory(app_name="pets", user_id="ana", query="Miso the cat")).memories]
    assert len(ids) == 2  # search_limit

    await memory.delete_memory(app_name="pets", user_id="ana", memory_id="m-1")
    await memory.delete_memory(app_name="pets", user_id="ana", memory_id="m-1")  # already deleted: nothing more
    await memory.delete_memory(app_name="pets", user_id="ana", memory_id=None)
    await memory.add_memory(app_name="pets", user_id="ana", memories=[note])  # adding it again does not revive it
    found = (await memory.search_memory(app_name="pets", user_id="ana", query="Miso the cat vacuum cleaner")).memories
    assert "m-1" not in [m.id for m in found] and len(found) == 2  # still search_limit memories
    # Append-only and audited: the memory is still in the log, with one tombstone naming it.
    entries = await recorded(wm, agent_id)
    assert entries[0]["entryId"] == "m-1"
    assert [e["correlationId"] for e in entries if "adk-deleted" in e["tags"]] == ["adk-delete:m-1"]
    assert (await wm.agent(agent_id).view())["agent"]["budget"] == 3000


async def test_bad_input_is_a_typed_error(system: System, wm: WorkingMemoryClient, agent_id: str) -> None:
    memory = WorkingMemoryService(wm, agent_for=lambda app, user: agent_id)
    big = Session(id="s", app_name="pets", user_id="ana", events=[event("user", text("x" * (64 * 1024 + 1)), at=1.0)])
    with pytest.raises(ValidationError) as refused:
        await memory.add_session_to_memory(big)
    assert refused.value.field.endswith("content")
    with pytest.raises(UnknownEntries):
        await memory.delete_memory(app_name="pets", user_id="ana", memory_id="never-recorded")
    # Ids the API would refuse become valid ones, the same each time.
    odd = default_agent_for("my app", "ana@example.com")
    assert odd.startswith("adk-") and odd == default_agent_for("my app", "ana@example.com")

    closing = await WorkingMemoryClient.connect(system.nats_url)
    closed = WorkingMemoryService(closing)
    await closing.close()
    calls = [
        closed.search_memory(app_name="pets", user_id="ana", query="cat"),
        closed.add_session_to_memory(Session(id="s", app_name="pets", user_id="ana", events=[event("user", text("hi"), at=1.0)])),
        closed.delete_memory(app_name="pets", user_id="ana", memory_id="m-1"),
    ]
    for call in calls:
        with pytest.raises(NotConnected):
            await asyncio.wait_for(call, NO_HANG_S)
