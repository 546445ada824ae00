"""Connecting: the first connection fails when no server answers; an established one reconnects for as long as it takes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest

from conftest import System, free_port, start_nats_server, stop
from working_memory import NotConnected, WorkingMemoryClient


async def test_no_server_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    monkeypatch.setenv("NATS_URL", url)
    with pytest.raises(NotConnected) as failed:
        await WorkingMemoryClient.connect()
    assert url in str(failed.value)


async def test_nats_url_is_read_by_default(system: System, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_URL", system.nats_url)
    client = await WorkingMemoryClient.connect()
    try:
        assert client.nc.connected_url is not None
        assert client.nc.connected_url.port == int(system.nats_url.rsplit(":", 1)[1])
    finally:
        await client.close()


async def test_a_call_during_a_server_restart_is_answered_once_the_server_is_back(system: System, work_dir: Path) -> None:
    port = free_port()
    first = start_nats_server(system.nats_bin, None, work_dir / "restart-1.log", port)
    client = await WorkingMemoryClient.connect(first.url, timeout=1.0, attempts=10)
    try:
        stop(first.process)
        await asyncio.sleep(2)  # several reconnect attempts fail meanwhile
        second = start_nats_server(system.nats_bin, None, work_dir / "restart-2.log", port)
        responder = await nats.connect(second.url)
        try:

            async def answer(msg: nats.aio.msg.Msg) -> None:
                await msg.respond(json.dumps({"ok": True, "value": {"echo": json.loads(msg.data)}}).encode())

            await responder.subscribe("wm.api.restart.view.get", cb=answer)
            await responder.flush()
            value = await client.call("restart", "getView", {"afterSeq": 4})
            assert value == {"echo": {"afterSeq": 4}}
        finally:
            await responder.close()
            stop(second.process)
    finally:
        await client.close()


async def test_user_and_password_log_in(system: System, work_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_nats_server(system.nats_bin, None, work_dir / "auth.log", extra_args=["--user", "planner", "--pass", "s3cret"])
    try:
        monkeypatch.delenv("NATS_USER", raising=False)
        monkeypatch.delenv("NATS_PASS", raising=False)
        with pytest.raises(NotConnected):
            await WorkingMemoryClient.connect(server.url)
        client = await WorkingMemoryClient.connect(server.url, user="planner", password="s3cret")
        await client.close()
        monkeypatch.setenv("NATS_USER", "planner")
        monkeypatch.setenv("NATS_PASS", "s3cret")
        client = await WorkingMemoryClient.connect(server.url)
        await client.close()
    finally:
        stop(server.process)


async def test_a_call_on_a_closed_client_is_not_connected_at_once(system: System) -> None:
    client = await WorkingMemoryClient.connect(system.nats_url)
    assert client.loop is asyncio.get_running_loop()
    await client.close()
    with pytest.raises(NotConnected, match="closed"):
        await client.agent("py-closed").view()


class StallingRelay:
    """A TCP relay to a server whose open connections can be stalled (no FIN, no RST: bytes stop, both
    ways), as a network partition does; connections made after the stall are relayed as usual."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.connections = 0
        self.stalled: set[int] = set()
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.relay, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"nats://127.0.0.1:{port}"

    async def relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers += [client_writer, upstream_writer]

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while chunk := await reader.read(65536):
                if number not in self.stalled:
                    writer.write(chunk)
                    await writer.drain()

        await asyncio.gather(pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer), return_exceptions=True)

    def stall(self) -> None:
        self.stalled.update(range(1, self.connections + 1))

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.server is not None:
            self.server.close()


async def test_a_call_after_its_connection_stalled_is_answered_over_a_new_connection(system: System, agent_id: str) -> None:
    relay = StallingRelay(int(system.nats_url.rsplit(":", 1)[1]))
    url = await relay.start()
    client = await WorkingMemoryClient.connect(url, timeout=1.0, attempts=8, ping_interval=0.25)
    try:
        agent = client.agent(agent_id)
        await agent.register(role="main")
        await agent.record(origin="USER", content="before the stall")
        relay.stall()
        answer = await agent.record(origin="USER", content="after the stall")
        assert answer["entryId"]
        assert relay.connections >= 2
    finally:
        await asyncio.wait_for(client.close(), 10)
        await relay.close()
