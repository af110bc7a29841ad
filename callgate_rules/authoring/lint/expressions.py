"""What the CEL expressions read: variables not defined where an expression runs, fields a
schema does not declare, optional fields read without ``has()``, message placeholders that
name nothing."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from callgate_rules.authoring.lint.places import access_rule_places, field_at, item_paths
from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.cel.expression import Path as FieldPath
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.model import Contract
from callgate_rules.errors import Location

BASE_VARIABLES = frozenset({"args", "actor", "now", "tool", "session", "provenance"})


def _expressions(compilation: Compilation, contract: Contract
                 ) -> Iterator[tuple[str, CompiledExpression, frozenset[str], Location]]:
    """(label, expression, variables it may read, where its text is) for every CEL in a
    contract; the place is the expression itself, so an editor jumps to the right line."""
    source = compilation.contract_sources[contract.name]
    lookups = item_paths(source, ("spec", "lookups"))
    rules = item_paths(source, ("spec", "rules"))
    known = set(BASE_VARIABLES)
    for lookup in contract.lookups:
        yield (f"lookups.{lookup.name}.key", lookup.key, frozenset(known),
               field_at(source, lookups, lookup.location, "key"))
        if lookup.when is not None:
            yield (f"lookups.{lookup.name}.when", lookup.when, frozenset(known),
                   field_at(source, lookups, lookup.location, "when"))
        if lookup.visible is not None:  # over each found record, before it is bound
            yield (f"lookups.{lookup.name}.visible", lookup.visible,
                   frozenset(known | {"record"}),
                   field_at(source, lookups, lookup.location, "visible"))
        known.add(lookup.name)
    for rule in contract.rules:
        yield (f"rules.{rule.name}", rule.expression, frozenset(known),
               field_at(source, rules, rule.location, "expression"))
    if contract.verify is not None:
        yield ("verify", contract.verify, frozenset(known | {"result"}),
               source.locate(("spec", "verify", "expression")))
    if contract.reconcile_match is not None:
        yield ("reconcile.match", contract.reconcile_match, frozenset(known | {"found"}),
               source.locate(("spec", "reconcile", "match")))


def _field_schemas(compilation: Compilation, contract: Contract) -> dict[str, Mapping[str, Any]]:
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
    return schemas


def check_variables(compilation: Compilation) -> Iterator[Finding]:
    for contract in compilation.contracts.values():
        for label, expression, allowed, location in _expressions(compilation, contract):
            for name in sorted(expression.variables - allowed):
                yield Finding(location, "error", "unknown-variable",
                              f"{contract.name} {label}: {name!r} is not defined here; "
                              f"known: {', '.join(sorted(allowed))}")
    tools = compilation.contracts
    place = access_rule_places(compilation)
    for rule in compilation.access_rules:
        applies = [c for c in tools.values() if rule.applies_to(c.name)]
        for name in sorted(rule.when.variables - BASE_VARIABLES):
            missing = [c.name for c in applies if name not in {lk.name for lk in c.lookups}]
            if not applies or len(missing) == len(applies):
                yield Finding(place(rule, "when"), "error", "unknown-variable",
                              f"access rule {rule.name}: {name!r} is not a variable of any tool "
                              "it applies to")
            elif missing:
                yield Finding(place(rule, "when"), "warning", "unknown-variable",
                              f"access rule {rule.name}: {name!r} is not looked up by "
                              f"{', '.join(missing)}; there the rule fails to evaluate")
        for tool in sorted(rule.tools - {"*"} - set(tools)):
            yield Finding(rule.location, "warning", "unknown-tool",
                          f"access rule {rule.name} names tool {tool!r}, which no contract "
                          "defines")


def check_fields(compilation: Compilation) -> Iterator[Finding]:
    """References to fields that cannot exist, and optional fields read without has()."""
    for contract in compilation.contracts.values():
        schemas = _field_schemas(compilation, contract)
        for label, expression, _, location in _expressions(compilation, contract):
            yield from _field_findings(contract.name, label, expression, schemas, location)
    place = access_rule_places(compilation)
    for rule in compilation.access_rules:
        for contract in compilation.contracts.values():
            if rule.applies_to(contract.name):
                schemas = _field_schemas(compilation, contract)
                yield from _field_findings(contract.name, f"access rule {rule.name}", rule.when,
                                           schemas, place(rule, "when"))


def _field_findings(
    tool: str,
    label: str,
    expression: CompiledExpression,
    schemas: Mapping[str, Mapping[str, Any]],
    location: Location,
) -> Iterator[Finding]:
    for path in sorted(expression.references):
        schema = schemas.get(path[0])
        if schema is None or len(path) < 2:
            continue
        problem = _schema_path_problem(schema, path, expression.guarded)
        if problem is None:
            continue
        severity, code, text = problem
        yield Finding(location, severity, code, f"{tool} {label}: {text}")


def _schema_path_problem(
    schema: Mapping[str, Any], path: FieldPath, guarded: frozenset[FieldPath]
) -> tuple[str, str, str] | None:
    node: Any = schema
    for depth, name in enumerate(path[1:], start=1):
        if not isinstance(node, Mapping):
            return None
        properties = node.get("properties")
        if properties is None:
            return None  # an open object: nothing to check against
        if name not in properties:
            known = ", ".join(sorted(properties)) or "none"
            # A closed object cannot hold it; an open one might, but a typo is likelier.
            closed = node.get("additionalProperties", True) is False
            return ("error" if closed else "warning", "unknown-field",
                    f"{'.'.join(path[:depth + 1])} is not declared; declared fields: {known}")
        prefix = path[:depth + 1]
        if name not in node.get("required", ()) and not any(
            g[:len(prefix)] == prefix or prefix[:len(g)] == g for g in guarded
        ):
            return ("warning", "unguarded-optional-field",
                    f"{'.'.join(prefix)} is optional but read without has(); when it is absent "
                    f"the rule fails to evaluate. Write has({'.'.join(prefix)}) && ...")
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
