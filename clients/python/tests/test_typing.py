"""The package and the README's example type-check strictly, so users' type checkers see the API's shapes."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO_ROOT

CLIENT = REPO_ROOT / "clients" / "python"


def test_the_client_and_its_example_type_check_strictly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(CLIENT / "src" / "working_memory"), str(REPO_ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
