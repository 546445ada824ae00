"""A relay between a client and the system on two real nats-servers: it forwards each request on
``wm.api.>`` to the system and relays the answer, unless the test's policy says to drop the answer
(a lost reply), drop the request, or answer itself. It records every request body it sees."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription


@dataclass
class Seen:
    subject: str
    body: dict[str, Any]
    attempt: int
    """1 for the first request on this subject with this body's request id (or body), 2 for its retry..."""


#: What to do with one request: "forward", "lose-reply" (forward, drop the answer), "drop", or a reply to send.
Action = str | dict[str, Any]
Policy = Callable[[Seen], Action]


def _key(body: dict[str, Any]) -> str:
    """What makes two requests attempts of one: the request id, else (a batch, a read) the whole body."""
    request_id = body.get("requestId")
    return request_id if isinstance(request_id, str) else json.dumps(body, sort_keys=True)


@dataclass
class Relay:
    client_side: NatsClient
    system_side: NatsClient
    policy: Policy
    seen: list[Seen] = field(default_factory=list)
    _sub: Subscription | None = None

    async def start(self) -> None:
        self._sub = await self.client_side.subscribe("wm.api.>", cb=self._handle)

    async def _handle(self, msg: Msg) -> None:
        body = json.loads(msg.data)
        key = _key(body)
        attempt = 1 + sum(1 for s in self.seen if s.subject == msg.subject and _key(s.body) == key)
        seen = Seen(msg.subject, body, attempt)
        self.seen.append(seen)
        action = self.policy(seen)
        if isinstance(action, dict):
            await msg.respond(json.dumps(action).encode())
            return
        if action == "drop":
            return
        answer = await self.system_side.request(msg.subject, msg.data, timeout=60)
        if action == "forward":
            await msg.respond(answer.data)

    def bodies(self, operation_subject: str) -> list[dict[str, Any]]:
        return [s.body for s in self.seen if s.subject.endswith("." + operation_subject)]

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
        await self.client_side.close()
        await self.system_side.close()


async def open_relay(relay_url: str, system_url: str, policy: Policy) -> Relay:
    relay = Relay(await nats.connect(relay_url), await nats.connect(system_url), policy)
    await relay.start()
    return relay


