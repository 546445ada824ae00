"""The client's operations, request and reply shapes and errors agree with contracts/json/api.schema.json."""

from __future__ import annotations

import json
from typing import Any, get_type_hints

import pytest

from conftest import REPO_ROOT
from working_memory import ERRORS_BY_TAG, OPERATIONS, types
from working_memory.errors import decode_error

SCHEMA = json.loads((REPO_ROOT / "contracts" / "json" / "api.schema.json").read_text())
OPERATION_SCHEMAS: dict[str, Any] = SCHEMA["operations"]

REQUEST_TYPES = {
    "registerAgent": types.RegisterAgentRequest,
    "retuneBudget": types.RetuneBudgetRequest,
    "enterHyperfocus": types.EnterHyperfocusRequest,
    "exitHyperfocus": types.ExitHyperfocusRequest,
    "recordEntry": types.RecordEntryRequest,
    "recordMany": types.RecordManyRequest,
    "beginStep": types.BeginStepRequest,
    "setFocus": types.SetFocusRequest,
    "referenceEntries": types.ReferenceEntriesRequest,
    "endStep": types.EndStepRequest,
    "buildContext": types.BuildContextRequest,
    "getView": types.GetViewRequest,
    "readEvents": types.ReadEventsRequest,
    "getRaw": types.SubstrateGetRequest,
    "query": types.QueryRequest,
    "thread": types.ThreadRequest,
    "recall": types.RecallRequest,
    "warmUp": types.WarmUpRequest,
}
RESPONSE_TYPES = {
    "registerAgent": types.RegisterAgentResponse,
    "retuneBudget": types.BudgetResponse,
    "enterHyperfocus": types.BudgetResponse,
    "exitHyperfocus": types.BudgetResponse,
    "recordEntry": types.RecordEntryResponse,
    "recordMany": types.RecordManyResponse,
    "beginStep": types.StepResponse,
    "setFocus": types.FocusResponse,
    "referenceEntries": types.ReferenceResponse,
    "endStep": types.StepResponse,
    "buildContext": types.BuiltContext,
    "getView": types.ViewResponse,
    "readEvents": types.ReadEventsResponse,
    "getRaw": types.SubstrateRecord,
    "query": types.QueryResponse,
    "thread": types.ThreadResponse,
    "recall": types.RecallResponse,
    "warmUp": types.WarmUpResponse,
}


def reply_value(operation: dict[str, Any]) -> dict[str, Any]:
    return next(v["properties"]["value"] for v in operation["reply"]["anyOf"] if v["properties"]["ok"]["enum"] == [True])


def error_schemas() -> dict[str, dict[str, Any]]:
    defs: dict[str, dict[str, Any]] = {}
    for operation in OPERATION_SCHEMAS.values():
        for name, schema in operation["reply"].get("$defs", {}).items():
            if name.endswith("Encoded"):
                defs[schema["properties"]["_tag"]["enum"][0]] = schema
    return defs


def test_every_operation_of_the_api_is_in_the_client_on_its_subject() -> None:
    for name, operation in OPERATION_SCHEMAS.items():
        assert name in OPERATIONS, f"the client lacks {name}"
        assert operation["subject"] == f"wm.api.<agentId>.{OPERATIONS[name]}"  # type: ignore[index]


@pytest.mark.parametrize("name", sorted(OPERATION_SCHEMAS))
def test_request_and_reply_types_have_the_schemas_keys(name: str) -> None:
    operation = OPERATION_SCHEMAS[name]
    request_type = REQUEST_TYPES[name]
    request = operation["request"]
    assert set(get_type_hints(request_type)) == set(request["properties"])
    assert request_type.__required_keys__ == set(request.get("required", []))
    value = reply_value(operation)
    response_type = RESPONSE_TYPES[name]
    assert set(get_type_hints(response_type)) == set(value["properties"])
    assert response_type.__required_keys__ == set(value.get("required", []))


def test_every_error_of_the_api_has_its_class_with_its_fields() -> None:
    schemas = error_schemas()
    assert schemas, "no error schemas found"
    for tag, schema in schemas.items():
        assert tag in ERRORS_BY_TAG, f"the client lacks {tag}"
        wire = {key: example(prop) for key, prop in schema["properties"].items()}
        wire["_tag"] = tag
        decoded = decode_error(wire)
        assert type(decoded) is ERRORS_BY_TAG[tag]
        for key in schema["required"]:
            if key != "_tag":
                assert getattr(decoded, snake(key)) == wire[key], f"{tag}.{key}"


def example(prop: dict[str, Any]) -> Any:
    kind = prop.get("type")
    if kind == "integer":
        return 7
    if kind == "array":
        return [{"field": "f", "reason": "r"}] if prop["items"].get("type") == "object" else ["a", "b"]
    return "text"


def snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def test_an_unknown_error_tag_is_still_an_api_error() -> None:
    error = decode_error({"_tag": "SomethingNew", "message": "new refusal", "detail": 1})
    assert error.error_tag == "SomethingNew"
    assert str(error) == "new refusal"
    assert error.payload["detail"] == 1
