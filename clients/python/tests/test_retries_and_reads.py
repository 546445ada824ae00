"""Retries, read-your-writes and refusal decoding, seen on the wire: the client talks to the system
through a relay on a second nats-server that can lose replies or answer by itself."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import nats
import pytest
from nats.aio.msg import Msg

from conftest import System
from relay import Action, Relay, Seen, open_relay
from working_memory import (
    IdempotencyConflict,
    InvalidState,
    NoResponse,
    Overloaded,
    StorageFull,
    WorkingMemoryClient,
)

#: Opens a relay with a policy and a client connected through it (client options as keywords).
OpenRelayed = Callable[..., Awaitable[tuple[Relay, WorkingMemoryClient]]]


@pytest.fixture
async def relayed(system: System, relay_server: str) -> AsyncIterator[OpenRelayed]:
    """Opens a relay with a policy and a client connected through it; closes both at the end."""
    opened: list[tuple[Relay, WorkingMemoryClient]] = []

    async def open_with(policy: Callable[[Seen], Action], **client_options: object) -> tuple[Relay, WorkingMemoryClient]:
        relay = await open_relay(relay_server, system.nats_url, policy)
        client = await WorkingMemoryClient.connect(relay_server, **client_options)  # type: ignore[arg-type]
        opened.append((relay, client))
        return relay, client

    yield open_with
    for relay, client in opened:
        await client.close()
        await relay.close()


def forward_all(_: Seen) -> Action:
    return "forward"


async def test_a_lost_reply_is_retried_with_the_same_request_id_and_answered_as_the_original(relayed: OpenRelayed, agent_id: str) -> None:
    def lose_first_record_reply(seen: Seen) -> Action:
        return "lose-reply" if seen.subject.endswith(".entry.record") and seen.attempt == 1 else "forward"

    relay, client = await relayed(lose_first_record_reply, timeout=3.0)
    agent = client.agent(agent_id)
    await agent.register(role="main")
    answer = await agent.record(origin="USER", content="Renew the passport before June.")

    attempts = relay.bodies("entry.record")
    assert len(attempts) >= 2
    assert len({a["requestId"] for a in attempts}) == 1
    assert all(a == attempts[0] for a in attempts)
    # The first attempt was stored; the retry is answered with it.
    assert answer["duplicate"] is True
    assert answer["entryId"] == attempts[0]["requestId"]
    assert [e["id"] for e in (await agent.view())["entries"]] == [answer["entryId"]]


async def test_unavailable_is_retried_with_the_same_request_id(relayed: OpenRelayed, agent_id: str) -> None:
    def unavailable_first(seen: Seen) -> Action:
        if seen.subject.endswith(".step.begin") and seen.attempt == 1:
            return {"ok": False, "error": {"_tag": "Unavailable", "reason": "stream leader lost", "message": "unavailable: stream leader lost"}}
        return "forward"

    relay, client = await relayed(unavailable_first)
    agent = client.agent(agent_id)
    await agent.register(role="main")
    step = await agent.begin_step(focus={"task": "taxes"})
    attempts = relay.bodies("step.begin")
    assert len(attempts) == 2
    assert attempts[0] == attempts[1]
    assert (await agent.view())["step"] == {"stepId": step["stepId"], "focus": {"task": "taxes"}}


async def test_not_caught_up_is_retried(relayed: OpenRelayed, agent_id: str) -> None:
    def behind_first(seen: Seen) -> Action:
        if seen.subject.endswith(".view.get") and seen.attempt == 1:
            return {
                "ok": False,
                "error": {"_tag": "NotCaughtUp", "afterSeq": 9, "appliedSeq": 8, "message": "not yet 9"},
            }
        return "forward"

    relay, client = await relayed(behind_first)
    agent = client.agent(agent_id)
    await agent.register(role="main")
    view = await agent.view()
    assert view["agent"]["id"] == agent_id
    assert len(relay.bodies("view.get")) == 2


async def test_no_answer_at_all_ends_in_no_response_after_every_attempt(relayed: OpenRelayed, agent_id: str) -> None:
    relay, client = await relayed(lambda _: "drop", timeout=0.3, attempts=3)
    with pytest.raises(NoResponse) as failed:
        await client.agent(agent_id).record(origin="USER", content="Is anyone listening?")
    assert failed.value.attempts == 3
    attempts = relay.bodies("entry.record")
    assert len(attempts) == 3
    assert len({a["requestId"] for a in attempts}) == 1


async def test_no_responders_are_retried_then_end_in_no_response(relay_server: str, agent_id: str) -> None:
    client = await WorkingMemoryClient.connect(relay_server, attempts=2, no_responder_patience=0.5)
    try:
        with pytest.raises(NoResponse) as failed:
            await client.agent(agent_id).view()
        assert failed.value.attempts == 2
    finally:
        await client.close()


async def test_no_responders_are_asked_again_while_the_patience_lasts(relay_server: str, agent_id: str) -> None:
    # A partition moving between replicas has no responder for a moment longer than the attempts' backoff.
    client = await WorkingMemoryClient.connect(relay_server)
    responder = await nats.connect(relay_server)
    try:
        asked = asyncio.ensure_future(client.agent(agent_id).view())
        await asyncio.sleep(3.0)

        async def answer(msg: Msg) -> None:
            await msg.respond(json.dumps({"ok": True, "value": {"marker": "new owner"}}).encode())

        await responder.subscribe(f"wm.api.{agent_id}.view.get", cb=answer)
        await responder.flush()
        view = cast(dict[str, object], await asked)
        assert view["marker"] == "new owner"
    finally:
        await client.close()
        await responder.close()


def overloaded(retry_after_ms: int) -> dict[str, object]:
    return {
        "ok": False,
        "error": {
            "_tag": "Overloaded",
            "projection": "fade",
            "partition": 3,
            "lag": 12_000,
            "limit": 10_000,
            "retryAfterMs": retry_after_ms,
            "message": "overloaded: the fade projection of partition 3 is 12000 events behind",
        },
    }


async def test_overloaded_is_waited_out_and_the_same_request_sent_again(relayed: OpenRelayed, agent_id: str) -> None:
    def overloaded_twice(seen: Seen) -> Action:
        return overloaded(300) if seen.subject.endswith(".entry.record") and seen.attempt <= 2 else "forward"

    relay, client = await relayed(overloaded_twice, attempts=1)
    agent = client.agent(agent_id)
    await agent.register(role="main")
    answer = await agent.record(origin="USER", content="Recorded once the projections caught up.")
    attempts = relay.bodies("entry.record")
    # Overloaded waits are not the attempts that went unanswered: one attempt was enough for those.
    assert len(attempts) == 3
    assert all(a == attempts[0] for a in attempts)
    assert answer["entryId"] == attempts[0]["requestId"]
    assert answer["duplicate"] is False
    assert [e["id"] for e in (await agent.view())["entries"]] == [answer["entryId"]]


async def test_overloaded_is_raised_with_its_fields_after_the_last_attempt(relayed: OpenRelayed, agent_id: str) -> None:
    def always_overloaded(seen: Seen) -> Action:
        return overloaded(50) if "entry.record" in seen.subject else "forward"

    relay, client = await relayed(always_overloaded, overloaded_attempts=3)
    agent = client.agent(agent_id)
    await agent.register(role="main")
    with pytest.raises(Overloaded) as refused:
        await agent.record_many([{"origin": "USER", "content": "Refused while the log drains."}])
    assert (refused.value.projection, refused.value.partition, refused.value.lag, refused.value.limit) == ("fade", 3, 12_000, 10_000)
    assert refused.value.retry_after_ms == 50
    attempts = relay.bodies("entry.recordMany")
    assert len(attempts) == 3
    assert all(a == attempts[0] for a in attempts)
    assert (await agent.view())["entries"] == []


async def test_other_refusals_are_raised_at_once_with_their_fields(relayed: OpenRelayed, agent_id: str) -> None:
    refusals: dict[str, dict[str, object]] = {
        "budget.retune": {"_tag": "StorageFull", "limit": "maximum bytes exceeded", "message": "storage full"},
        "entry.record": {"_tag": "IdempotencyConflict", "field": "requestId", "reason": "already used for another request", "message": "x"},
        "step.end": {"_tag": "InvalidState", "field": "stepId", "reason": "no open step", "message": "stepId: no open step"},
    }

    def refuse(seen: Seen) -> Action:
        operation = seen.subject.split(".", 3)[3]
        return {"ok": False, "error": refusals[operation]} if operation in refusals else "forward"

    relay, client = await relayed(refuse)
    agent = client.agent(agent_id)
    with pytest.raises(StorageFull) as full:
        await agent.retune_budget(500)
    assert full.value.limit == "maximum bytes exceeded"
    with pytest.raises(IdempotencyConflict) as conflict:
        await agent.record(origin="USER", content="hello")
    assert (conflict.value.field, conflict.value.reason) == ("requestId", "already used for another request")
    with pytest.raises(InvalidState):
        await agent.end_step("s1")
    assert [len(relay.bodies(op)) for op in refusals] == [1, 1, 1]


async def test_reads_wait_for_the_clients_own_writes(relayed: OpenRelayed, agent_id: str) -> None:
    relay, client = await relayed(forward_all)
    agent = client.agent(agent_id)
    registered = await agent.register(role="main")
    first = await agent.view()
    recorded = await agent.record(origin="USER", content="Water the plants on Sunday.", correlation_id="home")
    assert recorded["seq"] > registered["seq"]
    assert agent.last_seq == recorded["seq"]

    view = await agent.view()
    assert [e["id"] for e in view["entries"]] == [recorded["entryId"]]
    await agent.raw(recorded["entryId"])
    await agent.query("plants")
    await agent.thread("home")
    context = await agent.build_context()

    assert first["entries"] == []
    assert relay.bodies("view.get")[0]["afterSeq"] == registered["seq"]
    assert relay.bodies("view.get")[1]["afterSeq"] == recorded["seq"]
    for operation in ("substrate.get", "memory.query", "memory.thread", "context.build"):
        assert relay.bodies(operation)[-1]["afterSeq"] == recorded["seq"], operation
    # A build records a read: it is a write, and later reads wait for it.
    assert agent.last_seq == context["seq"] > recorded["seq"]
    await agent.view()
    assert relay.bodies("view.get")[-1]["afterSeq"] == context["seq"]
    # Every write carried a request id of its own.
    write_ids = [b["requestId"] for op in ("agent.register", "entry.record", "context.build") for b in relay.bodies(op)]
    assert len(set(write_ids)) == len(write_ids) == 3


async def test_own_events_are_read_page_by_page_from_view_events(relayed: OpenRelayed, agent_id: str) -> None:
    pages = {
        0: {"events": [{"seq": 3, "subject": f"wm.evt.{agent_id}.agent", "event": {"_tag": "AgentRegistered"}}], "lastSeq": 3, "more": True},
        3: {"events": [{"seq": 7, "subject": f"wm.evt.{agent_id}.step", "event": {"_tag": "StepStarted"}}], "lastSeq": 9, "more": False},
    }

    def serve_events(seen: Seen) -> Action:
        if seen.subject.endswith(".view.events"):
            return {"ok": True, "value": pages[int(seen.body.get("afterSeq", 0))]}
        return "forward"

    relay, client = await relayed(serve_events)
    agent = client.agent(agent_id)
    events = await agent.read_own_events(batch=50)
    assert [e["seq"] for e in events] == [3, 7]
    assert relay.bodies("view.events") == [{"afterSeq": 0, "max": 50}, {"afterSeq": 3, "max": 50}]

    follow = agent.follow_own_events(from_seq=4, wait_ms=100)
    assert (await anext(follow))["seq"] == 7
    await follow.aclose()
    assert relay.bodies("view.events")[-1] == {"afterSeq": 3, "waitMs": 100}
