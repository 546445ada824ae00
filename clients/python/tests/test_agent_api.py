"""The client against the real running system: every operation, typed refusals, idempotency."""

from __future__ import annotations

import pytest

from working_memory import (
    AgentNotFound,
    InvalidState,
    UnknownEntries,
    ValidationError,
    WorkingMemoryClient,
    new_request_id,
)


async def test_register_returns_the_configuration_and_is_idempotent(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    first = await agent.register(role="custom", budget=300, encoding="cl100k_base", fade={"tau": 0.7})
    assert first["agent"]["id"] == agent_id
    assert first["agent"]["role"] == "custom"
    assert first["agent"]["encoding"] == "cl100k_base"
    assert first["budget"] == 300
    assert agent.last_seq == first["seq"] > 0
    again = await agent.register(role="custom", budget=300, encoding="cl100k_base", fade={"tau": 0.7})
    assert again["agent"] == first["agent"]


async def test_role_budget_is_the_default(wm: WorkingMemoryClient, agent_id: str) -> None:
    registered = await wm.agent(agent_id).register(role="main")
    assert registered["budget"] == 8000


async def test_a_recorded_entry_is_read_back_by_view_and_substrate(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    recorded = await agent.record(
        origin="USER",
        content="Ship the report by Friday.",
        tags=["deadline"],
        correlation_id="report-1",
        mood={"valence": 0.2, "arousal": 0.6},
        emotional_weight=0.3,
        timestamp=1_700_000_000_000,
    )
    assert recorded["duplicate"] is False
    assert recorded["tokens"] > 0
    assert recorded["timestamp"] == 1_700_000_000_000
    assert agent.last_seq == recorded["seq"]

    view = await agent.view()
    assert view["appliedSeq"] >= recorded["seq"]
    [entry] = view["entries"]
    assert entry["id"] == recorded["entryId"]
    assert entry["content"] == "Ship the report by Friday."
    assert entry["rung"] == 0
    assert entry["tags"] == ["deadline"]
    assert entry["correlationId"] == "report-1"
    assert entry["moodSnapshot"] == {"valence": 0.2, "arousal": 0.6}
    assert view["entriesByRung"]["0"] == 1
    assert view["usage"] == entry["tokens"]["raw"]

    raw = await agent.raw(recorded["entryId"])
    assert raw["content"] == "Ship the report by Friday."
    assert raw["agentId"] == agent_id
    assert raw["origin"] == "USER"
    assert raw["seq"] == recorded["seq"]
    assert raw["emotionalWeight"] == 0.3


async def test_a_step_builds_the_context_and_takes_references(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    deadline = await agent.record(origin="USER", content="Ship the weekly report by Friday.")
    thought = await agent.record(origin="INTERNAL", content="Check the sales figures before writing.")

    step = await agent.begin_step(focus={"task": "weekly report"})
    view = await agent.view()
    assert view["step"] is not None and view["step"]["stepId"] == step["stepId"]
    assert view["step"]["focus"] == {"task": "weekly report"}

    context = await agent.build_context(step_id=step["stepId"])
    # What the agent heard is served without a label; its own thoughts are marked.
    assert "\nShip the weekly report by Friday.\n" in context["text"]
    assert "thought: Check the sales figures before writing." in context["text"]
    assert context["tokens"] <= context["budget"] == 8000
    assert {i["entryId"] for i in context["items"]} == {deadline["entryId"], thought["entryId"]}
    assert context["omitted"] == 0
    assert agent.last_seq == context["seq"]

    limited = await agent.build_context(step_id=step["stepId"], limit=16, order="priority")
    assert limited["budget"] == 16
    assert limited["tokens"] <= 16

    referenced = await agent.reference(step["stepId"], [deadline["entryId"]])
    assert referenced["entryIds"] == [deadline["entryId"]]
    await agent.end_step(step["stepId"])

    view = await agent.view()
    assert view["step"] is None
    cited = next(e for e in view["entries"] if e["id"] == deadline["entryId"])
    assert cited["citationCount"] == 1
    assert cited["referenceCount"] >= 1


async def test_focus_budget_and_hyperfocus(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    assert (await agent.set_focus({"task": "plan the trip"}, task_kind="planning"))["transition"] is True
    assert (await agent.set_focus({"task": "plan the trip", "subgoal": "trains"}))["transition"] is False
    assert (await agent.view())["focus"] == {"task": "plan the trip", "subgoal": "trains"}

    retuned = await agent.retune_budget(4000)
    assert (retuned["baseBudget"], retuned["budget"], retuned["hyperfocus"]) == (4000, 4000, False)
    expanded = await agent.enter_hyperfocus()
    assert (expanded["budget"], expanded["hyperfocus"]) == (8000, True)
    back = await agent.exit_hyperfocus()
    assert (back["budget"], back["hyperfocus"]) == (4000, False)
    with pytest.raises(InvalidState) as refused:
        await agent.exit_hyperfocus()
    assert refused.value.field and refused.value.reason


async def test_query_explains_its_ranking(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    puppy = await agent.record(origin="USER", content="We adopted a golden retriever puppy last week.", tags=["pets"])
    await agent.record(origin="USER", content="The quarterly budget review is on Monday.", tags=["work"])

    found = await agent.query("golden retriever puppy", explain=True, limit=5)
    best = found["results"][0]
    assert best["entryId"] == puppy["entryId"]
    assert best["tier"] == "working"
    assert "explain" in best
    explain = best["explain"]
    assert set(explain) >= {"similarity", "dense", "lexical", "recency", "frequency", "weights"}
    assert explain["weights"] == {"alpha": 0.9, "beta": 0.05, "gamma": 0.05, "delta": 0.5}

    filtered = await agent.query("golden retriever puppy", filter={"tags": ["work"]})
    assert puppy["entryId"] not in [r["entryId"] for r in filtered["results"]]
    by_time = await agent.query("puppy", filter={"from": puppy["timestamp"] + 1})
    assert puppy["entryId"] not in [r["entryId"] for r in by_time["results"]]


async def test_a_thread_spans_the_callers_tenant_in_time_order(wm: WorkingMemoryClient, agent_id: str) -> None:
    # The system under test runs with WM_TENANTS=py-trip=py-trip-planner,py-trip-advisor (conftest.py).
    planner, advisor = wm.agent("py-trip-planner"), wm.agent("py-trip-advisor")
    outsider = wm.agent(agent_id + "-outsider")
    await planner.register(role="main")
    await advisor.register(role="mood-advisor")
    await outsider.register(role="main")
    thread_id = f"trip-{new_request_id()}"
    first = await planner.record(origin="USER", content="Book a train to Porto.", correlation_id=thread_id, timestamp=1_000)
    second = await advisor.record(origin="ADVISOR", content="The user sounds rushed.", correlation_id=thread_id, timestamp=2_000)
    await outsider.record(origin="USER", content="Not the planner's to read.", correlation_id=thread_id, timestamp=1_500)
    await planner.record(origin="USER", content="Unrelated note.")

    # The planner's last write came after the advisor's, so the planner's read waits for both.
    thread = await planner.thread(thread_id)
    assert [(e["agentId"], e["entryId"]) for e in thread["entries"]] == [
        (planner.agent_id, first["entryId"]),
        (advisor.agent_id, second["entryId"]),
    ]
    assert thread["entries"][0]["text"] == "Book a train to Porto."
    # An agent outside the tenant sees only its own part of the thread.
    assert [e["agentId"] for e in (await outsider.thread(thread_id))["entries"]] == [outsider.agent_id]


async def test_recall_and_warm_up_answer_for_a_fresh_agent(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    await agent.record(origin="USER", content="The dog needs a walk at noon.")
    step = await agent.begin_step(focus={"query": "dog walk"})
    recalled = await agent.recall(step["stepId"])
    assert recalled["cues"] == 0  # nothing has been demoted yet, so nothing comes back
    await agent.end_step(step["stepId"])
    warmed = await agent.warm_up(3)
    assert warmed["entryIds"] == []


async def test_a_retried_record_with_the_same_request_id_is_the_original(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    request_id = new_request_id()
    original = await agent.record(origin="USER", content="Pay the invoice.", request_id=request_id)
    retry = await agent.record(origin="USER", content="Pay the invoice.", request_id=request_id)
    assert original["entryId"] == request_id
    assert original["duplicate"] is False
    assert retry["duplicate"] is True
    assert (retry["entryId"], retry["seq"], retry["tokens"]) == (original["entryId"], original["seq"], original["tokens"])
    assert [e["id"] for e in (await agent.view())["entries"]] == [request_id]


async def test_validation_errors_name_the_field(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    with pytest.raises(ValidationError) as bad_origin:
        await agent.record(origin="NOBODY", content="hello")  # type: ignore[arg-type]
    assert bad_origin.value.field == "origin"
    assert bad_origin.value.issues[0]["field"] == "origin"

    with pytest.raises(ValidationError) as too_long:
        await agent.record(origin="USER", content="x" * (64 * 1024 + 1))
    assert too_long.value.field == "content"

    with pytest.raises(ValidationError) as custom_without_budget:
        await wm.agent(agent_id + "-c").register(role="custom")
    assert custom_without_budget.value.field == "budget"

    with pytest.raises(ValidationError) as unknown_field:
        await wm.call(agent_id, "getView", {"afterSeq": 0, "colour": "red"})
    assert unknown_field.value.field == "colour"


async def test_a_body_above_max_payload_is_refused_before_sending(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    with pytest.raises(ValidationError) as refused:
        await agent.record(origin="USER", content="x" * (wm.nc.max_payload + 1))
    assert refused.value.field == "(body)"
    assert "max_payload" in refused.value.reason


async def test_an_unknown_agent_is_refused(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    with pytest.raises(AgentNotFound) as refused:
        await agent.record(origin="USER", content="Anyone there?")
    assert refused.value.agent_id == agent_id
    assert agent_id in str(refused.value)
    with pytest.raises(AgentNotFound):
        await agent.view()


async def test_invalid_state_and_unknown_entries(wm: WorkingMemoryClient, agent_id: str) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    with pytest.raises(InvalidState) as no_step:
        await agent.end_step("no-such-step")
    assert no_step.value.field == "stepId"
    step = await agent.begin_step()
    with pytest.raises(UnknownEntries) as unknown:
        await agent.reference(step["stepId"], ["never-recorded"])
    assert unknown.value.entry_ids == ["never-recorded"]
