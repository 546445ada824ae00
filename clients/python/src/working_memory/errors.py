"""Typed errors of the API, one class per ``_tag`` of ``contracts/errors.ts``.

A refusal arrives as ``{"ok": false, "error": {"_tag": ..., "message": ..., <fields>}}``
and is raised as the class of its tag, carrying its fields as attributes.
A tag this client does not know yet is raised as :class:`ApiError` itself.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, TypedDict


class FieldIssue(TypedDict):
    field: str
    reason: str


class WorkingMemoryError(Exception):
    """Base of every error this client raises."""


class ApiError(WorkingMemoryError):
    """A typed refusal from the service. Nothing was written."""

    tag: ClassVar[str] = ""

    def __init__(self, message: str, payload: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: The error as it came on the wire (``_tag``, ``message`` and the fields).
        self.payload: dict[str, Any] = dict(payload or {})

    @property
    def error_tag(self) -> str:
        """The `_tag` of the error (also for tags this client does not know)."""
        return self.tag or str(self.payload.get("_tag", ""))


class ValidationError(ApiError):
    """The request is malformed. ``field`` names the first offending field; ``issues`` lists all of them."""

    tag = "ValidationError"

    def __init__(self, field: str, reason: str, issues: list[FieldIssue] | None = None, message: str | None = None) -> None:
        self.field = field
        self.reason = reason
        self.issues: list[FieldIssue] = issues if issues is not None else [{"field": field, "reason": reason}]
        text = message or "; ".join(f"{i['field']}: {i['reason']}" for i in self.issues)
        super().__init__(text, {"_tag": self.tag, "field": field, "reason": reason, "issues": self.issues, "message": text})


class AgentNotFound(ApiError):
    tag = "AgentNotFound"

    def __init__(self, agent_id: str, message: str | None = None) -> None:
        self.agent_id = agent_id
        text = message or f"agent '{agent_id}' is not registered"
        super().__init__(text, {"_tag": self.tag, "agentId": agent_id, "message": text})


class AgentAlreadyRegistered(ApiError):
    tag = "AgentAlreadyRegistered"

    def __init__(self, agent_id: str, message: str | None = None) -> None:
        self.agent_id = agent_id
        text = message or f"agent '{agent_id}' is already registered"
        super().__init__(text, {"_tag": self.tag, "agentId": agent_id, "message": text})


class InvalidState(ApiError):
    """The request is well formed but the agent's state does not allow it (no open step, not in hyperfocus...)."""

    tag = "InvalidState"

    def __init__(self, field: str, reason: str, message: str | None = None) -> None:
        self.field = field
        self.reason = reason
        text = message or f"{field}: {reason}"
        super().__init__(text, {"_tag": self.tag, "field": field, "reason": reason, "message": text})


class UnknownEntries(ApiError):
    tag = "UnknownEntries"

    def __init__(self, entry_ids: list[str], message: str | None = None) -> None:
        self.entry_ids = entry_ids
        text = message or f"unknown entries: {', '.join(entry_ids)}"
        super().__init__(text, {"_tag": self.tag, "entryIds": entry_ids, "message": text})


class IdempotencyConflict(ApiError):
    """The request id was already used for a different request. Nothing was written; the first request stands."""

    tag = "IdempotencyConflict"

    def __init__(self, field: str, reason: str, message: str | None = None) -> None:
        self.field = field
        self.reason = reason
        text = message or f"{field}: {reason}"
        super().__init__(text, {"_tag": self.tag, "field": field, "reason": reason, "message": text})


class NotCaughtUp(ApiError):
    """A read asked to see writes up to ``after_seq``, and the projection did not get there in time."""

    tag = "NotCaughtUp"

    def __init__(self, after_seq: int, applied_seq: int, message: str | None = None) -> None:
        self.after_seq = after_seq
        self.applied_seq = applied_seq
        text = message or f"the view has applied events up to {applied_seq}, not yet {after_seq}"
        super().__init__(text, {"_tag": self.tag, "afterSeq": after_seq, "appliedSeq": applied_seq, "message": text})


class Unavailable(ApiError):
    """The event log could not take the write; nothing was stored. Retried with the same request id."""

    tag = "Unavailable"

    def __init__(self, reason: str, message: str | None = None) -> None:
        self.reason = reason
        text = message or f"unavailable: {reason}"
        super().__init__(text, {"_tag": self.tag, "reason": reason, "message": text})


class StorageFull(ApiError):
    """The event log reached a storage limit; nothing was stored, and a retry cannot succeed until space is freed."""

    tag = "StorageFull"

    def __init__(self, limit: str, message: str | None = None) -> None:
        self.limit = limit
        text = message or f"storage full: {limit}; nothing was stored"
        super().__init__(text, {"_tag": self.tag, "limit": limit, "message": text})


class BatchTooLarge(ApiError):
    """A batch holds more entries than the gateway takes at once (``limit``); nothing of it was stored."""

    tag = "BatchTooLarge"

    def __init__(self, field: str, size: int, limit: int, message: str | None = None) -> None:
        self.field = field
        self.size = size
        self.limit = limit
        text = message or f"{field}: {size} entries; a batch takes at most {limit}; nothing was stored"
        super().__init__(text, {"_tag": self.tag, "field": field, "size": size, "limit": limit, "message": text})


class Overloaded(ApiError):
    """Background work of the agent's partition is behind the log: ``projection`` is ``lag`` events behind, above
    ``limit``. Nothing was stored. The client sends the same request again after ``retry_after_ms`` (a bounded
    number of times) before raising this."""

    tag = "Overloaded"

    def __init__(
        self, projection: str, partition: int, lag: int, limit: int, retry_after_ms: int, message: str | None = None
    ) -> None:
        self.projection = projection
        self.partition = partition
        self.lag = lag
        self.limit = limit
        self.retry_after_ms = retry_after_ms
        text = message or (
            f"overloaded: the {projection} projection of partition {partition} is {lag} events behind "
            f"(the limit is {limit}); nothing was stored; retry after {retry_after_ms} ms"
        )
        super().__init__(
            text,
            {
                "_tag": self.tag,
                "projection": projection,
                "partition": partition,
                "lag": lag,
                "limit": limit,
                "retryAfterMs": retry_after_ms,
                "message": text,
            },
        )


class NoResponse(WorkingMemoryError):
    """The service did not answer at all after every attempt (each retried with the same request id)."""

    def __init__(self, message: str, subject: str, attempts: int, last_error: BaseException | None) -> None:
        super().__init__(message)
        self.subject = subject
        self.attempts = attempts
        self.last_error = last_error


#: Every typed error by its ``_tag``.
ERRORS_BY_TAG: dict[str, type[ApiError]] = {
    cls.tag: cls
    for cls in (
        ValidationError,
        AgentNotFound,
        AgentAlreadyRegistered,
        InvalidState,
        UnknownEntries,
        IdempotencyConflict,
        NotCaughtUp,
        Unavailable,
        StorageFull,
        BatchTooLarge,
        Overloaded,
    )
}


def _str(error: Mapping[str, Any], key: str) -> str:
    value = error.get(key)
    return value if isinstance(value, str) else ""


def _int(error: Mapping[str, Any], key: str) -> int:
    value = error.get(key)
    return value if isinstance(value, int) else 0


def decode_error(error: Any) -> ApiError:
    """The typed exception of an ``error`` object from a reply."""
    if not isinstance(error, Mapping):
        return ApiError(f"malformed error in reply: {error!r}", {})
    tag = error.get("_tag")
    message = error.get("message") if isinstance(error.get("message"), str) else None
    decoded: ApiError
    if tag == "ValidationError":
        raw_issues = error.get("issues")
        issues: list[FieldIssue] = [
            {"field": _str(i, "field"), "reason": _str(i, "reason")} for i in raw_issues if isinstance(i, Mapping)
        ] if isinstance(raw_issues, list) else []
        decoded = ValidationError(_str(error, "field"), _str(error, "reason"), issues or None, message)
    elif tag == "AgentNotFound":
        decoded = AgentNotFound(_str(error, "agentId"), message)
    elif tag == "AgentAlreadyRegistered":
        decoded = AgentAlreadyRegistered(_str(error, "agentId"), message)
    elif tag == "InvalidState":
        decoded = InvalidState(_str(error, "field"), _str(error, "reason"), message)
    elif tag == "UnknownEntries":
        ids = error.get("entryIds")
        decoded = UnknownEntries([i for i in ids if isinstance(i, str)] if isinstance(ids, list) else [], message)
    elif tag == "IdempotencyConflict":
        decoded = IdempotencyConflict(_str(error, "field"), _str(error, "reason"), message)
    elif tag == "NotCaughtUp":
        decoded = NotCaughtUp(_int(error, "afterSeq"), _int(error, "appliedSeq"), message)
    elif tag == "Unavailable":
        decoded = Unavailable(_str(error, "reason"), message)
    elif tag == "StorageFull":
        decoded = StorageFull(_str(error, "limit"), message)
    elif tag == "Overloaded":
        decoded = Overloaded(
            _str(error, "projection"),
            _int(error, "partition"),
            _int(error, "lag"),
            _int(error, "limit"),
            _int(error, "retryAfterMs"),
            message,
        )
    elif tag == "BatchTooLarge":
        decoded = BatchTooLarge(_str(error, "field"), _int(error, "size"), _int(error, "limit"), message)
    else:
        return ApiError(message or f"{tag}: {dict(error)!r}", error)
    decoded.payload = dict(error)
    return decoded


class NotConnected(WorkingMemoryError):
    """No NATS server answered at any of the given URLs, or the client's connection is closed."""
