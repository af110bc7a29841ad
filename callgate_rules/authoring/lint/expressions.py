"""What the CEL expressions read: variables not defined where an expression runs, fields a
schema does not declare, optional fields read without ``has()``, message placeholders that
name nothing."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from callgate_rules.authoring.lint.cascade import broken
from callgate_rules.authoring.lint.places import access_rule_paths, access_rule_places, item_paths
from callgate_rules.cel import syntax
from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.cel.expression import Path as FieldPath
from callgate_rules.cel.library import FUNCTIONS
from callgate_rules.cel.parser import parse as parse_cel
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.model import Contract, Lookup
from callgate_rules.documents.source import NodePath, SourceDocument
from callgate_rules.errors import Location

BASE_VARIABLES = frozenset({"args", "actor", "now", "tool", "session", "provenance"})
# ``math`` in ``math.greatest(...)`` names a function's namespace, not a variable
NAMESPACES = frozenset(name.split(".", 1)[0] for name in FUNCTIONS if "." in name)


@dataclass(frozen=True)
class ExpressionPlace:
    """One CEL expression where it runs: for which tool, what it may read, where it is
    written (``path`` within ``source``), and whether it must give a bool."""

    tool: str
    label: str  # "rules.not-closed", "lookups.ticket.key", "access rule anyone"
    expression: CompiledExpression
    allowed: frozenset[str]  # the variables defined where it runs
    source: SourceDocument
    path: NodePath
    condition: bool = True
    record: Lookup | None = None  # a look-up's ``visible``: ``record`` is one of its records

    @property
    def location(self) -> Location:
        return self.source.locate(self.path)


def contract_expressions(compilation: Compilation, contract: Contract
                         ) -> Iterator[ExpressionPlace]:
    """Every CEL of a contract, in the order it runs; the place is the expression itself,
    so an editor jumps to the right line."""
    source = compilation.contract_sources[contract.name]
    lookups = item_paths(source, ("spec", "lookups"))
    rules = item_paths(source, ("spec", "rules"))
    known = set(BASE_VARIABLES)

    def place(label: str, expression: CompiledExpression, path: NodePath, *,
              more: frozenset[str] = frozenset(), condition: bool = True,
              record: Lookup | None = None) -> ExpressionPlace:
        return ExpressionPlace(contract.name, label, expression, frozenset(known | more),
                               source, path, condition, record)

    for lookup in contract.lookups:
        at = lookups.get(lookup.location, ())
        yield place(f"lookups.{lookup.name}.key", lookup.key, (*at, "key"), condition=False)
        if lookup.when is not None:
            yield place(f"lookups.{lookup.name}.when", lookup.when, (*at, "when"))
        if lookup.visible is not None:  # over each found record, before it is bound
            yield place(f"lookups.{lookup.name}.visible", lookup.visible, (*at, "visible"),
                        more=frozenset({"record"}), record=lookup)
        known.add(lookup.name)
    for rule in contract.rules:
        yield place(f"rules.{rule.name}", rule.expression,
                    (*rules.get(rule.location, ()), "expression"))
    if contract.verify is not None:
        yield place("verify", contract.verify, ("spec", "verify", "expression"),
                    more=frozenset({"result"}))
    if contract.reconcile_match is not None:
        yield place("reconcile.match", contract.reconcile_match, ("spec", "reconcile", "match"),
                    more=frozenset({"found"}))


def access_expressions(compilation: Compilation) -> Iterator[ExpressionPlace]:
    """Every access rule's ``when``, once for each contract it applies to."""
    paths = access_rule_paths(compilation)
    for rule in compilation.access_rules:
        found = paths(rule)
        if found is None:
            continue
        source, path = found
        for contract in compilation.contracts.values():
            if rule.applies_to(contract.name):
                allowed = BASE_VARIABLES | {lookup.name for lookup in contract.lookups}
                yield ExpressionPlace(contract.name, f"access rule {rule.name}", rule.when,
                                      frozenset(allowed), source, (*path, "when"))


def _field_schemas(compilation: Compilation, contract: Contract, place: ExpressionPlace
                   ) -> dict[str, Mapping[str, Any]]:
    """The schema each variable's fields are checked against, where one is declared."""
    schemas: dict[str, Mapping[str, Any]] = {"args": contract.arguments_schema}
    if compilation.actor_schema is not None:
        schemas["actor"] = compilation.actor_schema
    if compilation.session_schema is not None:
        schemas["session"] = compilation.session_schema
    # provenance mirrors the arguments: provenance.to holds the sources of args.to
    schemas["provenance"] = contract.arguments_schema
    for lookup in contract.lookups:
        if lookup.record_schema is not None:
            schemas[lookup.name] = lookup.record_schema
    if place.record is not None and place.record.record_schema is not None:
        schemas["record"] = place.record.record_schema
    return schemas


def check_variables(compilation: Compilation) -> Iterator[Finding]:
    """Variables not defined where they are read, tools no contract defines: unless a
    document that did not compile may define them (its errors are the findings then)."""
    cascade = broken(compilation)
    for contract in compilation.contracts.values():
        dropped = cascade.lookups.get(contract.name, frozenset())
        for place in contract_expressions(compilation, contract):
            for name in sorted(place.expression.variables - place.allowed - dropped
                               - NAMESPACES):
                if cascade.may_define_name(name):
                    continue
                yield Finding(place.location, "error", "unknown-variable",
                              f"{contract.name} {place.label}: {name!r} is not defined here; "
                              f"known: {', '.join(sorted(place.allowed))}")
    tools = compilation.contracts
    where = access_rule_places(compilation)
    for rule in compilation.access_rules:
        applies = [c for c in tools.values() if rule.applies_to(c.name)]
        for name in sorted(rule.when.variables - BASE_VARIABLES - NAMESPACES):
            if cascade.may_define_variable(rule.tools, name) or cascade.may_define_name(name):
                continue
            missing = [c.name for c in applies if name not in {lk.name for lk in c.lookups}]
            if not applies or len(missing) == len(applies):
                yield Finding(where(rule, "when"), "error", "unknown-variable",
                              f"access rule {rule.name}: {name!r} is not a variable of any tool "
                              "it applies to")
            elif missing:
                yield Finding(where(rule, "when"), "warning", "unknown-variable",
                              f"access rule {rule.name}: {name!r} is not looked up by "
                              f"{', '.join(missing)}; there the rule fails to evaluate")
        for tool in sorted(rule.tools - {"*"} - set(tools)):
            if cascade.may_define_tool(tool):
                continue
            yield Finding(rule.location, "warning", "unknown-tool",
                          f"access rule {rule.name} names tool {tool!r}, which no contract "
                          "defines")


def check_guards(compilation: Compilation) -> Iterator[Finding]:
    """Optional fields read without has() (the type checker reports undeclared fields)."""
    for contract in compilation.contracts.values():
        for place in contract_expressions(compilation, contract):
            yield from _guard_findings(f"{contract.name} {place.label}", place,
                                       _field_schemas(compilation, contract, place))
    for place in access_expressions(compilation):
        # said without the tool, so a rule for many tools says each unguarded read once
        contract = compilation.contracts[place.tool]
        yield from _guard_findings(place.label, place,
                                   _field_schemas(compilation, contract, place))


def _guard_findings(label: str, place: ExpressionPlace,
                    schemas: Mapping[str, Mapping[str, Any]]) -> Iterator[Finding]:
    expression = place.expression
    for path in sorted(expression.references):
        schema = schemas.get(path[0])
        if schema is None or len(path) < 2:
            continue
        unguarded = _first_unguarded(schema, path, expression.guarded)
        if unguarded is None:
            continue
        read = ".".join(unguarded)
        yield Finding(read_at(place, read), "warning", "unguarded-optional-field",
                      f"{label}: {read} is optional but read without has(); when it is "
                      f"absent the rule fails to evaluate. Write has({read}) && ...")


def read_at(place: ExpressionPlace, dotted_path: str) -> Location:
    """Where the expression first reads ``dotted_path`` (its last field's name), else where
    the expression starts."""
    try:
        tree = parse_cel(place.expression.source)
    except CelSyntaxError:
        return place.location
    for node in syntax.walk(tree):
        if isinstance(node, syntax.Select) and syntax.qualified_name(node) == dotted_path:
            return place.source.locate_in_scalar(place.path, node.at.line, node.at.column)
    return place.location


def _first_unguarded(schema: Mapping[str, Any], path: FieldPath,
                     guarded: frozenset[FieldPath]) -> FieldPath | None:
    """The first optional field along ``path`` that no has() tests. A has() guards exactly
    the field it names: ``has(a.b)`` says nothing of ``a.b.c`` (``b`` may lack ``c``), nor
    of ``a`` when ``a`` is optional (``has(a.b)`` fails when ``a`` is absent)."""
    node: Any = schema
    for depth, name in enumerate(path[1:], start=1):
        if not isinstance(node, Mapping):
            return None
        properties = node.get("properties")
        if not isinstance(properties, Mapping) or name not in properties:
            return None  # open, or undeclared: the type checker says so
        prefix = path[:depth + 1]
        required = node.get("required", ())
        if name not in (required if isinstance(required, list) else ()) and (
                prefix not in guarded):
            return prefix
        node = properties[name]
    return None


def check_message_fields(compilation: Compilation) -> Iterator[Finding]:
    for contract in compilation.contracts.values():
        known = set(BASE_VARIABLES) | {lookup.name for lookup in contract.lookups}
        for rule in contract.rules:
            for template in (rule.message, rule.user_message):
                for fields in template.fields if template else ():
                    if fields[0] not in known:
                        yield Finding(rule.location, "warning", "unknown-placeholder",
                                      f"{contract.name} rule {rule.name}: placeholder "
                                      f"{{{'.'.join(fields)}}} names no variable; it is shown "
                                      "as written")
