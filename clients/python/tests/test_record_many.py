"""``record_many`` (``entry.recordMany``) against the running system: a batch recorded entry by entry, each
refusal in its own result, a retry after a lost reply stored once, a batch too large refused whole."""

from __future__ import annotations

import pytest

from conftest import System
from relay import Action, Seen, open_relay
from working_memory import BatchTooLarge, IdempotencyConflict, ValidationError, WorkingMemoryClient
from working_memory.sync import connect
from working_memory.types import RecordEntryRequest


async def test_a_batch_records_the_valid_entries_and_refuses_the_others_each_in_its_result(
    wm: WorkingMemoryClient, agent_id: str
) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    answer = await agent.record_many(
        [
            {"requestId": "t-0", "origin": "USER", "content": "We land in Lisbon on the 3rd of June.", "timestamp": 1_000},
            {"requestId": "t-1", "origin": "USER", "content": "   "},
            {"requestId": "t-2", "origin": "INTERNAL", "content": "Check step-free hotels.", "timestamp": 2_000},
            {"requestId": "t-2", "origin": "INTERNAL", "content": "A different text under the same request id."},
            {"origin": "USER", "content": "No request id: the client gives it one.", "timestamp": 3_000},
        ]
    )
    results = answer["results"]
    assert [(r["index"], r["ok"]) for r in results] == [(0, True), (1, False), (2, True), (3, False), (4, True)]
    blank = results[1]
    assert blank["ok"] is False
    assert isinstance(blank["error"], ValidationError)
    assert blank["error"].field == "entries.1.content"
    conflict = results[3]
    assert conflict["ok"] is False
    assert isinstance(conflict["error"], IdempotencyConflict)
    assert conflict["error"].field == "entries.3.content"
    recorded = [r for r in results if r["ok"] is True]
    assert [r["entryId"] for r in recorded][:2] == ["t-0", "t-2"]
    assert answer["seq"] == max(r["seq"] for r in recorded)
    assert agent.last_seq == answer["seq"]
    assert [e["id"] for e in (await agent.view())["entries"]] == [r["entryId"] for r in recorded]


async def test_a_batch_whose_reply_was_lost_is_retried_whole_and_stored_once(system: System, relay_server: str, agent_id: str) -> None:
    def lose_first_batch_reply(seen: Seen) -> Action:
        return "lose-reply" if seen.subject.endswith(".entry.recordMany") and seen.attempt == 1 else "forward"

    relay = await open_relay(relay_server, system.nats_url, lose_first_batch_reply)
    client = await WorkingMemoryClient.connect(relay_server, timeout=3.0)
    try:
        agent = client.agent(agent_id)
        await agent.register(role="main")
        entries: list[RecordEntryRequest] = [
            {"origin": "USER" if i % 2 == 0 else "INTERNAL", "content": f"Turn {i} of the imported chat.", "timestamp": 1_000 * (i + 1)}
            for i in range(40)
        ]
        answer = await agent.record_many(entries)
        attempts = relay.bodies("entry.recordMany")
        assert len(attempts) >= 2
        assert all(a == attempts[0] for a in attempts)
        ids = [e["requestId"] for e in attempts[0]["entries"]]
        assert len(set(ids)) == 40
        # The first attempt stored every entry; the retry is answered with them.
        assert [(r["ok"], r.get("entryId"), r.get("duplicate")) for r in answer["results"]] == [(True, i, True) for i in ids]
        assert [e["id"] for e in (await agent.view())["entries"]] == ids
        events = await agent.read_own_events()
        assert sum(1 for e in events if e["event"]["_tag"] == "EntryRecorded") == 40
    finally:
        await client.close()
        await relay.close()


async def test_a_batch_above_the_limit_is_refused_whole(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    with pytest.raises(BatchTooLarge) as refused:
        await agent.record_many([{"origin": "USER", "content": f"line {i}"} for i in range(501)])
    assert (refused.value.field, refused.value.size, refused.value.limit) == ("entries", 501, 500)
    assert (await agent.view())["entries"] == []


def test_the_blocking_client_records_a_batch(system: System, agent_id: str) -> None:
    with connect(system.nats_url) as wm:
        agent = wm.agent(agent_id)
        agent.register(role="main")
        answer = agent.record_many([{"origin": "USER", "content": "First."}, {"origin": "USER", "content": "Second."}])
        assert [r["ok"] for r in answer["results"]] == [True, True]
        assert agent.last_seq == answer["seq"]
        assert len(agent.view()["entries"]) == 2
