"""The compiled schema check gives jsonschema's verdicts, differentially.

The jsonschema meant is the gate's: ``GateValidator``, Draft 2020-12 whose patterns have
RE2's meaning (``$`` only at the very end, ASCII ``\\d``) and run in linear time.

``schemacheck`` answers "valid or not" on the hot path and ``jsonschema`` explains a failure,
so the two must never disagree: on the reference contracts' argument schemas, the actor and
session schemas and the document schemas, and on generated schemas and instances.

Where jsonschema raises instead of answering (``multipleOf`` 0.5 of an infinite number), the
gate must still raise the same: either the compiled check raises it, or it says "invalid"
and jsonschema, asked for the error, raises it (``validate.arguments`` reads every error).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator

from callgate_rules.documents.compiler import FORMAT_CHECKER, closed_objects, document_schema
from callgate_rules.documents.schemacheck import GateValidator, compile_check, validity_check

REPO = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def outcome(check: Callable[[Any], bool], instance: Any) -> object:
    """The verdict, or the type of the exception raised instead."""
    try:
        return bool(check(instance))
    except Exception as error:  # noqa: BLE001 - the exception is the outcome compared
        return type(error)


def every_error_read(validator: Validator) -> Callable[[Any], bool]:
    """jsonschema's verdict as the gate reads it: every error (``best_match``)."""
    return lambda instance: best_match(validator.iter_errors(instance)) is None


def jsonschema_outcome(schema: Any, instance: Any,
                       format_checker: FormatChecker | None = FORMAT_CHECKER) -> object:
    validator = GateValidator(schema, format_checker=format_checker)
    return outcome(every_error_read(validator), instance)


def same(compiled_outcome: object, expected: object) -> bool:
    """The compiled verdict is jsonschema's; where jsonschema raises, the compiled check
    raises the same or says "invalid" (and jsonschema, then asked, raises it)."""
    if isinstance(expected, type):
        return compiled_outcome in (expected, False)
    return compiled_outcome == expected


def compiled(schema: Any, format_checker: FormatChecker | None = FORMAT_CHECKER
             ) -> Callable[[Any], bool]:
    check = compile_check(schema, format_checker)
    assert check is not None, f"not compiled: {schema!r}"
    return check


# The reference schemas -------------------------------------------------------------------------


def reference_argument_schemas() -> dict[str, Any]:
    schemas = {}
    for path in sorted((REPO / "contracts").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text("utf-8")):
            schemas[document["metadata"]["name"]] = closed_objects(document["spec"]["arguments"])
    return schemas


def reference_policy_schemas() -> dict[str, Any]:
    spec = yaml.safe_load((REPO / "policies" / "access.yaml").read_text("utf-8"))["spec"]
    return {"actor": spec["actor"], "session": spec["session"]}


REFERENCE = {**reference_argument_schemas(), **reference_policy_schemas()}
REFERENCE_CHECKS = {
    name: (compile_check(schema, FORMAT_CHECKER),
           every_error_read(GateValidator(schema, format_checker=FORMAT_CHECKER)))
    for name, schema in REFERENCE.items()}


def test_every_reference_schema_is_compiled_not_left_to_jsonschema() -> None:
    for name, schema in REFERENCE.items():
        assert compile_check(schema, FORMAT_CHECKER) is not None, name
    for kind in ("ToolContract", "AccessPolicy", "RoutingTable"):
        assert compile_check(document_schema(kind).schema) is not None, kind


def test_the_examples_of_every_contract_are_valid_and_a_stranger_field_is_not() -> None:
    for path in sorted((REPO / "contracts").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text("utf-8")):
            check = compiled(closed_objects(document["spec"]["arguments"]))
            for example in document["spec"]["examples"]:
                assert check(example["arguments"]) is True
                assert check({**example["arguments"], "stranger": 1}) is False


def values_for(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values aimed at ``schema``: its enum members, strings matching its patterns, dates,
    integral floats, objects with its property names (and names its patterns match), arrays
    of what its items want, and what its subschemas want; any JSON value mixed in, so both
    verdicts and the deep branches come up often."""
    if not isinstance(schema, Mapping) or depth > 3:
        return json_values

    def inner(sub: Any) -> st.SearchStrategy[Any]:
        return st.deferred(lambda: values_for(sub, depth + 1))

    options: list[st.SearchStrategy[Any]] = [json_values]
    members = [*schema.get("enum", []), *([schema["const"]] if "const" in schema else [])]
    if members:
        options.append(st.sampled_from([*members, *look_alikes(members)]))
    bounds = [schema[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                  "multipleOf") if k in schema]
    if bounds:  # on, just off and a multiple of each bound
        options.append(st.sampled_from([b + step for b in bounds for step in (0, 1, -1, 0.5)]
                                       + [b * 3 for b in bounds] + [float(b) for b in bounds]))
    lengths = [schema[k] for k in ("minLength", "maxLength", "minItems", "maxItems",
                                   "minProperties", "maxProperties") if k in schema]
    if lengths:  # exactly at each bound, and one past it
        options.append(st.sampled_from([n + step for n in lengths for step in (0, 1)]).flatmap(
            lambda n: st.sampled_from(["x" * n, "\U0001F600" * n, list(range(n)),
                                       {f"k{i}": i for i in range(n)}])))
    if "pattern" in schema:
        options.append(st.from_regex(schema["pattern"]))
    if schema.get("format") == "date-time":
        options.append(date_times)
    if schema.get("format") == "email":
        options.append(st.emails() | st.text(max_size=5))
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if "string" in kinds or "minLength" in schema or "maxLength" in schema:
        options.append(st.text(max_size=schema.get("maxLength", 3) + 2))
    if {"number", "integer"} & set(kinds) or "minimum" in schema or "multipleOf" in schema:
        options.append(st.integers(-5, 2000) | st.floats(-5, 2000)
                       | st.sampled_from([1.0, 2.0, 3.0, -0.0, 0.5, 1.5]))
    if "array" in kinds or {"items", "prefixItems", "contains"} & set(schema):
        item = st.one_of([inner(schema[k]) for k in ("items", "contains") if k in schema]
                         or [json_values])
        prefix = [inner(sub) for sub in schema.get("prefixItems", [])]
        options.append(st.tuples(*prefix).flatmap(
            lambda head: st.lists(item, max_size=3).map(lambda rest: [*head, *rest])))
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    if "object" in kinds or properties or patterns or "required" in schema:
        required = schema.get("required", [])
        keyed = st.fixed_dictionaries(
            {name: inner(properties.get(name, {})) for name in required},
            optional={**{name: inner(sub) for name, sub in properties.items()
                         if name not in required},
                      "stranger": json_values})
        options.append(keyed)
        for pattern, sub in patterns.items():
            options.append(st.dictionaries(st.from_regex(pattern, fullmatch=False),
                                           inner(sub), max_size=2))
    for keyword in ("allOf", "anyOf", "oneOf"):
        options.extend(inner(sub) for sub in schema.get(keyword, []))
    for keyword in ("not", "if", "then", "else"):
        if keyword in schema:
            options.append(inner(schema[keyword]))
    return st.one_of(options)


def look_alikes(members: list[Any]) -> list[Any]:
    """What equals a member in Python but not in JSON Schema: 1 and true, 0 and false."""
    found: list[Any] = []
    for member in members:
        if isinstance(member, bool):
            found += [int(member), float(member)]
        elif isinstance(member, int | float) and member in (0, 1):
            found.append(bool(member))
        elif isinstance(member, list):
            found.append([look_alikes([m])[0] if look_alikes([m]) else m for m in member])
    return found


@pytest.mark.parametrize("name", sorted(REFERENCE))
@settings(SETTINGS, max_examples=100)
@given(data=st.data())
def test_reference_schemas_give_jsonschemas_verdicts(name: str, data: st.DataObject) -> None:
    check, reference = REFERENCE_CHECKS[name]
    assert check is not None
    instance = data.draw(values_for(REFERENCE[name]))
    assert same(outcome(check, instance), outcome(reference, instance))


# Subtleties, one by one ---------------------------------------------------------------------------

SUBTLE_CASES: list[tuple[Any, list[Any]]] = [
    ({"type": "integer"}, [1, 1.0, 1.5, True, False, -0.0, 2**70, float("inf"), "1", None]),
    ({"type": "number"}, [1, 1.5, True, float("nan"), float("inf"), "1.5", None]),
    ({"type": "boolean"}, [True, 0, 1, None]),
    ({"type": ["string", "null"]}, ["", None, 0]),
    ({"enum": [1, "a", None]}, [1, 1.0, True, "a", None, False]),
    ({"enum": [True]}, [True, 1, 1.0]),
    ({"enum": [[1, 2], {"a": 1}]}, [[1, 2], [1.0, 2.0], [True, 2], {"a": 1}, {"a": True}]),
    ({"const": 0}, [0, 0.0, False, -0.0]),
    ({"const": "x"}, ["x", "X", ["x"]]),
    ({"minLength": 2, "maxLength": 2}, ["ab", "\U0001F600\U0001F600", "\U0001F600", "é", 12]),
    ({"pattern": "b"}, ["abc", "ABC", 5]),  # search, not match
    ({"pattern": "^T-[0-9]{3,8}$"}, ["T-123", "T-12", "xT-123", "T-123\n", "T-١٢٣"]),
    ({"format": "date-time"}, ["2026-12-15T09:00:00Z", "2026-12-15t09:00:00z",
                               "2026-12-15T09:00:00+01:00", "2026-02-30T09:00:00Z",
                               "2026-12-15 09:00:00Z", "2026-12-15T09:00:00Z\n", 5]),
    ({"format": "email"}, ["a@b", "ab", 5]),
    ({"format": "no-such-format"}, ["anything"]),
    ({"minimum": 1, "exclusiveMaximum": 3}, [1, 0.999, 2.999, 3, True, "2"]),
    ({"multipleOf": 0.1}, [0.3, 0.35, 3, 1e308, True]),
    ({"multipleOf": 3}, [9, 9.0, 10, 1e308, float("inf")]),
    ({"properties": {"a": {"type": "string"}}, "patternProperties": {"^x": {"type": "integer"}},
      "additionalProperties": False}, [{"a": "s"}, {"xy": 1}, {"xy": "s"}, {"b": 1}, []]),
    ({"patternProperties": {"(a)": True, "b": True}, "additionalProperties": False},
     [{"a": 1}, {"b": 1}, {"c": 1}]),
    ({"additionalProperties": {"type": "integer"}}, [{"a": 1}, {"a": "1"}, {}]),
    # no other property: counted as the declared ones there, required or not, checked or not
    ({"required": ["a"], "properties": {"a": {}, "b": True, "c": {"type": "string"}},
      "additionalProperties": False},
     [{"a": 1}, {"a": 1, "b": None, "c": "s"}, {"a": 1, "d": 1}, {"b": 1}, {"a": 1, "c": 5}]),
    ({"required": ["a", "z"], "properties": {"a": {}}, "additionalProperties": False},
     [{"a": 1, "z": 1}, {"a": 1}, {"z": 1}]),
    ({"enum": ["a", "b"], "type": ["string", "null"], "minLength": 1}, ["a", "c", None, 1]),
    ({"required": ["a"], "properties": {"a": False}}, [{"a": 1}, {}, {"b": 1}]),
    ({"prefixItems": [{"type": "string"}], "items": False}, [["a"], ["a", "b"], [], [1]]),
    ({"items": {"type": "integer"}, "minItems": 1, "maxItems": 2}, [[1], [1, 2, 3], [], [1.0]]),
    ({"contains": {"type": "string"}, "minContains": 2, "maxContains": 3},
     [["a", "b"], ["a"], ["a", "b", "c", "d"], [], "ab"]),
    ({"contains": {"type": "string"}, "minContains": 0}, [[], [1]]),
    ({"propertyNames": {"maxLength": 2}, "minProperties": 1}, [{"ab": 1}, {"abc": 1}, {}]),
    ({"dependentRequired": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 2}, {"b": 2}]),
    ({"dependentSchemas": {"a": {"required": ["c"]}}}, [{"a": 1}, {"a": 1, "c": 1}, {}]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 3, 2.5, "x"]),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}], "not": {"const": 3}},
     [1, "a", 3, 3.0, None]),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}},
     ["ab", "a", 1, 1.5]),
    ({"then": {"type": "string"}, "minContains": 5}, [1]),  # then without if: ignored
    ({"type": "object", "properties": {"note": {}}, "title": "x", "$comment": "y"},
     [{"note": None}, {}, []]),
    (True, [1, None]),
    (False, [1, None]),
]


@pytest.mark.parametrize(("schema", "instances"), SUBTLE_CASES)
def test_subtleties_are_jsonschemas(schema: Any, instances: list[Any]) -> None:
    check = compiled(schema)
    for instance in instances:
        assert same(outcome(check, instance), jsonschema_outcome(schema, instance)), instance


def test_without_a_format_checker_format_is_an_annotation() -> None:
    check = compiled({"format": "date-time"}, format_checker=None)
    assert check("not a date") is True
    assert jsonschema_outcome({"format": "date-time"}, "not a date", None) is True


@pytest.mark.parametrize("schema", [
    {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}},
    {"properties": {"a": {"uniqueItems": True}}},
    {"unevaluatedProperties": False},
    {"items": {"unevaluatedItems": False}},
    {"anyOf": [{"$dynamicRef": "#x"}]},
])
def test_a_schema_with_an_uncovered_keyword_is_left_to_jsonschema(schema: Any) -> None:
    assert compile_check(schema, FORMAT_CHECKER) is None
    validator = Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    assert validity_check(validator) == validator.is_valid


def test_a_validator_of_another_draft_is_left_to_jsonschema() -> None:
    validator = Draft7Validator({"type": "integer"})
    assert validity_check(validator) == validator.is_valid


def test_property_names_are_code_not_text() -> None:
    """Names reach the generated source only as string literals."""
    name = "a'] or True or value['"
    check = compiled({"required": [name], "properties": {name: {"type": "integer"}}})
    assert check({name: 1}) is True
    assert check({name: "1"}) is False
    assert check({"a": 1}) is False


# Generated schemas and instances ------------------------------------------------------------------

NAMES = ("a", "b", "xa", "T")
PATTERNS = ("^a", "a$", "[0-9]", "^x", "b|c", "", "\\d+$", "é")

json_scalars = (st.none() | st.booleans() | st.integers(-3, 3) | st.integers()
                | st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e308, float("inf"), float("nan")])
                | st.floats(-4, 4) | st.text(max_size=4) | st.sampled_from(NAMES)
                | st.sampled_from(["\U0001F600", "é", "T-1234", "a@b", "2026-12-15T09:00:00Z",
                                   "2026-12-15t09:00:00z", "x1"]))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=3), inner, max_size=4),
    max_leaves=12)
date_times = st.datetimes().map(lambda moment: moment.isoformat() + "Z") | st.sampled_from(
    ["2026-12-15T09:00:00Z", "2026-12-15T09:00:00.5+02:00", "2026-13-01T00:00:00Z"])

bounds = st.integers(0, 3)
numbers = st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 2.0])
type_names = st.sampled_from(["string", "integer", "number", "boolean", "null", "array",
                              "object"])
leaf_keywords: dict[str, st.SearchStrategy[Any]] = {
    "type": type_names | st.lists(type_names, min_size=1, max_size=3, unique=True),
    "enum": st.lists(json_scalars | st.lists(st.integers(0, 2), max_size=2), min_size=1,
                     max_size=4),
    "const": json_values,
    "pattern": st.sampled_from(PATTERNS),
    "format": st.sampled_from(["date-time", "email", "no-such-format"]),
    "minLength": bounds, "maxLength": bounds,
    "minimum": numbers, "maximum": numbers, "exclusiveMinimum": numbers,
    "exclusiveMaximum": numbers,
    "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.1, 2.5]),
    "minItems": bounds, "maxItems": bounds, "minProperties": bounds, "maxProperties": bounds,
    "required": st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
    "dependentRequired": st.dictionaries(st.sampled_from(NAMES),
                                         st.lists(st.sampled_from(NAMES), max_size=2,
                                                  unique=True), max_size=2),
    "minContains": bounds, "maxContains": bounds,
    "description": st.text(max_size=3),
}


def with_children(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    few = st.lists(children, min_size=1, max_size=3)
    return st.fixed_dictionaries({}, optional={
        **leaf_keywords,
        "properties": st.dictionaries(st.sampled_from(NAMES), children, max_size=3),
        "patternProperties": st.dictionaries(st.sampled_from(PATTERNS), children, max_size=2),
        "additionalProperties": st.booleans() | children,
        "propertyNames": children,
        "dependentSchemas": st.dictionaries(st.sampled_from(NAMES), children, max_size=2),
        "items": st.booleans() | children,
        "prefixItems": st.lists(children, min_size=1, max_size=2),
        "contains": children,
        "allOf": few, "anyOf": few, "oneOf": few, "not": children,
        "if": children, "then": children, "else": children,
    })


schemas = st.recursive(
    st.booleans() | st.fixed_dictionaries({}, optional=leaf_keywords),
    with_children, max_leaves=8)


def valid_schema(schema: Any) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


@SETTINGS
@given(schema=schemas, instances=st.lists(json_values, min_size=1, max_size=6))
def test_generated_schemas_give_jsonschemas_verdicts(schema: Any, instances: list[Any]) -> None:
    assume(valid_schema(schema))
    check = compiled(schema)
    for instance in instances:
        assert same(outcome(check, instance), jsonschema_outcome(schema, instance)), instance


@SETTINGS
@given(data=st.data())
def test_generated_schemas_on_instances_made_for_them(data: st.DataObject) -> None:
    """Instances drawn from the schema's own properties and patterns reach the valid side
    (and the deep branches) far more often than arbitrary JSON does."""
    schema = data.draw(schemas)
    assume(valid_schema(schema))
    check = compiled(schema)
    instance = data.draw(values_for(schema))
    assert same(outcome(check, instance), jsonschema_outcome(schema, instance))


def test_nan_and_infinities_reach_the_same_verdicts() -> None:
    nan = float("nan")
    for schema in ({"maximum": 1}, {"exclusiveMinimum": 0}, {"multipleOf": 2},
                   {"multipleOf": 0.5}, {"enum": [nan]}, {"const": math.inf}):
        for instance in (nan, math.inf, -math.inf):
            assert same(outcome(compiled(schema), instance),
                        jsonschema_outcome(schema, instance))


def test_generated_source_keeps_regular_expressions_out_of_the_code() -> None:
    """A pattern is compiled once and bound by name, whatever characters it holds."""
    pattern = "'; import os; '"
    check = compiled({"pattern": pattern})
    assert check(pattern) is (re.search(pattern, pattern) is not None)


@SETTINGS
@given(schema=schemas, instances=st.lists(json_values, min_size=1, max_size=6))
def test_a_check_made_again_from_its_data_is_the_check_compiled(
        schema: Any, instances: list[Any]) -> None:
    """A whole configuration's entry in the load cache holds a check as its code object and
    what its constants are made from (patterns, format checkers, multipleOf): made again
    from that data, it gives the verdicts of the check compiled."""
    from callgate_rules.documents.schemacheck import check_data, rebuilt_check

    assume(valid_schema(schema))
    check = compile_check(schema, FORMAT_CHECKER)
    assume(check is not None)
    assert check is not None
    made = check_data(check)
    assert made is not None and made[1] is FORMAT_CHECKER
    again = rebuilt_check(*made)
    for instance in instances:
        assert outcome(again, instance) == outcome(check, instance), instance


def test_format_multiple_and_pattern_constants_are_made_again_from_data() -> None:
    from callgate_rules.documents.schemacheck import check_data, rebuilt_check

    schema = {"type": "object", "properties": {
        "at": {"type": "string", "format": "date-time"},
        "step": {"type": "number", "multipleOf": 0.5},
        "code": {"type": "string", "pattern": "^R-[0-9]{1,8}$"}}}
    check = compile_check(schema, FORMAT_CHECKER)
    assert check is not None and check_data(len) is None
    made = check_data(check)
    assert made is not None
    for each in (check, rebuilt_check(*made)):
        assert each({"at": "2026-12-01T09:00:00Z", "step": 1.5, "code": "R-12"}) is True
        assert each({"at": "yesterday"}) is False
        assert each({"step": 0.7}) is False
        assert each({"code": "R-123456789"}) is False
    with pytest.raises(ValueError, match="format checker"):
        rebuilt_check(made[0], None)  # the format's check is not there to make


def test_deeply_nested_subschemas_are_compiled_and_give_jsonschemas_verdicts() -> None:
    """Subschemas are written into their parent's code only so deep: Python refuses more than
    20 nested loops in one function, and a schema that did not compile would be left to
    jsonschema."""
    schema: Any = {"type": "integer"}
    valid: Any = 1
    invalid: Any = "1"
    for level in range(30):
        schema = {"type": "array", "items": schema} if level % 2 else \
            {"type": "object", "properties": {"a": schema}, "additionalProperties": False}
        valid, invalid = ([valid], [invalid]) if level % 2 else ({"a": valid}, {"a": invalid})
    check = compiled(schema)
    for instance in (valid, invalid, [], {}):
        assert same(outcome(check, instance), jsonschema_outcome(schema, instance)), instance
    assert check(valid) is True and check(invalid) is False


# The date-time format check, spelled for speed (``validators._RFC3339``: ASCII digits
# written out, matched in full), gives the verdicts of the plain spelling it replaced:
# ``^\d{4}-...(Z|[+-]\d{2}:\d{2})$`` and then ``datetime.fromisoformat``.

def _plain_rfc3339(value: str) -> bool:
    from datetime import datetime

    if not re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$", value):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


_DATE_TIME_PIECES = st.sampled_from(["0", "1", "2", "9", "٣", "𝟘", "\n", "-", ":", "T", "t", "Z",
                                     "z", "+", ".", " ", "05", "1234567", "99"])


@settings(max_examples=400, deadline=None)
@given(base=st.sampled_from(["2026-12-15T09:00:00Z", "2026-01-31T23:59:59.123456+05:30",
                             "0001-01-01T00:00:00.1-00:00", "9999-12-31T23:59:59.123456789Z"]),
       edits=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2), _DATE_TIME_PIECES),
                      max_size=3))
def test_the_date_time_check_gives_the_plain_spelling_s_verdicts(
        base: str, edits: list[tuple[int, int, str]]) -> None:
    from callgate_rules.documents.validators import _is_rfc3339

    value = base
    for at, removed, piece in edits:  # replace a few characters anywhere, or insert some
        at = min(at, len(value))
        value = value[:at] + piece + value[at + removed:]
    assert _is_rfc3339(value) == _plain_rfc3339(value), value
