"""The README's Python example runs against the system as written."""

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
