"""Every expression type-checked against what each variable holds where it runs.

The types come from the documents: ``args`` from the contract's argument schema, ``actor``
and ``session`` from the AccessPolicy's schemas, each look-up's variable from its record
``schema`` (a list of them for ``many: list``), ``record`` in a look-up's ``visible`` likewise,
``provenance`` mirrors the arguments (each argument's sources, a list of strings), ``now`` is
a timestamp, ``tool`` a string; ``result`` (verify) is typed by the contract's
``spec.result``; ``found`` (reconcile.match), ``item`` (a label's ``where``) and anything
without a schema are ``dyn``.
The checker is ``cel.checker``; this module finds the places and says the findings at
file:line:col, the expression's place in the YAML plus the offset inside it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from callgate_rules.authoring.lint.expressions import (
    ExpressionPlace,
    access_expressions,
    contract_expressions,
)
from callgate_rules.cel import parser
from callgate_rules.cel import types as t
from callgate_rules.cel.checker import CheckFinding, Environment, check
from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.syntax import Node
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.model import Contract, Lookup
from callgate_rules.pipeline.history import HISTORY_TYPE
from callgate_rules.pipeline.intents import INTENT_TYPE


def check_types(compilation: Compilation) -> Iterator[Finding]:
    trees: dict[str, Node | None] = {}
    types = {name: variable_types(compilation, contract)
             for name, contract in compilation.contracts.items()}
    for contract in compilation.contracts.values():
        for place in contract_expressions(compilation, contract):
            for finding in place_findings(place, types[contract.name], trees):
                yield located_finding(place, finding, f"{contract.name} {place.label}")
    yield from _access_findings(compilation, types, trees)


def _access_findings(compilation: Compilation, types: Mapping[str, Mapping[str, t.Type]],
                     trees: dict[str, Node | None]) -> Iterator[Finding]:
    """An access rule is checked for each tool it applies to, and each finding said once,
    naming the tools when it holds for only some of them."""
    by_rule: dict[tuple[str, int, int], list[ExpressionPlace]] = {}
    for place in access_expressions(compilation):
        location = place.location
        by_rule.setdefault((location.path, location.line, location.column), []).append(place)
    for places in by_rule.values():
        tools: dict[CheckFinding, list[str]] = {}
        for place in places:
            for finding in place_findings(place, types[place.tool], trees):
                tools.setdefault(finding, []).append(place.tool)
        for finding, names in tools.items():
            label = places[0].label
            if len(names) < len(places):
                label += f" (for {', '.join(sorted(names))})"
            yield located_finding(places[0], finding, label)


def place_findings(place: ExpressionPlace, types: Mapping[str, t.Type],
                    trees: dict[str, Node | None]) -> list[CheckFinding]:
    source = place.expression.source
    # the compiled tree, with the named definitions expanded in it
    tree = place.expression.tree
    if tree is None:
        if source not in trees:
            try:
                trees[source] = parser.parse(source)
            except CelSyntaxError:
                trees[source] = None  # the compiler reports it where it compiles the rule
        tree = trees[source]
    if tree is None:
        return []
    variables = {name: types[name] for name in place.allowed if name in types}
    if place.record is not None:
        variables["record"] = record_type(place.record)
    result = check(tree, Environment(variables))
    findings = list(result.findings)
    if place.expression.tree is None:
        # parsed here, without the named definitions the compiler expanded: a call the
        # compiler accepted may be a definition's, so no finding about calls by name
        findings = [f for f in findings if f.code not in ("unknown-function", "wrong-arity")]
    if place.condition and not (result.type.is_dyn or result.type.kind == "bool"):
        findings.append(CheckFinding(
            "error", "not-a-condition",
            f"the expression gives {t.describe(result.type)}, not a bool, so it fails to "
            "evaluate on every call; compare it with something", 1,
            len(source) - len(source.lstrip(" ")) + 1))
    return findings


def located_finding(place: ExpressionPlace, finding: CheckFinding, label: str) -> Finding:
    location = place.source.locate_in_scalar(place.path, finding.line, finding.column)
    return Finding(location, finding.severity, finding.code, f"{label}: {finding.message}")


# What each variable holds --------------------------------------------------------------------


def variable_types(compilation: Compilation, contract: Contract) -> dict[str, t.Type]:
    """The type of every variable a contract's expressions may read."""
    arguments = t.from_schema(contract.arguments_schema)
    types = {
        "args": arguments,
        "actor": _declared(compilation.actor_schema),
        "session": _declared(compilation.session_schema),
        "provenance": provenance_type(arguments),
        "history": HISTORY_TYPE,  # the run so far: pipeline.history documents the shape
        "intent": INTENT_TYPE,  # the run's intent: pipeline.intents documents the shape
        # per argument leaf, its origins; every read of the run (provenance.origins)
        "origins": t.DYN,
        "reads": t.list_of(t.DYN),
        "now": t.TIMESTAMP,
        "tool": t.STRING,
        # the destination's answer: typed by the contract's spec.result where it has one
        "result": t.DYN if contract.result_schema is None else t.from_schema(
            contract.result_schema),
        "found": t.DYN,
        "item": t.DYN,  # one item of a read's result (spec.labels.NAME.where)
    }
    for lookup in contract.lookups:
        record = record_type(lookup)
        types[lookup.name] = t.list_of(record) if lookup.many == "list" else record
    return types


def record_type(lookup: Lookup) -> t.Type:
    return _declared(lookup.record_schema)


def _declared(schema: Mapping[str, Any] | None) -> t.Type:
    """An object whose schema is declared, else one whose fields are unknown (``dyn``)."""
    return t.OPEN_OBJECT if schema is None else t.from_schema(schema)


def provenance_type(arguments: t.Type) -> t.Type:
    """What ``provenance`` holds for arguments of this type: the same fields, each scalar
    one a list of the places it came from (``user``, ``tool:NAME``...)."""
    if arguments.kind == "object" and arguments.shape is not None:
        shape = arguments.shape
        fields = tuple((name, t.Field(provenance_type(found.type), found.required))
                       for name, found in shape.fields)
        return t.object_of(t.Shape(fields, shape.declared, shape.closed, shape.patterns,
                                   None if shape.rest is None else t.DYN))
    if arguments.kind in ("list", "map", "dyn"):
        return t.DYN  # per element, or unknown: not worth a false finding
    return t.list_of(t.STRING)
