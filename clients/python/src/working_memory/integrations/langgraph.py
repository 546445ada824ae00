"""A LangGraph store (``langgraph.store.base.BaseStore``) on working memory.

    from working_memory import WorkingMemoryClient
    from working_memory.integrations.langgraph import WorkingMemoryStore

    wm = await WorkingMemoryClient.connect()
    store = WorkingMemoryStore(wm, agent_id="assistant")        # or: the first label of each namespace
    await store.aput(("memories", "ana"), "cat", {"text": "My cat is called Miso."})
    hits = await store.asearch(("memories", "ana"), query="What is my cat called?")
    graph = builder.compile(store=store)

The mapping (docs/frameworks-python.md):

- a namespace is an agent and tags: with ``agent_id`` every label is a tag path inside that agent; without it the
  first label is the agent's id and the rest the path. An entry carries the tags ``lg`` and ``lg:<a>``,
  ``lg:<a>.<b>``, ... for each prefix of its path (searches filter on the prefix's tag);
- a ``put`` records one entry (origin ``origin``, ``INTERNAL`` by default) whose content is the value: its text
  when the value is one string field (``{"text": "..."}``; tag ``lg-text:<field>``), else its JSON (tag
  ``lg-json``), and whose correlation id names the item (``lg:`` and the JSON of path and key). Each put is a new
  version; ``get`` answers the latest, with ``created_at`` the first version's time;
- a delete (``PutOp`` with ``value=None``) records a tombstone entry (tag ``lg-deleted``) for an item that exists:
  the log is append-only and audited, so every version stays in it (and in the agent's memory, fading as any
  entry) while ``get``, ``search`` and ``list_namespaces`` answer as if the item were gone. Erasing content is an
  operator's ``npm run wm -- forget``, which this store honours;
- ``get``, ``list_namespaces`` and a search without ``query`` read a local projection of the agent's own events
  (``view.events``), brought up to date before each read, so they see every write, this process's or another's;
- a search with ``query`` is ``memory.query``: the merged, ranked retrieval over working and long-term memory,
  filtered on the prefix's tag; each hit on an item's current version is answered with its value and
  ``score`` = the relevance. ``filter`` applies to values (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
  ``$lte``). A put with ``index=False`` is left out of query searches. TTLs are not supported.

Bad input is the client's typed error: a label that is not an agent id, an agent that is not registered
(``AgentNotFound``, unless ``role`` is given: then a put registers it), a path and key over 200 characters, a
value that is not JSON, content over the API's limit (``ValidationError``); a closed client ``NotConnected``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..client import AgentClient
from ..errors import AgentNotFound, ValidationError
from ..types import Origin, RecordEntryRequest, Role
from ._common import (
    MAX_CORRELATION_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    Agents,
    ClientLike,
    EntryLog,
    LoggedEntry,
    async_client,
    bounded_tag,
    on_client_loop,
    run_blocking,
)

__all__ = ["WorkingMemoryStore"]

#: Every entry this store records carries it.
STORE_TAG = "lg"
DELETED_TAG = "lg-deleted"
JSON_TAG = "lg-json"
TEXT_TAG_PREFIX = "lg-text:"
NOT_INDEXED_TAG = "lg-noindex"
CORRELATION_PREFIX = "lg:"
#: Results asked of ``memory.query`` per result wanted (superseded versions and filters drop some).
QUERY_OVERFETCH = 3
MAX_QUERY_LIMIT = 200


def _prefix_tag(path: Sequence[str]) -> str:
    """The tag of a path prefix: ``lg`` for the empty one, else ``lg:`` and the labels joined by ``.`` (which no
    LangGraph label contains), hashed when longer than a tag may be."""
    if not path:
        return STORE_TAG
    return bounded_tag("lg:", ".".join(path))


def _correlation_id(path: Sequence[str], key: str) -> str:
    return CORRELATION_PREFIX + json.dumps([*path, key], ensure_ascii=False, separators=(",", ":"))


def _identity(entry: LoggedEntry) -> tuple[tuple[str, ...], str] | None:
    """The (path, key) an entry of this store is a version of, from its correlation id."""
    cid = entry.correlation_id
    if not cid or not cid.startswith(CORRELATION_PREFIX):
        return None
    try:
        labels = json.loads(cid[len(CORRELATION_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(labels, list) or not labels or not all(isinstance(label, str) for label in labels):
        return None
    return tuple(labels[:-1]), labels[-1]


def _encode_value(value: Mapping[str, Any]) -> tuple[str, str]:
    """The entry content of a value and the tag that says how to read it back."""
    if len(value) == 1:
        ((field, text),) = value.items()
        if (
            isinstance(field, str)
            and isinstance(text, str)
            and text.strip()
            and len(TEXT_TAG_PREFIX + field) <= MAX_TAG_CHARS
        ):
            return text, TEXT_TAG_PREFIX + field
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False), JSON_TAG
    except (TypeError, ValueError) as error:
        raise ValidationError("value", f"a store value must be JSON: {error}") from error


def _decode_value(entry: LoggedEntry) -> dict[str, Any]:
    for tag in entry.tags:
        if tag.startswith(TEXT_TAG_PREFIX):
            return {tag[len(TEXT_TAG_PREFIX) :]: entry.content}
    try:
        decoded = json.loads(entry.content)
    except ValueError:  # not written by this store's encoding: its text as it is
        return {"text": entry.content}
    return decoded if isinstance(decoded, dict) else {"value": decoded}


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _apply_operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not isinstance(operand, (int, float)):
            return False
        if operator == "$gt":
            return value > operand
        if operator == "$gte":
            return value >= operand
        if operator == "$lt":
            return value < operand
        return value <= operand
    raise ValidationError("filter", f"unsupported operator {operator!r}: use $eq, $ne, $gt, $gte, $lt or $lte")


def _matches(value: Any, condition: Any) -> bool:
    """A value against a filter condition, as LangGraph's stores compare them (nested dicts, operators)."""
    if isinstance(condition, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in condition):
            return all(_apply_operator(value, op, operand) for op, operand in condition.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in condition.items())
    if isinstance(condition, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(condition)
            and all(_matches(v, c) for v, c in zip(value, condition))
        )
    return bool(value == condition)


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(p == "*" or n == p for n, p in pairs)


@dataclass
class _Current:
    """An item's latest version, and when its first version (since its last deletion) was recorded."""

    path: tuple[str, ...]
    key: str
    entry: LoggedEntry
    created: int


class _AgentItems:
    """One agent's items: its log of the store's entries, folded into each item's current version."""

    def __init__(self, agent: AgentClient, missing_ok: bool) -> None:
        self.agent = agent
        self.log = EntryLog(agent, lambda tags: STORE_TAG in tags)
        self._missing_ok = missing_ok
        self._folded_at = -1
        self._items: dict[tuple[tuple[str, ...], str], _Current] = {}

    async def current(self) -> dict[tuple[tuple[str, ...], str], _Current]:
        """The items by (path, key); an agent that is not registered is :class:`AgentNotFound`, or holds nothing
        when the store registers agents on their first put."""
        try:
            await self.log.catch_up()
        except AgentNotFound:
            if not self._missing_ok:
                raise
            return {}
        if self._folded_at != self.log.version:
            items: dict[tuple[tuple[str, ...], str], _Current] = {}
            for entry in self.log:
                identity = _identity(entry)
                if identity is None:
                    continue
                if DELETED_TAG in entry.tags:
                    items.pop(identity, None)
                    continue
                before = items.get(identity)
                created = before.created if before is not None else entry.timestamp
                items[identity] = _Current(identity[0], identity[1], entry, created)
            self._items = items
            self._folded_at = self.log.version
        return self._items


class WorkingMemoryStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are entries of agents' working memory (see the module's docstring).

    ``client`` is a :class:`~working_memory.WorkingMemoryClient` or the blocking
    :class:`~working_memory.sync.SyncWorkingMemoryClient`; calls run on the loop its connection runs on, so ``batch``
    works from any thread but that loop's (use ``abatch`` there). ``agent_id`` puts every namespace in one agent;
    without it a namespace's first label is its agent. ``role`` (and ``budget``) register an agent on its first
    put; ``origin`` is the origin of the entries puts record."""

    supports_ttl = False

    def __init__(
        self,
        client: ClientLike,
        *,
        agent_id: str | None = None,
        role: Role | None = None,
        budget: int | None = None,
        origin: Origin = "INTERNAL",
    ) -> None:
        self._client = async_client(client)
        self._agents = Agents(self._client, role, budget)
        self._agent_id = agent_id
        if agent_id is not None:
            self._agents.get(agent_id, "agent_id")
        self._origin: Origin = origin
        self._items: dict[str, _AgentItems] = {}

    # ---- BaseStore -----------------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run_blocking(self._client, self._batch(list(ops)), "abatch")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await on_client_loop(self._client, self._batch(list(ops)))

    # ---- the operations --------------------------------------------------------------------------------------------

    def _locate(self, namespace: tuple[str, ...], field: str = "namespace") -> tuple[_AgentItems, tuple[str, ...]]:
        for label in namespace:
            if not isinstance(label, str) or not label or "." in label:
                raise ValidationError(field, f"{label!r} is not a namespace label: a non-empty string without '.'")
        if self._agent_id is not None:
            agent_id, path = self._agent_id, tuple(namespace)
        elif not namespace:
            raise ValidationError(field, "name the agent: the first label of a namespace is the agent's id")
        else:
            agent_id, path = namespace[0], tuple(namespace[1:])
        agent = self._agents.get(agent_id, field)
        items = self._items.get(agent_id)
        if items is None:
            items = self._items[agent_id] = _AgentItems(agent, missing_ok=self._agents.role is not None)
        return items, path

    def _namespace(self, agent: AgentClient, path: tuple[str, ...]) -> tuple[str, ...]:
        return path if self._agent_id is not None else (agent.agent_id, *path)

    def _item(self, agent: AgentClient, current: _Current, score: float | None = None, *, ranked: bool = False) -> Item:
        namespace = self._namespace(agent, current.path)
        fields: dict[str, Any] = {
            "value": _decode_value(current.entry),
            "key": current.key,
            "namespace": namespace,
            "created_at": _time(current.created),
            "updated_at": _time(current.entry.timestamp),
        }
        if ranked:
            return SearchItem(score=score, **fields)
        return Item(**fields)

    async def _batch(self, ops: list[Op]) -> list[Result]:
        results: list[Result] = []
        index = 0
        while index < len(ops):
            op = ops[index]
            if isinstance(op, PutOp) and op.value is not None:
                # Consecutive puts to one agent go as one batch of entries.
                items, _ = self._locate(op.namespace)
                run = [op]
                while index + len(run) < len(ops):
                    following = ops[index + len(run)]
                    if not (isinstance(following, PutOp) and following.value is not None):
                        break
                    if self._locate(following.namespace)[0] is not items:
                        break
                    run.append(following)
                await self._put(items, run)
                results.extend([None] * len(run))
                index += len(run)
                continue
            if isinstance(op, PutOp):
                await self._delete(op)
                results.append(None)
            elif isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            else:
                raise ValidationError("op", f"unknown store operation {type(op).__name__}")
            index += 1
        return results

    def _entry(self, op: PutOp) -> RecordEntryRequest:
        assert op.value is not None
        _, path = self._locate(op.namespace)
        key = str(op.key)
        if not key:
            raise ValidationError("key", "a key is a non-empty string")
        correlation_id = _correlation_id(path, key)
        if len(correlation_id) > MAX_CORRELATION_CHARS:
            raise ValidationError(
                "key",
                f"the namespace and key take {len(correlation_id)} characters as the item's correlation id; "
                f"at most {MAX_CORRELATION_CHARS}",
            )
        content, form_tag = _encode_value(op.value)
        tags = [STORE_TAG, *(_prefix_tag(path[: depth + 1]) for depth in range(len(path))), form_tag]
        if op.index is False:
            tags.append(NOT_INDEXED_TAG)
        if len(tags) > MAX_TAGS:
            raise ValidationError("namespace", f"a namespace is at most {MAX_TAGS - 3} labels deep in an agent")
        return {"content": content, "origin": self._origin, "tags": tags, "correlationId": correlation_id}

    async def _put(self, items: _AgentItems, ops: list[PutOp]) -> None:
        entries = [self._entry(op) for op in ops]
        await self._agents.ensure_registered(items.agent)
        if len(entries) == 1:
            await items.agent.record(
                origin=entries[0]["origin"],
                content=entries[0]["content"],
                tags=entries[0].get("tags"),
                correlation_id=entries[0].get("correlationId"),
            )
            return
        reply = await items.agent.record_many(entries)
        for result in reply["results"]:
            if result["ok"] is False:
                raise result["error"]

    async def _delete(self, op: PutOp) -> None:
        items, path = self._locate(op.namespace)
        current = (await items.current()).get((path, str(op.key)))
        if current is None:
            return
        namespace = "/".join(self._namespace(items.agent, path))
        await items.agent.record(
            origin="SYSTEM",
            content=f"Deleted the stored item {current.key!r} of {namespace or 'the root namespace'}.",
            tags=[STORE_TAG, DELETED_TAG],
            correlation_id=current.entry.correlation_id,
        )

    async def _get(self, op: GetOp) -> Item | None:
        items, path = self._locate(op.namespace)
        current = (await items.current()).get((path, str(op.key)))
        return None if current is None else self._item(items.agent, current)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        items, prefix = self._locate(op.namespace_prefix, "namespace_prefix")
        limit, offset = max(0, op.limit), max(0, op.offset)
        if limit == 0:
            return []
        current = await items.current()

        def wanted(item: _Current) -> bool:
            return item.path[: len(prefix)] == prefix and (
                not op.filter or all(_matches(_decode_value(item.entry).get(k), c) for k, c in op.filter.items())
            )

        if not op.query:
            found = sorted((i for i in current.values() if wanted(i)), key=lambda i: i.entry.seq, reverse=True)
            return [
                self._item_ranked(items.agent, item, None) for item in found[offset : offset + limit]
            ]
        by_entry = {item.entry.entry_id: item for item in current.values()}
        reply = await items.agent.query(
            op.query,
            limit=min(MAX_QUERY_LIMIT, (offset + limit) * QUERY_OVERFETCH),
            filter={"tags": [_prefix_tag(prefix)]},
        )
        ranked: list[SearchItem] = []
        seen: set[str] = set()
        for hit in reply["results"]:
            item = by_entry.get(hit["entryId"])
            if item is None or hit["entryId"] in seen or NOT_INDEXED_TAG in item.entry.tags or not wanted(item):
                continue
            seen.add(hit["entryId"])
            score = hit["relevance"]
            ranked.append(self._item_ranked(items.agent, item, score if math.isfinite(score) else None))
        return ranked[offset : offset + limit]

    def _item_ranked(self, agent: AgentClient, current: _Current, score: float | None) -> SearchItem:
        item = self._item(agent, current, score, ranked=True)
        assert isinstance(item, SearchItem)
        return item

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        if self._agent_id is not None:
            agent_ids = [self._agent_id]
        else:
            agent_ids = sorted(
                {c.path[0] for c in conditions if c.match_type == "prefix" and c.path and c.path[0] != "*"}
            )
            if len(agent_ids) != 1:
                raise ValidationError(
                    "match_conditions",
                    "name the agent: list namespaces under a prefix whose first label is the agent's id",
                )
        items, _ = self._locate((agent_ids[0],) if self._agent_id is None else ())
        current = await items.current()
        namespaces = {self._namespace(items.agent, item.path) for item in current.values()}
        matching = [ns for ns in namespaces if all(_namespace_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            matching = list({ns[: op.max_depth] for ns in matching})
        return sorted(matching)[op.offset : op.offset + op.limit]

