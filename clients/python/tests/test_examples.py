"""The Python examples run against the system as written."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO_ROOT, System
from working_memory import new_request_id


def test_the_quickstart_example_runs(system: System) -> None:
    agent_id = f"py-quickstart-{new_request_id()[:10]}"
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "quickstart.py"), agent_id],
        env={**os.environ, "NATS_URL": system.nats_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("[") and lines[0].endswith("]")  # the date line
    assert lines[1].endswith("Ship the report by Friday.")
    assert lines[-1].endswith("best match: Ship the report by Friday.")


def run_example(system: System, path: str, argument: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / path), argument],
        env={**os.environ, "NATS_URL": system.nats_url},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def memory_on_turn_3(lines: list[str]) -> list[str]:
    """What an adapter example printed as the memory the framework handed the model on turn 3."""
    return lines[lines.index("memory handed to the model on turn 3:") + 1 :]


def test_the_langgraph_example_hands_the_model_the_cat_from_the_store(system: System) -> None:
    lines = run_example(system, "examples/python/langgraph_store.py", f"py-lg-example-{new_request_id()[-10:]}")
    assert lines[2] == "turn 3: What is my cat called? -> Your cat is called Miso."
    assert "My cat is called Miso." in memory_on_turn_3(lines)


def test_the_openai_agents_example_hands_the_model_the_cat_from_the_session(system: System) -> None:
    lines = run_example(system, "examples/python/openai_agents_session.py", f"py-oa-example-{new_request_id()[-10:]}")
    assert lines[2] == "turn 3: What is my cat called? -> Your cat is called Miso."
    assert "user: My cat is called Miso." in memory_on_turn_3(lines)


def test_the_adk_example_hands_the_model_the_cat_from_the_memory_service(system: System) -> None:
    lines = run_example(system, "examples/python/adk_memory.py", f"py-adk-example-{new_request_id()[-10:]}")
    assert lines[2] == "turn 3: What is my cat called? -> Your cat is called Miso."
    assert "user: My cat is called Miso." in memory_on_turn_3(lines)
