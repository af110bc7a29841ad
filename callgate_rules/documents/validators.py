"""The JSON Schemas the compiler validates with: the documents' own, and those documents declare.

The document schemas ship in ``schemas/``, one file a kind, and take what every kind shares
(the closed vocabularies — error classes, routes, rule modes, ``on_error`` — plus metadata,
durations and message texts) from ``schemas/common.json`` by ``$ref``. They are read once and
the references resolved offline, through a ``referencing`` registry of the shipped files, into
one self-contained schema a kind: ``schemacheck`` compiles that into the predicate asked of
every document (it does not follow ``$ref``), and ``jsonschema`` explains a failure from it.

The schemas a document declares (a contract's arguments, the actor and the session) are
checked against the meta-schema here and validated with the gate's ``date-time`` check.

Every validator here is a ``schemacheck.GateValidator``: Draft 2020-12 whose ``pattern``,
``patternProperties`` and ``additionalProperties`` match with RE2 semantics in linear time
(``callgate_rules.regex``), where ``jsonschema`` would run Python's backtracking ``re`` on
the model's text. A declared schema with a pattern RE2 refuses is refused at load
(``refused_patterns``), so a validator never meets one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from callgate_rules.documents.cache import VALID_SCHEMAS, schema_key
from callgate_rules.documents.schemacheck import GateValidator, validity_check
from callgate_rules.documents.source import NodePath
from callgate_rules.regex import pattern_problem

if TYPE_CHECKING:  # referencing defines the class there and exports only its instances
    from referencing._core import Resolver

SCHEMA_DIRECTORY = "schemas"


# The document schemas ---------------------------------------------------------------------------


@cache
def document_schema(kind: str) -> Validator:
    """The validator of documents of ``kind``: its shipped schema, references resolved."""
    registry = _shipped_schemas()
    root = _shipped_file(kind)["$id"]
    return GateValidator(_inlined(registry.contents(root), registry.resolver(root)))


@cache
def document_valid(kind: str) -> Callable[[Any], bool]:
    """The compiled verdict of ``document_schema(kind)``: valid, yes or no."""
    return validity_check(document_schema(kind))


@cache
def _shipped_schemas() -> Registry[Any]:
    """Every shipped schema under its ``$id``, so that a reference never leaves the package."""
    folder = resources.files("callgate_rules.documents").joinpath(SCHEMA_DIRECTORY)
    shipped = [DRAFT202012.create_resource(_shipped_file(entry.name.removesuffix(".json")))
               for entry in folder.iterdir() if entry.name.endswith(".json")]
    return Registry().with_resources((str(resource.id()), resource) for resource in shipped)


@cache
def _shipped_file(name: str) -> Any:
    folder = resources.files("callgate_rules.documents").joinpath(SCHEMA_DIRECTORY)
    return json.loads(folder.joinpath(f"{name}.json").read_text("utf-8"))


def _inlined(schema: Any, resolver: Resolver[Any]) -> Any:
    """``schema`` with every ``$ref`` replaced by what it refers to, and its ``$defs`` dropped
    (nothing refers to them any more). The keywords beside a ``$ref`` join the target's: they
    may only add annotations such as a ``description``, never redefine a keyword. The shipped
    schemas refer to no schema that refers back to itself."""
    if isinstance(schema, list):
        return [_inlined(item, resolver) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$id" in schema:
        resolver = resolver.in_subresource(DRAFT202012.create_resource(schema))
    result = {key: _inlined(value, resolver) for key, value in schema.items()
              if key not in ("$ref", "$defs")}
    if "$ref" not in schema:
        return result
    resolved = resolver.lookup(schema["$ref"])
    target = _inlined(resolved.contents, resolved.resolver)
    if clash := sorted(set(target) & set(result)):
        raise ValueError(f"$ref {schema['$ref']!r}: keywords beside it redefine {clash}")
    return {**target, **result}


# The schemas documents declare --------------------------------------------------------------------

# Upper-case T and Z only: CEL's timestamp() (what rules call) accepts nothing else.
# Compiled once: this runs on every call with a date-time argument. The digits spelled out,
# no groups, matched in full: a third cheaper than ``^\d{4}-\d{2}-...(Z|...)$`` (to the
# matcher each ``\d{2}`` is a repetition, each group marks to keep), with its verdicts
# together with ``fromisoformat``, which reads only ASCII digits where this asks for
# ``[0-9]`` (past a fraction's sixth digit it reads none: there ``\d`` stays) and no
# newline after the text (which ``$`` let through).
_RFC3339 = re.compile(r"[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
                      r"T[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.\d+)?(?:Z|[+-][0-9][0-9]:[0-9][0-9])")

_rfc3339_match, _from_iso_format = _RFC3339.fullmatch, datetime.fromisoformat  # bound once


def _is_rfc3339(value: object) -> bool:
    if type(value) is not str and not isinstance(value, str):
        return True
    if _rfc3339_match(value) is None:
        return False
    try:
        _from_iso_format(value)
    except ValueError:
        return False
    return True


FORMAT_CHECKER = FormatChecker()
# jsonschema accepts any date-time unless an optional package is installed; check it here.
FORMAT_CHECKER.checks("date-time")(_is_rfc3339)


def closed_objects(schema: Any) -> Any:
    """A copy of ``schema`` where every object with ``properties`` defaults to
    ``additionalProperties: false`` — an undeclared field is rejected unless allowed."""
    if isinstance(schema, list):
        return [closed_objects(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: closed_objects(value) for key, value in schema.items()}
    if "properties" in result and "additionalProperties" not in result:
        result["additionalProperties"] = False
    return result


@cache
def _meta_validator() -> Draft202012Validator:
    return Draft202012Validator(Draft202012Validator.META_SCHEMA)


def check_json_schema(schema: Any) -> None:
    """``check_schema`` with the meta-schema validator built once, not once a contract; a
    schema that passed before (the same canonical JSON) is known valid from the cache."""
    key = schema_key(schema)
    if key is not None and VALID_SCHEMAS.get(key) is not None:
        return
    validator = _meta_validator()
    if validator.is_valid(schema):
        if key is not None:
            VALID_SCHEMAS.put(key, b"")
        return
    error = best_match(validator.iter_errors(schema))
    if error is not None:
        raise SchemaError.create_from(error)


def argument_validator(schema: Mapping[str, Any]) -> Validator:
    return GateValidator(schema, format_checker=FORMAT_CHECKER)


# Keywords whose value is one subschema, a mapping of them, or a list of them.
_ONE_SUBSCHEMA = ("additionalProperties", "propertyNames", "items", "contains", "not", "if",
                  "then", "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_SUBSCHEMA_MAPPINGS = ("properties", "patternProperties", "$defs", "definitions",
                       "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")


def refused_patterns(schema: Any) -> Iterator[tuple[NodePath, str]]:
    """(where in ``schema``, what is wrong) for each pattern the gate cannot match in linear
    time: one RE2 refuses, or ``patternProperties`` under ``unevaluatedProperties``, which
    ``jsonschema`` matches with Python's ``re`` whatever the validator's keywords."""
    found = list(_pattern_problems(schema, ()))
    has_patterns = any(place[-1] == "patternProperties" for place in _keyword_places(schema, ()))
    if has_patterns:
        for path in _keyword_places(schema, ()):
            if path[-1] == "unevaluatedProperties":
                found.append((path, "unevaluatedProperties is not supported together with "
                              "patternProperties: jsonschema would match those patterns "
                              "with a backtracking matcher, not in linear time; use "
                              "additionalProperties (undeclared fields are refused anyway)"))
    return iter(found)


def _pattern_problems(schema: Any, path: NodePath) -> Iterator[tuple[NodePath, str]]:
    if not isinstance(schema, dict):
        return
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and (problem := pattern_problem(pattern)) is not None:
        yield (*path, "pattern"), f"pattern {pattern!r}: {problem}"
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        for key in patterns:
            if isinstance(key, str) and (problem := pattern_problem(key)) is not None:
                yield ((*path, "patternProperties", key, "<key>"),
                       f"patternProperties {key!r}: {problem}")
    for keyword, subschema in _subschemas(schema, path):
        yield from _pattern_problems(subschema, keyword)


def _keyword_places(schema: Any, path: NodePath) -> Iterator[NodePath]:
    """The path of every keyword of every subschema."""
    if not isinstance(schema, dict):
        return
    for keyword in schema:
        yield (*path, keyword)
    for place, subschema in _subschemas(schema, path):
        yield from _keyword_places(subschema, place)


def _subschemas(schema: Mapping[str, Any], path: NodePath) -> Iterator[tuple[NodePath, Any]]:
    for keyword in _ONE_SUBSCHEMA:
        if keyword in schema:
            yield (*path, keyword), schema[keyword]
    for keyword in _SUBSCHEMA_MAPPINGS:
        if isinstance(schema.get(keyword), dict):
            for name, subschema in schema[keyword].items():
                yield (*path, keyword, name), subschema
    for keyword in _SUBSCHEMA_LISTS:
        if isinstance(schema.get(keyword), list):
            for index, subschema in enumerate(schema[keyword]):
                yield (*path, keyword, index), subschema
