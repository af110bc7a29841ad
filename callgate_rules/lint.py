"""``callgate lint``: everything the compiler rejects, plus what it cannot see on its own.

Each check is one small function that yields findings, driven by the ``CHECKS`` table
(like jsonschema's keyword table): adding a check is adding a function and a row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .cel import CompiledExpression, Path as FieldPath
from .compiler import Compilation, Finding, compile_paths, dotted
from .documents import Contract
from .errors import ErrorClass, Location
from .parse import _first_undeclared

BASE_VARIABLES = frozenset({"args", "actor", "now", "tool"})


def lint(paths: Iterable[str | Path]) -> list[Finding]:
    compilation = compile_paths(paths)
    findings = list(compilation.findings)
    for check in CHECKS:
        findings.extend(check(compilation))
    return sorted(set(findings), key=lambda f: (f.location.path, f.location.line,
                                                 f.location.column, f.code))


# What each expression may read -----------------------------------------------------------------


def _expressions(contract: Contract) -> Iterator[tuple[str, CompiledExpression, frozenset[str],
                                                       Location]]:
    """(label, expression, variables it may read, where it is) for every CEL in a contract."""
    known = set(BASE_VARIABLES)
    for lookup in contract.lookups:
        yield f"lookups.{lookup.name}.key", lookup.key, frozenset(known), lookup.location
        if lookup.when is not None:
            yield f"lookups.{lookup.name}.when", lookup.when, frozenset(known), lookup.location
        known.add(lookup.name)
    for rule in contract.rules:
        yield f"rules.{rule.name}", rule.expression, frozenset(known), rule.location
    location = contract.document.location
    if contract.verify is not None:
        yield "verify", contract.verify, frozenset(known | {"result"}), location
    if contract.reconcile_match is not None:
        yield "reconcile.match", contract.reconcile_match, frozenset(known | {"found"}), location


def _field_schemas(compilation: Compilation, contract: Contract) -> dict[str, Mapping[str, Any]]:
    """The schema each variable's fields are checked against, where one is declared."""
    schemas: dict[str, Mapping[str, Any]] = {"args": contract.arguments_schema}
    if compilation.actor_schema is not None:
        schemas["actor"] = compilation.actor_schema
    for lookup in contract.lookups:
        if lookup.record_schema is not None:
            schemas[lookup.name] = lookup.record_schema
    return schemas


# Checks ---------------------------------------------------------------------------------------


def check_variables(compilation: Compilation) -> Iterator[Finding]:
    for contract in compilation.contracts.values():
        for label, expression, allowed, location in _expressions(contract):
            for name in sorted(expression.variables - allowed):
                yield Finding(location, "error", "unknown-variable",
                              f"{contract.name} {label}: {name!r} is not defined here; "
                              f"known: {', '.join(sorted(allowed))}")
    tools = compilation.contracts
    for rule in compilation.access_rules:
        applies = [c for c in tools.values() if rule.applies_to(c.name)]
        for name in sorted(rule.when.variables - BASE_VARIABLES):
            missing = [c.name for c in applies if name not in {lk.name for lk in c.lookups}]
            if not applies or len(missing) == len(applies):
                yield Finding(rule.location, "error", "unknown-variable",
                              f"access rule {rule.name}: {name!r} is not a variable of any tool "
                              "it applies to")
            elif missing:
                yield Finding(rule.location, "warning", "unknown-variable",
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
        for label, expression, _, location in _expressions(contract):
            yield from _field_findings(contract.name, label, expression, schemas, location)
    for rule in compilation.access_rules:
        for contract in compilation.contracts.values():
            if rule.applies_to(contract.name):
                schemas = _field_schemas(compilation, contract)
                yield from _field_findings(contract.name, f"access rule {rule.name}", rule.when,
                                           schemas, rule.location)


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


def check_routes(compilation: Compilation) -> Iterator[Finding]:
    source = compilation.routing_source
    if source is None:
        if compilation.contracts:
            first = next(iter(compilation.contract_sources.values()))
            yield Finding(first.locate(()), "warning", "no-routing-table",
                          "no RoutingTable among the documents; the built-in default routes "
                          "and budgets apply")
        return
    routes = source.data.get("spec", {}).get("routes", {})
    for error_class in ErrorClass:
        if str(error_class) not in routes:
            yield Finding(source.locate(("spec", "routes")), "warning", "missing-route",
                          f"error class {error_class} has no route; the built-in default "
                          "applies. Add it to spec.routes")


def check_examples(compilation: Compilation) -> Iterator[Finding]:
    for name, contract in compilation.contracts.items():
        source = compilation.contract_sources[name]
        for index, example in enumerate(contract.examples):
            path = ("spec", "examples", index, "arguments")
            undeclared = _first_undeclared(dict(example.arguments), contract.arguments_schema, ())
            if undeclared is not None:
                yield Finding(source.locate(path), "error", "example-invalid",
                              f"{name} example {index + 1}: argument {'.'.join(undeclared)!r} "
                              "is not declared")
                continue
            for error in contract.validator.iter_errors(example.arguments):
                where = dotted(("arguments", *error.absolute_path))
                yield Finding(source.locate((*path, *error.absolute_path)), "error",
                              "example-invalid",
                              f"{name} example {index + 1}: {where}: {error.message}")


def check_disclosure(compilation: Compilation) -> Iterator[Finding]:
    """A forbidden outcome must not carry record data: it would reveal the record exists."""
    for contract in compilation.contracts.values():
        records = {lookup.name for lookup in contract.lookups}
        for rule in contract.rules:
            if rule.error_class != ErrorClass.FORBIDDEN:
                continue
            for template in (rule.message, rule.user_message):
                for fields in template.fields if template else ():
                    if fields[0] in records:
                        yield Finding(rule.location, "error", "forbidden-leak",
                                      f"{contract.name} rule {rule.name}: its forbidden message "
                                      f"uses {{{'.'.join(fields)}}}, a field of a looked-up "
                                      "record; use only args and actor")
    all_records = {lk.name for c in compilation.contracts.values() for lk in c.lookups}
    for access in compilation.access_rules:
        for fields in access.message.fields if access.message else ():
            if fields[0] in all_records:
                yield Finding(access.location, "error", "forbidden-leak",
                              f"access rule {access.name}: its message uses "
                              f"{{{'.'.join(fields)}}}, a field of a looked-up record; "
                              "use only args and actor")


def check_access_coverage(compilation: Compilation) -> Iterator[Finding]:
    """A tool that no allow rule names can never be called: default deny always wins."""
    for name, contract in compilation.contracts.items():
        if not any(r.effect == "allow" and r.applies_to(name) for r in compilation.access_rules):
            yield Finding(contract.document.location, "warning", "no-allow-rule",
                          f"no allow rule applies to {name}; every call will be denied")


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


CHECKS: tuple[Callable[[Compilation], Iterable[Finding]], ...] = (
    check_variables,
    check_fields,
    check_routes,
    check_examples,
    check_disclosure,
    check_access_coverage,
    check_message_fields,
)
