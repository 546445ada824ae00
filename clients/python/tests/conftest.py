"""Test setup: one real nats-server with JetStream and the whole working-memory system
(``npm start -- --no-demo``) per pytest session, both on temporary stores, both stopped at the end."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from working_memory import ApiError, NoResponse, NotConnected, OperationName, WorkingMemoryClient, new_request_id

REPO_ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 300.0
#: One request per service (gateway, working, substrate, retrieval); any typed answer means it serves.
PROBES: list[tuple[OperationName, dict[str, object]]] = [
    ("registerAgent", {}),
    ("getView", {}),
    ("getRaw", {"entryId": "probe"}),
    ("query", {"query": "probe"}),
]


@dataclass(frozen=True)
class NatsServer:
    url: str
    process: subprocess.Popen[bytes]


@dataclass(frozen=True)
class System:
    nats_url: str
    nats_bin: str
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nats_server_bin() -> str:
    binary = os.environ.get("NATS_SERVER_BIN") or shutil.which("nats-server")
    if not binary:
        raise RuntimeError("nats-server is not installed (sudo apt-get install -y nats-server), or set NATS_SERVER_BIN")
    return binary


def start_nats_server(
    binary: str, store_dir: Path | None, log: Path, port: int | None = None, extra_args: list[str] | None = None
) -> NatsServer:
    """Starts nats-server on a local port (a free one unless given; with JetStream when given a store)
    and waits until it accepts connections."""
    port = port or free_port()
    args = [binary, "-a", "127.0.0.1", "-p", str(port)]
    if store_dir is not None:
        args += ["-js", "-sd", str(store_dir)]
    args += extra_args or []
    process = subprocess.Popen(args, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nats-server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return NatsServer(f"nats://127.0.0.1:{port}", process)
        except OSError:
            time.sleep(0.1)
    stop(process)
    raise RuntimeError(f"nats-server did not accept connections on port {port}:\n{log.read_text()}")


async def every_service_answers(url: str) -> bool:
    try:
        client = await WorkingMemoryClient.connect(url, timeout=2.0, attempts=1)
    except NotConnected:
        return False
    try:
        for operation, request in PROBES:
            try:
                await client.call("py-probe", operation, request)
            except ApiError:
                pass
        return True
    except NoResponse:
        return False
    finally:
        await client.close()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stops a process this setup started, with everything it started (its own process group): the group is
    waited for, not only its leader (`npm start` exits before the services it started have stopped)."""
    pgid = process.pid
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while _group_alive(pgid) and time.monotonic() < deadline:
        process.poll()
        time.sleep(0.1)
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


@pytest.fixture(scope="session")
def work_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="wm-python-") as d:
        yield Path(d)


@pytest.fixture(scope="session")
def system(work_dir: Path) -> Iterator[System]:
    binary = nats_server_bin()
    (work_dir / "nats").mkdir()
    nats = start_nats_server(binary, work_dir / "nats", work_dir / "nats-server.log")
    log = work_dir / "system.log"
    env = {
        **os.environ,
        "NATS_URL": nats.url,
        "WM_TENANTS": "py-trip=py-trip-planner,py-trip-advisor",
        # The client's tests run on the offline embedder, as the TypeScript suites do, unless told otherwise.
        "WM_EMBEDDER": os.environ.get("WM_EMBEDDER", "offline"),
    }
    app = subprocess.Popen(
        ["npm", "start", "--", "--no-demo", "--data-dir", str(work_dir / "data")],
        cwd=REPO_ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not asyncio.run(every_service_answers(nats.url)):
            if app.poll() is not None:
                raise RuntimeError(f"npm start exited with {app.returncode}:\n{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the system did not start within {START_TIMEOUT_S} s:\n{log.read_text(errors='replace')}")
            time.sleep(0.5)
        yield System(nats_url=nats.url, nats_bin=binary, log=log)
    finally:
        stop(app)
        stop(nats.process)


@pytest.fixture(scope="session")
def relay_server(system: System, work_dir: Path) -> Iterator[str]:
    """A second, plain nats-server, where a test's relay stands between the client and the system."""
    server = start_nats_server(system.nats_bin, None, work_dir / "relay-server.log")
    try:
        yield server.url
    finally:
        stop(server.process)


@pytest.fixture
async def wm(system: System) -> AsyncIterator[WorkingMemoryClient]:
    client = await WorkingMemoryClient.connect(system.nats_url)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def agent_id(request: pytest.FixtureRequest) -> str:
    """A fresh agent id per test, so tests share the system but not memory."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:30]
    # A nuid's first 12 characters are the process's prefix; its last 10 are what changes per id.
    return f"py-{name}-{new_request_id()[-10:]}"
