"""OpenAI strict-mode tool definitions: the subset strict mode accepts, and the way back.

Invariant (hypothesis): for every schema and every value it accepts, the value a strict
model writes for it (every optional field present, null when left out) is accepted by the
strict schema, and ``from_strict_arguments`` turns it back into the value itself.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.cli import main
from callgate_rules.integrations.formats import (
    from_strict_arguments,
    openai_strict_schema,
    tool_definitions,
)
from tests.frameworks.conftest import REPO

NAMES = st.sampled_from(["a", "b", "c", "d", "ticketId", "note", "x-y"])


def _leaf() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    return st.one_of(
        st.just(({"type": "string", "maxLength": 5}, "abc")),
        st.just(({"type": "string", "format": "email"}, "a@b.example")),
        st.just(({"type": "string", "format": "uri-reference"}, "/x")),
        st.just(({"type": "integer", "minimum": 0, "default": 3}, 7)),
        st.just(({"enum": ["low", "high"]}, "high")),
        st.just(({"type": ["string", "null"]}, None)),  # accepts null: kept as null
        st.just(({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                 ["p", "q"])),
    )


def _objects(children: st.SearchStrategy[tuple[dict[str, Any], Any]]
             ) -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    @st.composite
    def build(draw: Any) -> tuple[dict[str, Any], Any]:
        names = draw(st.lists(NAMES, unique=True, max_size=4))
        schema: dict[str, Any] = {"type": "object", "properties": {},
                                  "additionalProperties": False}
        value: dict[str, Any] = {}
        required = []
        for name in names:
            child, example = draw(children)
            schema["properties"][name] = child
            if draw(st.booleans()):
                required.append(name)
                value[name] = example
            elif draw(st.booleans()):
                value[name] = example
        if required:
            schema["required"] = required
        if draw(st.booleans()):  # an array of such objects
            return {"type": "array", "items": schema}, [value]
        return schema, value
    return build()


SCHEMAS = st.recursive(_leaf(), _objects, max_leaves=8)


def _as_strict_model_writes(schema: dict[str, Any], value: Any) -> Any:
    """The value with every optional field a strict model must write: null when absent."""
    if schema.get("type") == "array" and isinstance(value, list) and "properties" in \
            schema.get("items", {}):
        return [_as_strict_model_writes(schema["items"], each) for each in value]
    if not isinstance(value, dict) or "properties" not in schema:
        return value
    return {name: _as_strict_model_writes(child, value[name]) if name in value else None
            for name, child in schema["properties"].items()}


def _nullable_fields_as_null(schema: dict[str, Any], value: Any) -> Any:
    if schema.get("type") == "array" and isinstance(value, list) and "properties" in \
            schema.get("items", {}):
        return [_nullable_fields_as_null(schema["items"], each) for each in value]
    if not isinstance(value, dict) or "properties" not in schema:
        return value
    kept = {name: _nullable_fields_as_null(schema["properties"][name], each)
            for name, each in value.items()}
    for name, child in schema["properties"].items():
        if name not in value and child.get("type") == ["string", "null"]:
            kept[name] = None
    return kept


@settings(max_examples=300, deadline=None)
@given(SCHEMAS.filter(lambda pair: pair[0].get("type") in ("object", "array")))
def test_a_strict_call_means_what_the_full_schema_means(pair: tuple[dict[str, Any], Any]) -> None:
    schema, value = pair
    jsonschema.validate(value, schema)
    original = copy.deepcopy(schema)
    strict = openai_strict_schema(schema)
    assert schema == original  # a copy: the gate's schema is never touched
    written = _as_strict_model_writes(schema, value)
    jsonschema.validate(written, strict)
    back = from_strict_arguments(schema, written)
    jsonschema.validate(back, schema)
    # the one thing strict mode cannot say: an optional field that may itself be null and
    # was left out comes back as null (both mean "no value" to the full schema)
    assert back == _nullable_fields_as_null(schema, value)


def test_every_object_is_closed_and_fully_required() -> None:
    schema = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "minLength": 2, "description": "an ID"},
        "b": {"type": "object", "properties": {"c": {"enum": [1, 2]}}},
        "d": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
    strict = openai_strict_schema(schema)
    assert strict["required"] == ["a", "b", "d"] and strict["additionalProperties"] is False
    assert strict["properties"]["a"] == {"type": "string", "description": "an ID (minLength=2)"}
    nested = strict["properties"]["b"]
    assert nested["anyOf"][1] == {"type": "null"}
    assert nested["anyOf"][0]["required"] == ["c"]
    assert nested["anyOf"][0]["properties"]["c"] == {"anyOf": [{"enum": [1, 2]},
                                                               {"type": "null"}]}
    assert strict["properties"]["d"] == {"anyOf": [{"type": "string"}, {"type": "integer"},
                                                   {"type": "null"}]}


def test_what_is_not_an_object_of_the_schema_is_left_for_the_gate() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    for odd in ("text", 3, None, [1], {"a": None, "z": None}):
        expected = {"z": None} if odd == {"a": None, "z": None} else odd
        assert from_strict_arguments(schema, odd) == expected


def test_the_reference_tools_pass_the_frameworks_strict_checks() -> None:
    from tests.frameworks.conftest import needs
    needs("pydantic_ai", "pydantic-ai")
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

    from callgate_rules import load
    config = load([REPO / "contracts", REPO / "policies"])
    incompatible_before = 0
    for contract in config.contracts.values():
        before = OpenAIJsonSchemaTransformer(copy.deepcopy(dict(contract.arguments_schema)),
                                             strict=None)
        before.walk()
        incompatible_before += not before.is_strict_compatible
        after = OpenAIJsonSchemaTransformer(openai_strict_schema(contract.arguments_schema),
                                            strict=None)
        after.walk()
        assert after.is_strict_compatible, contract.name
    assert incompatible_before == 5  # what the issue measured: 5 of the 7 reference tools


def test_the_agents_sdk_strict_converter_leaves_the_export_as_it_is() -> None:
    from tests.frameworks.conftest import needs
    needs("agents", "openai-agents")
    from agents.strict_schema import ensure_strict_json_schema

    from callgate_rules import load
    config = load([REPO / "contracts", REPO / "policies"])
    for contract in config.contracts.values():
        strict = openai_strict_schema(contract.arguments_schema)
        assert ensure_strict_json_schema(copy.deepcopy(strict)) == strict, contract.name


def test_callgate_export_openai_strict() -> None:
    result = CliRunner().invoke(main, ["export", "--format", "openai-strict",
                                       str(REPO / "contracts")])
    assert result.exit_code == 0, result.output
    tools = json.loads(result.stdout)
    from callgate_rules import load
    assert tools == tool_definitions(load([REPO / "contracts"]), "openai-strict")
    assert {tool["function"]["strict"] for tool in tools} == {True}
    result = CliRunner().invoke(main, ["export", "--format", "openai-responses-strict",
                                       str(REPO / "contracts")])
    assert {tool["strict"] for tool in json.loads(result.stdout)} == {True}
