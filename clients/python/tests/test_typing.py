"""The package, its framework adapters and the examples type-check strictly, so users' type checkers see the API's
shapes; each adapter imports only its own framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO_ROOT

CLIENT = REPO_ROOT / "clients" / "python"
EXAMPLES = [REPO_ROOT / "examples" / "quickstart.py", *sorted((REPO_ROOT / "examples" / "python").glob("*.py"))]


def test_the_client_its_adapters_and_the_examples_type_check_strictly() -> None:
    assert len(EXAMPLES) == 4
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(CLIENT / "src" / "working_memory"), *map(str, EXAMPLES)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "integrations" in " ".join(p.name for p in (CLIENT / "src" / "working_memory").iterdir())


#: Each adapter and the frameworks it must not need (installed here, so importing one would go unnoticed).
ADAPTERS = {
    "langgraph": ["agents", "google.adk"],
    "openai_agents": ["langgraph", "google.adk"],
    "adk": ["langgraph", "agents"],
}

# Refuses to import the given top-level packages, as if their extras were not installed.
BLOCK = """
import importlib.abc, sys
blocked = {blocked!r}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None
sys.meta_path.insert(0, Blocker())
import working_memory.integrations, working_memory.integrations.{adapter}
print("imported")
"""


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_each_adapter_imports_with_only_its_own_framework(adapter: str) -> None:
    code = BLOCK.format(blocked=ADAPTERS[adapter], adapter=adapter)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "imported", done.stdout + done.stderr
