"""Requests carry the caller's OpenTelemetry trace context (``traceparent``) when a span is active, and
the event a traced request appends keeps it: read back through ``view.events``. Without a span, or
without opentelemetry-api, nothing is added."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from conftest import System
from working_memory import WorkingMemoryClient
from working_memory.sync import connect
from working_memory.types import OwnEvent


@contextmanager
def caller_span() -> Iterator[SpanContext]:
    """An active, sampled span of a trace of its own, as an application's tracer would make it."""
    span_context = SpanContext(
        trace_id=random.getrandbits(128), span_id=random.getrandbits(64), is_remote=False, trace_flags=TraceFlags(1)
    )
    with trace.use_span(NonRecordingSpan(span_context)):
        yield span_context


def recorded_event(events: list[OwnEvent], entry_id: str) -> OwnEvent:
    return next(e for e in events if e["event"].get("entryId") == entry_id)


def trace_id_of(event: OwnEvent) -> int:
    return int(event["traceparent"].split("-")[1], 16)


async def test_an_entry_recorded_within_a_span_keeps_its_trace_id_on_the_event(
    wm: WorkingMemoryClient, agent_id: str
) -> None:
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    with caller_span() as span:
        recorded = await agent.record(origin="USER", content="My cat is called Miso.")
    stored = recorded_event((await agent.read_events())["events"], recorded["entryId"])
    assert "traceparent" in stored
    assert trace_id_of(stored) == span.trace_id


async def test_an_entry_recorded_outside_any_span_carries_no_trace(wm: WorkingMemoryClient, agent_id: str) -> None:
    assert not trace.get_current_span().get_span_context().is_valid
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    recorded = await agent.record(origin="USER", content="Nobody traces this.")
    # The system runs with span export off: a request without a trace context leaves none on its event.
    stored = recorded_event((await agent.read_events())["events"], recorded["entryId"])
    assert "traceparent" not in stored


def test_the_blocking_client_carries_the_calling_threads_span(system: System, agent_id: str) -> None:
    with connect(system.nats_url) as wm:
        agent = wm.agent(agent_id)
        agent.register(role="main")
        with caller_span() as span:
            recorded = agent.record(origin="USER", content="Recorded from a thread without an event loop.")
        stored = recorded_event(agent.read_events()["events"], recorded["entryId"])
        assert trace_id_of(stored) == span.trace_id


# Imports the client as if opentelemetry-api were not installed, and sends nothing for a span then.
WITHOUT_OTEL = """
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None
sys.meta_path.insert(0, Blocker())
from working_memory.trace_context import trace_headers
print(trace_headers())
"""


def test_without_opentelemetry_the_client_imports_and_adds_no_header() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_OTEL], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "None", done.stdout + done.stderr
