"""The OpenAI Agents SDK session against the running system: the Runner's turns are steps, the history is the
built context within the budget, pop and clear withdraw items from the session while the log keeps them, and bad
input and a closed client are typed errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.items import TResponseInputItem
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message

from conftest import System
from working_memory import AgentNotFound, NotConnected, ValidationError, WorkingMemoryClient
from working_memory.integrations.openai_agents import WorkingMemorySession

NO_HANG_S = 30
#: Bounds the wait for fade's background work, so that a fade that never comes fails the test.
FADE_WAIT_S = 120

set_tracing_disabled(True)


def user(text: str) -> TResponseInputItem:
    return cast(TResponseInputItem, {"role": "user", "content": text})


def texts(items: list[TResponseInputItem]) -> list[str]:
    out = []
    for item in items:
        content = cast(dict[str, Any], item).get("content")
        if isinstance(content, list):
            content = " ".join(part["text"] for part in content)
        out.append(str(content))
    return out


async def events(wm: WorkingMemoryClient, agent_id: str) -> list[dict[str, Any]]:
    return [e["event"] for e in await wm.agent(agent_id).read_own_events()]


async def test_the_runner_s_turns_are_steps_over_the_agent_s_memory(wm: WorkingMemoryClient, agent_id: str) -> None:
    def answer(call: ModelCall) -> ModelStep:
        history, question = json.dumps(call.input[:-1]), texts(call.input)[-1]
        knows = "cat is called Miso" in history and question == "What is my cat called?"
        return ModelStep(output=[assistant_message("Your cat is called Miso." if knows else "Noted.")])

    model = ScriptedModel([ModelStep.respond(answer) for _ in range(3)])
    agent = Agent(name="assistant", instructions="Answer briefly.", model=model)
    session = WorkingMemorySession("chat", wm, agent_id=agent_id, role="main")
    for text in ["My cat is called Miso.", "The weather is lovely today.", "What is my cat called?"]:
        await Runner.run(agent, text, session=session)
    last = model.last_call
    assert last is not None
    assert texts(last.input) == [
        "My cat is called Miso.",
        "Noted.",
        "The weather is lovely today.",
        "Noted.",
        "What is my cat called?",
    ]
    log = await events(wm, agent_id)
    recorded = [e for e in log if e["_tag"] == "EntryRecorded"]
    assert [(e["origin"], e["content"]) for e in recorded] == [
        ("USER", "My cat is called Miso."),
        ("INTERNAL", "Noted."),
        ("USER", "The weather is lovely today."),
        ("INTERNAL", "Noted."),
        ("USER", "What is my cat called?"),
        ("INTERNAL", "Your cat is called Miso."),
    ]
    assert recorded[0]["tags"] == ["oa", "oa-session:chat", "oa-kind:message-user"]
    assert {e["correlationId"] for e in recorded} == {"chat"}
    # One step per turn, begun by get_items and ended by the answer; the third turn's answer used the first entry.
    assert [e["_tag"] for e in log if e["_tag"] in ("StepStarted", "StepEnded")] == ["StepStarted", "StepEnded"] * 3
    steps = [e for e in log if e["_tag"] == "StepStarted"]
    assert steps[2]["focus"] == {"query": "The weather is lovely today."}  # the latest user message before the turn
    [referenced] = [e for e in log if e["_tag"] == "EntriesReferenced"]
    assert referenced["entryIds"] == [recorded[0]["entryId"]] and referenced["stepId"] == steps[2]["stepId"]


async def last_build(wm: WorkingMemoryClient, agent_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The agent's latest EntriesRead event and the working entries it served (as the view holds them now)."""
    read = [e for e in await events(wm, agent_id) if e["_tag"] == "EntriesRead"][-1]
    view = {e["id"]: e for e in (await wm.agent(agent_id).view())["entries"]}
    return read, [cast(dict[str, Any], view[s["entryId"]]) for s in read["served"] if s["entryId"] in view]


async def test_the_history_is_the_context_built_within_the_limit(wm: WorkingMemoryClient, agent_id: str) -> None:
    await wm.agent(agent_id).register(role="custom", budget=1000)  # room for every note: none fades
    session = WorkingMemorySession("long", wm, agent_id=agent_id, limit_tokens=120)
    said = [f"Note {i}: the parcel for flat {i} goes to the blue door on the left." for i in range(20)]
    await session.add_items([user(text) for text in said])
    items = await session.get_items()
    read, served = await last_build(wm, agent_id)
    assert read["tokens"] <= read["budget"] == 120
    assert 0 < len(items) < len(said)
    assert texts(items) == [e["content"] for e in served]  # what the build served, in time order, and only that
    assert said[-1] in texts(items)  # the latest note is the step's focus
    limited = await session.get_items(limit=2)
    assert texts(limited) == [e["content"] for e in (await last_build(wm, agent_id))[1]][-2:]
    smaller = WorkingMemorySession("long", wm, agent_id=agent_id, limit_tokens=40)
    fewer = await smaller.get_items()
    read, served = await last_build(wm, agent_id)
    assert read["budget"] == 40 and read["tokens"] <= 40
    assert 0 < len(fewer) < len(items) and texts(fewer) == [e["content"] for e in served]
    await smaller.close()


async def test_older_turns_come_back_faded_within_the_budget(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="custom", budget=120)
    session = WorkingMemorySession("long", wm, agent_id=agent_id)
    said = [f"Note {i}: the parcel for flat {i} goes to the blue door on the left, after {i} pm." for i in range(20)]
    await session.add_items([user(text) for text in said])
    # Working holds more than it may carry: fade relieves it, compressing older notes, then stops.
    deadline = asyncio.get_running_loop().time() + FADE_WAIT_S
    while (view := await agent.view())["usage"] > 0.8 * view["budget"]:
        assert asyncio.get_running_loop().time() < deadline, f"fade did not relieve working: {view['usage']} tokens"
        await asyncio.sleep(0.1)
    before = {e["id"]: e for e in view["entries"]}
    items = await session.get_items()
    read, served = await last_build(wm, agent_id)
    assert read["tokens"] <= read["budget"] == 120
    # Fading may still take forms away meanwhile: what was served is in the view before the build (raw texts, key
    # points) or in the view after it (summaries made since).
    held = served + [before[s["entryId"]] for s in read["served"] if s["entryId"] in before]
    forms = {f: e for e in held for f in (e["content"], e["keyPoints"], f"summary: {e['summary']}") if f}
    assert 0 < len(items) <= len(read["served"]) and all(t in forms for t in texts(items))
    raw = {e["content"] for e in held}
    assert any(t not in raw for t in texts(items))  # some older notes come back as key points or summaries
    await session.close()


async def test_pop_and_clear_withdraw_items_from_the_session_and_the_log_keeps_them(wm: WorkingMemoryClient, agent_id: str) -> None:
    await wm.agent(agent_id).register(role="main")
    session = WorkingMemorySession("chat", wm, agent_id=agent_id)
    assert await session.pop_item() is None
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Lisbon"}'}
    output = {"type": "function_call_output", "call_id": "c1", "output": "22 C and sunny"}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}]}
    added = [user("Weather in Lisbon?"), cast(TResponseInputItem, call), cast(TResponseInputItem, output), cast(TResponseInputItem, answer)]
    await session.add_items(added)
    assert await session.get_items() == added  # at full fidelity, each item as it was added

    assert await session.pop_item() == answer
    popped_output = await session.pop_item()
    assert popped_output == output
    # A call without its result goes as text (the API refuses a call with no output).
    assert await session.get_items() == [user("Weather in Lisbon?"), {"role": "assistant", "content": 'called weather({"city": "Lisbon"})'}]
    # Durable: another session object with the id, as after a restart, sees the same conversation.
    again = WorkingMemorySession("chat", wm, agent_id=agent_id)
    assert texts(await again.get_items()) == ["Weather in Lisbon?", 'called weather({"city": "Lisbon"})']
    other = WorkingMemorySession("other", wm, agent_id=agent_id)
    await other.add_items([user("A note from another conversation.")])

    await again.clear_session()
    assert await session.get_items() == [user("A note from another conversation.")]
    assert await again.pop_item() is None
    await session.add_items([user("A fresh start.")])
    assert texts(await session.get_items()) == ["A note from another conversation.", "A fresh start."]
    # Append-only and audited: every item is still in the log, and so are the withdrawals.
    contents = [e["content"] for e in await events(wm, agent_id) if e["_tag"] == "EntryRecorded"]
    assert "It is sunny." in contents and "the tool returned: 22 C and sunny" not in contents
    assert "weather returned: 22 C and sunny" in contents
    assert sum("withdrawn" in c for c in contents) == 2 and sum("cleared" in c for c in contents) == 1
    await session.close()


async def test_bad_input_is_a_typed_error(system: System, wm: WorkingMemoryClient, agent_id: str) -> None:
    with pytest.raises(ValidationError):
        WorkingMemorySession("chat", wm, agent_id="not an agent")
    unregistered = WorkingMemorySession("chat", wm, agent_id=agent_id)
    with pytest.raises(AgentNotFound):
        await unregistered.get_items()
    with pytest.raises(AgentNotFound):
        await unregistered.add_items([user("hello")])
    session = WorkingMemorySession("chat", wm, agent_id=agent_id, role="main")
    with pytest.raises(ValidationError) as big:
        await session.add_items([user("x" * (64 * 1024 + 1))])
    assert big.value.field.endswith("content")
    assert await session.get_items() == []  # nothing of it was stored

    closing = await WorkingMemoryClient.connect(system.nats_url)
    closed = WorkingMemorySession("chat", closing, agent_id=agent_id)
    await closing.close()
    for call in (closed.get_items(), closed.add_items([user("hi")]), closed.pop_item(), closed.clear_session()):
        with pytest.raises(NotConnected):
            await asyncio.wait_for(call, NO_HANG_S)
