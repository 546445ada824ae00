"""An OpenAI Agents SDK session (``agents.memory.Session``) on working memory.

    from agents import Agent, Runner
    from working_memory import WorkingMemoryClient
    from working_memory.integrations.openai_agents import WorkingMemorySession

    wm = await WorkingMemoryClient.connect()
    session = WorkingMemorySession("chat-42", wm, agent_id="assistant", role="main")
    result = await Runner.run(agent, "My cat is called Miso.", session=session)

The mapping (docs/frameworks-python.md):

- ``add_items`` records each item as an entry of the agent, with the session's tag (``oa-session:<id>``), its kind
  (``oa-kind:message-user``, ``oa-kind:function_call``...) and the session id as correlation id: a user message is
  ``USER``, the assistant's messages, tool calls and reasoning summaries ``INTERNAL``, system and developer
  messages and tool results ``SYSTEM``. The content is the item's text (a tool call as ``called name(arguments)``,
  its result as ``name returned: output``); an item with no text (reasoning without a summary) is not recorded;
- ``get_items`` is the conversation as it fits the agent's budget: it begins a step (focused on the session's
  latest user message), builds the context (``context.build``, at most the budget or ``limit_tokens``) and answers
  its entries, in time order, as input items: an entry of this session served at full fidelity as the item that
  was added (a tool call only with its result), anything else (faded to key points or a summary, recalled from
  long-term, recorded by other sessions or tools of the agent) as a message with the text served. The items'
  tokens are those of the context, so they never exceed the budget. ``limit`` keeps the latest ``limit`` items;
- the step ends when the assistant's answer is added (or at the next ``get_items``, ``pop_item``,
  ``clear_session`` or :meth:`WorkingMemorySession.close`); before it ends, every served entry the answer repeats
  four or more consecutive words of is reported as used (``step.reference``), which strengthens it and keeps a
  recalled entry;
- the log is append-only and audited: ``pop_item`` records a tombstone entry naming the session's latest item,
  and ``clear_session`` one for all its items so far. From then on ``get_items`` (and ``pop_item``) of every
  session object with this id leave them out, while the audit log keeps them and the agent's memory holds them
  until they fade as any entry does (they may take part of the budget meanwhile). Erasing content is an
  operator's ``npm run wm -- forget``.

Bad input is the client's typed error: an agent id that is not one (``ValidationError``), an agent that is not
registered (``AgentNotFound``, unless ``role`` is given), an item over the API's content limit
(``ValidationError``), a closed client (``NotConnected``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory import SessionSettings

from ..client import AgentClient
from ..errors import InvalidState, UnknownEntries, ValidationError
from ..types import BuiltContext, Focus, Origin, RecordEntryRequest, Role, WorkingEntry
from ._common import (
    MAX_CORRELATION_CHARS,
    Agents,
    ClientLike,
    EntryLog,
    LoggedEntry,
    async_client,
    bounded_tag,
    derived_id,
    on_client_loop,
)

__all__ = ["WorkingMemorySession"]

SESSION_TAG = "oa"
KIND_PREFIX = "oa-kind:"
POP_PREFIX = "oa-pop:"
CLEAR_TAG = "oa-clear"
#: Entries that record a withdrawal (this adapter's, the LangGraph store's): never served as conversation.
TOMBSTONE_TAGS = frozenset({CLEAR_TAG, "lg-deleted", "adk-deleted"})
#: Focus texts are at most 4000 characters.
MAX_FOCUS_CHARS = 4000
#: An answer that repeats this many consecutive words of a served entry reports the entry as used.
REFERENCE_WORDS = 4
MAX_REFERENCES = 256

_ROLE_ORIGINS: dict[str, Origin] = {"user": "USER", "assistant": "INTERNAL", "system": "SYSTEM", "developer": "SYSTEM"}
_ORIGIN_ROLES: dict[str, str] = {"USER": "user", "INTERNAL": "assistant", "SYSTEM": "system", "ADVISOR": "user"}
_WORD = re.compile(r"\w+")


def _part_text(part: Any) -> str | None:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        text = part.get("text")
        return text if isinstance(text, str) else None
    if kind == "refusal":
        return f"refusal: {part.get('refusal', '')}"
    if kind == "input_image":
        return "[image]"
    if kind == "input_file":
        return f"[file {part.get('filename') or ''}]".replace(" ]", "]")
    return None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_part_text(p) for p in content) if t)
    return ""


def _render(item: dict[str, Any], tool_names: dict[str, str]) -> tuple[str, Origin, str] | None:
    """An item's entry: its text, origin and kind; None for an item with no text."""
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message") and isinstance(role, str):
        text = _content_text(item.get("content"))
        return (text, _ROLE_ORIGINS.get(role, "SYSTEM"), f"message-{role}") if text.strip() else None
    if kind == "function_call":
        name = str(item.get("name", "tool"))
        if isinstance(item.get("call_id"), str):
            tool_names[item["call_id"]] = name
        return f"called {name}({item.get('arguments', '')})", "INTERNAL", "function_call"
    if kind == "function_call_output":
        name = tool_names.get(str(item.get("call_id")), "the tool")
        output = item.get("output")
        text = output if isinstance(output, str) else _content_text(output)
        return f"{name} returned: {text}", "SYSTEM", "function_call_output"
    if kind == "reasoning":
        text = "\n".join(t for t in (_part_text(p) for p in item.get("summary") or []) if t)
        return (text, "INTERNAL", "reasoning") if text.strip() else None
    return json.dumps(item, ensure_ascii=False, default=str), "INTERNAL", str(kind)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _shares_a_run(answer: set[tuple[str, ...]], text: str) -> bool:
    words = _words(text)
    return any(tuple(words[i : i + REFERENCE_WORDS]) in answer for i in range(len(words) - REFERENCE_WORDS + 1))


class WorkingMemorySession:
    """An OpenAI Agents SDK ``Session`` whose history is the agent's working memory (see the module's docstring).

    ``session_id`` names the conversation (any text); ``client`` is a :class:`~working_memory.WorkingMemoryClient`
    or the blocking :class:`~working_memory.sync.SyncWorkingMemoryClient` (needed under ``Runner.run_sync``, which
    runs on a loop of its own); ``agent_id`` is the agent whose memory holds the conversation; ``role`` (and
    ``budget``) register it on first use; ``limit_tokens`` builds the history within less than the budget;
    ``auto_reference=False`` reports no entry as used."""

    #: Items come back without the ids the model gave them: the SDK matches them on their content.
    _ignore_ids_for_matching = True

    def __init__(
        self,
        session_id: str,
        client: ClientLike,
        *,
        agent_id: str,
        role: Role | None = None,
        budget: int | None = None,
        limit_tokens: int | None = None,
        auto_reference: bool = True,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if not session_id:
            raise ValidationError("session_id", "a session id is a non-empty string")
        self.session_id = session_id
        self.session_settings = session_settings
        self._client = async_client(client)
        self._agents = Agents(self._client, role, budget)
        self.agent: AgentClient = self._agents.get(agent_id, "agent_id")
        self._tag = bounded_tag("oa-session:", session_id)
        self._correlation_id = derived_id("oa-", session_id) if len(session_id) > MAX_CORRELATION_CHARS else session_id
        self._log = EntryLog(self.agent, lambda tags: SESSION_TAG in tags)
        self._limit_tokens = limit_tokens
        self._auto_reference = auto_reference
        #: The items as they were added, by entry id (within this process; elsewhere they are rebuilt from the log).
        self._added: dict[str, TResponseInputItem] = {}
        self._tool_names: dict[str, str] = {}
        #: The step the last get_items began, and the text of each entry it served.
        self.step_id: str | None = None
        self._served: dict[str, str] = {}

    # ---- the Session protocol ----------------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await on_client_loop(self._client, self._get_items(limit))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await on_client_loop(self._client, self._add_items(items))

    async def pop_item(self) -> TResponseInputItem | None:
        return await on_client_loop(self._client, self._pop_item())

    async def clear_session(self) -> None:
        await on_client_loop(self._client, self._clear_session())

    async def close(self) -> None:
        """Ends the step the last ``get_items`` began, if the answer did not end it."""
        await on_client_loop(self._client, self._end_step())

    # ---- the conversation as the log holds it -----------------------------------------------------------------

    async def _conversation(self) -> tuple[list[LoggedEntry], set[str]]:
        """This session's items still in it, in log order, and every entry of the agent's sessions that is no longer
        in its session (popped, before a clear, or a tombstone itself)."""
        await self._log.catch_up()
        by_session: dict[str, list[LoggedEntry]] = {}
        hidden: set[str] = set()
        for entry in self._log:
            session = next((t for t in entry.tags if t.startswith("oa-session:")), "")
            items = by_session.setdefault(session, [])
            if CLEAR_TAG in entry.tags:
                hidden.update(i.entry_id for i in items)
                items.clear()
                hidden.add(entry.entry_id)
                continue
            popped = {t[len(POP_PREFIX) :] for t in entry.tags if t.startswith(POP_PREFIX)}
            if popped:
                hidden.update(popped)
                by_session[session] = [i for i in items if i.entry_id not in popped]
                hidden.add(entry.entry_id)
                continue
            items.append(entry)
        return by_session.get(self._tag, []), hidden

    async def _visible(self) -> list[LoggedEntry]:
        return (await self._conversation())[0]

    def _kind(self, entry: LoggedEntry) -> str | None:
        return next((t[len(KIND_PREFIX) :] for t in entry.tags if t.startswith(KIND_PREFIX)), None)

    def _as_message(self, kind: str | None, origin: Origin, text: str) -> TResponseInputItem:
        role = kind[len("message-") :] if kind and kind.startswith("message-") else _ORIGIN_ROLES.get(origin, "user")
        if kind and not kind.startswith("message-"):
            role = "assistant"
        if origin == "ADVISOR" and kind is None:
            text = f"advisor: {text}"
        return cast(TResponseInputItem, {"role": role, "content": text})

    def _as_added(self, entry: LoggedEntry) -> TResponseInputItem:
        """The item an entry of this session was recorded from: as added (a reasoning item as its text), else
        rebuilt from its text."""
        added = self._added.get(entry.entry_id)
        if added is not None and cast(dict[str, Any], added).get("type") != "reasoning":
            return copy.deepcopy(added)
        return self._as_message(self._kind(entry), entry.origin, entry.content)

    # ---- steps ------------------------------------------------------------------------------------------------

    async def _begin_step(self, focus_text: str | None) -> str:
        focus: Focus | None = {"query": focus_text[:MAX_FOCUS_CHARS]} if focus_text and focus_text.strip() else None
        try:
            return (await self.agent.begin_step(focus=focus))["stepId"]
        except InvalidState:
            # A step left open (by a run that did not finish, or another process): it ends here.
            open_step = (await self.agent.view())["step"]
            if open_step is None:
                raise
            await self.agent.end_step(open_step["stepId"])
            return (await self.agent.begin_step(focus=focus))["stepId"]

    async def _end_step(self, answer: str | None = None) -> None:
        step_id, served = self.step_id, self._served
        self.step_id, self._served = None, {}
        if step_id is None:
            return
        if answer and self._auto_reference:
            words = _words(answer)
            runs = {tuple(words[i : i + REFERENCE_WORDS]) for i in range(len(words) - REFERENCE_WORDS + 1)}
            used = [entry_id for entry_id, text in served.items() if _shares_a_run(runs, text)][:MAX_REFERENCES]
            if used:
                try:
                    await self.agent.reference(step_id, used)
                except (InvalidState, UnknownEntries):
                    pass  # the step or an entry went meanwhile (ended by another holder, forgotten): nothing to report
        try:
            await self.agent.end_step(step_id)
        except InvalidState:
            pass  # ended meanwhile (by another holder of the agent)

    # ---- the operations ---------------------------------------------------------------------------------------

    async def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        await self._end_step()
        await self._agents.ensure_registered(self.agent)
        visible, hidden = await self._conversation()
        own = {e.entry_id: e for e in visible}
        last_user = next((e.content for e in reversed(visible) if e.origin == "USER"), None)
        self.step_id = await self._begin_step(last_user)
        context: BuiltContext = await self.agent.build_context(step_id=self.step_id, limit=self._limit_tokens)
        working: dict[str, WorkingEntry] = {e["id"]: e for e in (await self.agent.view())["entries"]}
        served: list[tuple[str, str, Origin, dict[str, Any] | None]] = []  # entry id, text, origin, the item as added
        for item in context["items"]:
            entry_id = item["entryId"]
            entry = working.get(entry_id)
            if entry_id in hidden or (entry is not None and any(t in TOMBSTONE_TAGS for t in entry["tags"])):
                continue
            mine = own.get(entry_id)
            text: str | None = None
            if item["form"] == "raw":
                text = entry["content"] if entry is not None else None
                text = text if text is not None else (mine.content if mine is not None else None)
            elif item["form"] == "keyPoints" and entry is not None and entry["keyPoints"]:
                text = entry["keyPoints"]
            # A summary, or key points that faded further since the build: the summary, never larger.
            elif entry is not None and entry["summary"]:
                text = f"summary: {entry['summary']}"
            if not text:
                continue
            as_added = cast(dict[str, Any], self._as_added(mine)) if mine is not None and item["form"] == "raw" else None
            served.append((entry_id, text, item["origin"], as_added))
        # A tool call goes as it was added only with its result (the API refuses one without the other).
        call_ids = [a["call_id"] for _, _, _, a in served if a is not None and "call_id" in a]
        paired = {call_id for call_id in call_ids if call_ids.count(call_id) >= 2}
        out: list[TResponseInputItem] = []
        for entry_id, text, origin, added in served:
            self._served[entry_id] = text
            if added is not None and ("call_id" not in added or added["call_id"] in paired):
                out.append(cast(TResponseInputItem, added))
                continue
            mine = own.get(entry_id)
            out.append(self._as_message(self._kind(mine) if mine is not None else None, origin, text))
        return out if limit is None else (out[-limit:] if limit > 0 else [])

    async def _add_items(self, items: Sequence[TResponseInputItem]) -> None:
        if not items:
            return
        await self._agents.ensure_registered(self.agent)
        entries: list[RecordEntryRequest] = []
        recorded: list[TResponseInputItem] = []
        answer: list[str] = []
        for item in items:
            data = cast(dict[str, Any], item)
            rendered = _render(data, self._tool_names)
            if rendered is None:
                continue
            text, origin, kind = rendered
            entries.append(
                {
                    "content": text,
                    "origin": origin,
                    "tags": [SESSION_TAG, self._tag, bounded_tag(KIND_PREFIX, kind)],
                    "correlationId": self._correlation_id,
                }
            )
            recorded.append(copy.deepcopy(item))
            if kind == "message-assistant":
                answer.append(text)
        if not entries:
            return
        reply = await self.agent.record_many(entries)
        for result, item in zip(reply["results"], recorded):
            if result["ok"] is False:
                raise result["error"]
            self._added[result["entryId"]] = item
        if answer:
            await self._end_step("\n".join(answer))

    async def _pop_item(self) -> TResponseInputItem | None:
        await self._end_step()
        visible = await self._visible()
        if not visible:
            return None
        last = visible[-1]
        await self.agent.record(
            origin="SYSTEM",
            content="An earlier message of this conversation was withdrawn.",
            tags=[SESSION_TAG, self._tag, bounded_tag(POP_PREFIX, last.entry_id)],
            correlation_id=self._correlation_id,
        )
        return self._as_added(last)

    async def _clear_session(self) -> None:
        await self._end_step()
        if not await self._visible():
            return
        await self.agent.record(
            origin="SYSTEM",
            content="This conversation was cleared: what came before is no longer part of it.",
            tags=[SESSION_TAG, self._tag, CLEAR_TAG],
            correlation_id=self._correlation_id,
        )
