"""The blocking wrapper against the running system."""

from __future__ import annotations

import pytest

from conftest import System
from working_memory import AgentNotFound, InvalidState
from working_memory.sync import connect


def test_the_blocking_client_records_and_reads_its_writes(system: System, agent_id: str) -> None:
    with connect(system.nats_url) as wm:
        agent = wm.agent(agent_id)
        with pytest.raises(AgentNotFound):
            agent.view()
        agent.register(role="main")
        recorded = agent.record(origin="USER", content="Call the plumber on Tuesday.")
        assert agent.last_seq == recorded["seq"]
        assert [e["id"] for e in agent.view()["entries"]] == [recorded["entryId"]]
        step = agent.begin_step(focus={"task": "house"})
        assert "\nCall the plumber on Tuesday.\n" in agent.build_context(step_id=step["stepId"])["text"]
        agent.end_step(step["stepId"])
        with pytest.raises(InvalidState):
            agent.end_step(step["stepId"])
