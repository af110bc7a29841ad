"""The taxonomy is one table per vocabulary, and the JSON Schemas speak it exactly.

Each error class and each route is one row in ``taxonomy``; the shipped schemas define each
closed vocabulary once, in ``common.json``, and refer to it. These tests name what is
missing when a member is added in one place and not the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.authoring.lint import lint
from callgate_rules.documents.compiler import KINDS, build_routing, document_schema
from callgate_rules.documents.model import Mode, OnError
from callgate_rules.taxonomy import (
    DEFAULT_ROUTE,
    ERROR_CLASSES,
    FAILURES,
    NOT_FOUND_USER_MESSAGE,
    ROUTES,
    TERMINAL_ROUTES,
    ErrorClass,
    Route,
)

SCHEMAS = resources.files("callgate_rules.documents").joinpath("schemas")
COMMON = "common.json#/$defs/"


def shipped(name: str) -> Any:
    return json.loads(SCHEMAS.joinpath(f"{name}.json").read_text("utf-8"))


def nodes(schema: Any) -> Iterator[Any]:
    """Every mapping inside ``schema``, itself included."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from nodes(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from nodes(item)


def values(members: type[StrEnum]) -> list[str]:
    return [member.value for member in members]


# The Python tables -------------------------------------------------------------------------------


def test_every_error_class_has_one_complete_row() -> None:
    assert list(ERROR_CLASSES) == list(ErrorClass)
    for error_class, row in ERROR_CLASSES.items():
        assert isinstance(row.default_route, Route), error_class
        assert row.agent_text.strip() and row.user_text.strip(), error_class
        assert isinstance(row.is_failure, bool), error_class


def test_every_route_has_one_complete_row() -> None:
    assert list(ROUTES) == list(Route)
    for route, row in ROUTES.items():
        assert isinstance(row.advice, str) and isinstance(row.terminal, bool), route
    # Advice is left out only where the call went through: the model has nothing to change.
    assert {route for route, row in ROUTES.items() if not row.advice} == {
        Route.EXECUTE, Route.RETURN_RESULT}


def test_the_derived_views_are_the_tables() -> None:
    assert DEFAULT_ROUTE == {c: row.default_route for c, row in ERROR_CLASSES.items()}
    assert FAILURES == frozenset(ErrorClass) - {
        ErrorClass.CONFIRMATION_REQUIRED, ErrorClass.DUPLICATE, ErrorClass.ANSWER_TOO_LARGE}
    assert TERMINAL_ROUTES == {
        Route.RETURN_RESULT, Route.RETURN_RECEIPT, Route.REFUSE, Route.REVIEW, Route.CLARIFY,
        Route.REPLAN, Route.AWAIT_CONFIRMATION}
    assert NOT_FOUND_USER_MESSAGE == ERROR_CLASSES[ErrorClass.NOT_FOUND].user_text


def test_the_tables_are_read_only() -> None:
    with pytest.raises(TypeError):
        ERROR_CLASSES[ErrorClass.MALFORMED] = ERROR_CLASSES[ErrorClass.AMBIGUOUS]  # type: ignore[index]
    with pytest.raises(TypeError):
        DEFAULT_ROUTE[ErrorClass.MALFORMED] = Route.EXECUTE  # type: ignore[index]


def test_a_gate_without_a_routing_table_routes_by_the_taxonomy() -> None:
    assert build_routing({}, None).routes == DEFAULT_ROUTE


# The JSON Schemas --------------------------------------------------------------------------------

VOCABULARIES: dict[str, type[StrEnum]] = {
    "error_class": ErrorClass, "route": Route, "mode": Mode, "on_error": OnError}


@pytest.mark.parametrize("name", list(VOCABULARIES))
def test_the_shared_definition_lists_every_member_and_nothing_else(name: str) -> None:
    assert shipped("common")["$defs"][name]["enum"] == values(VOCABULARIES[name])


def vocabulary_of(enum: list[Any]) -> type[StrEnum] | None:
    """The vocabulary an enum speaks: one it shares more than a word with (``ambiguous`` of a
    look-up's ``many`` and ``refuse`` of a limit path are words of their own)."""
    for members in VOCABULARIES.values():
        if len(set(enum) & set(values(members))) > 1:
            return members
    return None


@pytest.mark.parametrize("kind", KINDS)
def test_no_document_schema_keeps_a_copy_of_a_vocabulary(kind: str) -> None:
    for node in nodes(shipped(kind)):
        assert vocabulary_of(node.get("enum", [])) is None, (kind, node)


def test_each_vocabulary_is_referred_to_where_the_documents_use_it() -> None:
    contract_rule = shipped("ToolContract")["properties"]["spec"]["properties"]["rules"]
    rule = contract_rule["items"]["properties"]
    assert rule["error_class"] == {"$ref": f"{COMMON}error_class"}
    assert rule["route"]["$ref"] == f"{COMMON}route"
    assert rule["mode"] == {"$ref": f"{COMMON}mode"}
    assert rule["on_error"] == {"$ref": f"{COMMON}on_error"}
    routes = shipped("RoutingTable")["properties"]["spec"]["properties"]["routes"]
    assert all(value == {"$ref": f"{COMMON}route"} for value in routes["properties"].values())


def test_the_routing_table_has_a_route_and_messages_for_each_error_class() -> None:
    spec = shipped("RoutingTable")["properties"]["spec"]["properties"]
    assert list(spec["routes"]["properties"]) == values(ErrorClass)
    assert list(spec["messages"]["properties"]) == values(ErrorClass)


@pytest.mark.parametrize("kind", KINDS)
def test_the_loaded_schema_has_every_reference_resolved(kind: str) -> None:
    """Offline, from the shipped files; nothing left to resolve at validation time."""
    loaded = document_schema(kind).schema
    assert not any("$ref" in node or "$defs" in node for node in nodes(loaded))
    spoken = [(node["enum"], members) for node in nodes(loaded)
              if "enum" in node and (members := vocabulary_of(node["enum"])) is not None]
    assert spoken or kind == "Definitions"  # names and CEL only: no closed vocabulary
    for enum, members in spoken:
        assert enum == values(members)


def test_a_routing_table_route_is_checked_against_the_shared_enum() -> None:
    loaded: Any = document_schema("RoutingTable").schema
    routes = loaded["properties"]["spec"]["properties"]["routes"]
    for error_class in ErrorClass:
        assert routes["properties"][error_class.value]["enum"] == values(Route)


# What an author sees -----------------------------------------------------------------------------

ROUTING = """\
apiVersion: callgate/v1
kind: RoutingTable
metadata: {name: routing, version: "1", owner: t@example.com, description: routes}
spec:
  routes:
    malformed: regenerate
    not_found: replan_later
"""


def test_a_wrong_route_in_yaml_names_file_line_and_the_allowed_routes(tmp_path: Path) -> None:
    path = tmp_path / "routing.yaml"
    path.write_text(ROUTING, encoding="utf-8")
    [finding] = lint([path])
    assert (finding.location.path, finding.location.line) == (str(path), 7)
    assert finding.code == "schema"
    assert finding.message == (
        "spec.routes.not_found: 'replan_later' is not allowed; use one of: "
        + ", ".join(values(Route)))
    assert str(finding).startswith(f"{path}:7:")
