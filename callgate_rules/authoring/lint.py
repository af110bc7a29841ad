"""``callgate lint``: everything the compiler rejects, plus what it cannot see on its own.

Each check is one small function that yields findings, driven by the ``CHECKS`` table
(like jsonschema's keyword table): adding a check is adding a function and a row.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

from callgate_rules.authoring.versioning import version_findings
from callgate_rules.cel.expression import CelEvaluationError, CompiledExpression
from callgate_rules.cel.expression import Path as FieldPath
from callgate_rules.documents.compiler import Compilation, Finding, compile_paths, dotted
from callgate_rules.documents.model import (
    AccessRule,
    Contract,
    Idempotency,
    Mode,
    OnError,
    Rule,
    Template,
)
from callgate_rules.documents.source import NodePath, SourceDocument
from callgate_rules.errors import Location
from callgate_rules.pipeline.parse import _first_undeclared
from callgate_rules.taxonomy import ErrorClass, Route

BASE_VARIABLES = frozenset({"args", "actor", "now", "tool", "session", "provenance"})


def lint(
    paths: Iterable[str | Path],
    *,
    since: str | None = None,
    allow_removed: Iterable[str] = (),
) -> list[Finding]:
    """Every finding for the documents under ``paths``; with ``since`` (a git revision), also
    the documents that changed since then without raising ``metadata.version``."""
    paths = list(paths)
    compilation = compile_paths(paths)
    findings = list(compilation.findings)
    for check in CHECKS:
        findings.extend(check(compilation))
    if since is not None:
        findings.extend(version_findings(paths, since, allow_removed=allow_removed,
                                         current=compilation.sources))
    return sorted(set(findings), key=lambda f: (f.location.path, f.location.line,
                                                 f.location.column, f.code))


# What each expression may read -----------------------------------------------------------------


def _expressions(compilation: Compilation, contract: Contract
                 ) -> Iterator[tuple[str, CompiledExpression, frozenset[str], Location]]:
    """(label, expression, variables it may read, where its text is) for every CEL in a
    contract; the place is the expression itself, so an editor jumps to the right line."""
    source = compilation.contract_sources[contract.name]
    lookups = _item_paths(source, ("spec", "lookups"))
    rules = _item_paths(source, ("spec", "rules"))
    known = set(BASE_VARIABLES)
    for lookup in contract.lookups:
        yield (f"lookups.{lookup.name}.key", lookup.key, frozenset(known),
               _at(source, lookups, lookup.location, "key"))
        if lookup.when is not None:
            yield (f"lookups.{lookup.name}.when", lookup.when, frozenset(known),
                   _at(source, lookups, lookup.location, "when"))
        known.add(lookup.name)
    for rule in contract.rules:
        yield (f"rules.{rule.name}", rule.expression, frozenset(known),
               _at(source, rules, rule.location, "expression"))
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


# Checks ---------------------------------------------------------------------------------------


def check_variables(compilation: Compilation) -> Iterator[Finding]:
    for contract in compilation.contracts.values():
        for label, expression, allowed, location in _expressions(compilation, contract):
            for name in sorted(expression.variables - allowed):
                yield Finding(location, "error", "unknown-variable",
                              f"{contract.name} {label}: {name!r} is not defined here; "
                              f"known: {', '.join(sorted(allowed))}")
    tools = compilation.contracts
    place = _access_rule_places(compilation)
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
    place = _access_rule_places(compilation)
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
    yield from _routing_message_leaks(compilation)
    yield from _not_found_message_leaks(compilation)


# What a message about a refusal may show: what the model sent and who is asking. Anything
# else ({detail}, a record, an evaluation error) differs between a missing record and one the
# actor may not see, and so tells the model the record exists.
FORBIDDEN_MESSAGE_ROOTS = frozenset({"args", "actor", "tool", "tools"})
# A look-up's not-found text is also the text for "exists, but not yours"; it is rendered
# with only args and the tool's name (validate.not_found_message).
NOT_FOUND_MESSAGE_ROOTS = frozenset({"args", "tool"})


def _routing_message_leaks(compilation: Compilation) -> Iterator[Finding]:
    source = compilation.routing_source
    if source is None:
        return
    pair = source.data.get("spec", {}).get("messages", {}).get(str(ErrorClass.FORBIDDEN), {})
    for audience in ("agent", "user"):
        text = pair.get(audience)
        if not isinstance(text, str):
            continue
        for fields in Template.of(text).fields:
            if fields[0] not in FORBIDDEN_MESSAGE_ROOTS:
                yield Finding(source.locate(("spec", "messages", "forbidden", audience)),
                              "error", "forbidden-leak",
                              f"RoutingTable messages.forbidden.{audience} uses "
                              f"{{{'.'.join(fields)}}}, which can differ between a missing "
                              "record and one the actor may not see; use only {args.*}, "
                              "{actor.*} and {tool}")


def _not_found_message_leaks(compilation: Compilation) -> Iterator[Finding]:
    for name, contract in compilation.contracts.items():
        source = compilation.contract_sources[name]
        places = _item_paths(source, ("spec", "lookups"))
        for lookup in contract.lookups:
            for fields in lookup.message.fields if lookup.message else ():
                if fields[0] not in NOT_FOUND_MESSAGE_ROOTS:
                    yield Finding(_at(source, places, lookup.location, "message"), "error",
                                  "forbidden-leak",
                                  f"{name} lookup {lookup.name}: its not-found message uses "
                                  f"{{{'.'.join(fields)}}}; the same text answers for a record "
                                  "the actor may not see, so it may name only what the model "
                                  "sent: use {args.*}")


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


def check_constant_rules(compilation: Compilation) -> Iterator[Finding]:
    """A rule that reads nothing has the same verdict on every call."""
    for name, contract in compilation.contracts.items():
        source = compilation.contract_sources[name]
        places = _item_paths(source, ("spec", "rules"))
        for rule in contract.rules:
            value = constant_value(rule.expression)
            where = _at(source, places, rule.location, "expression")
            if value is True:
                yield Finding(where, "warning", "never-fires",
                              f"{name} rule {rule.name}: its expression is always true, so it "
                              "never refuses a call; make it test args, actor or a looked-up "
                              "record, or remove it")
            elif value is False and rule.mode == Mode.ENFORCE:
                yield Finding(where, "error", "always-refuses",
                              f"{name} rule {rule.name}: its expression is always false, so "
                              f"every call of {name} is refused as {rule.error_class}; fix the "
                              "expression or remove the rule")
            elif value is False:
                yield Finding(where, "warning", "always-refuses",
                              f"{name} rule {rule.name}: its expression is always false, so "
                              f"in {rule.mode} mode it reports every call of {name}; fix the "
                              "expression or remove the rule")
    place = _access_rule_places(compilation)
    for access in compilation.access_rules:
        if constant_value(access.when) is False:
            verb = "allows" if access.effect == "allow" else "denies"
            yield Finding(place(access, "when"), "warning", "never-fires",
                          f"access rule {access.name}: its condition is always false, so it "
                          f"never {verb} anything; fix the condition or remove the rule")


def check_shadowed_rules(compilation: Compilation) -> Iterator[Finding]:
    """A rule that repeats an earlier one can never be the one that decides."""
    for name, contract in compilation.contracts.items():
        source = compilation.contract_sources[name]
        places = _item_paths(source, ("spec", "rules"))
        earlier: dict[str, list[Rule]] = {}
        for rule in contract.rules:
            same = earlier.setdefault(normalized_cel(rule.expression.source), [])
            first = next((r for r in same if _rule_shadows(r, rule)), None)
            if first is not None:
                yield Finding(_at(source, places, rule.location, "expression"), "warning",
                              "shadowed-rule",
                              f"{name} rule {rule.name}: shadowed by rule {first.name} "
                              f"(line {first.location.line}), which tests the same expression "
                              f"first and refuses every call this one would; remove "
                              f"{rule.name} or change its expression")
            same.append(rule)
    place = _access_rule_places(compilation)
    seen: dict[str, list[AccessRule]] = {}
    for access in compilation.access_rules:
        same_access = seen.setdefault(normalized_cel(access.when.source), [])
        covering = next((r for r in same_access if _access_shadows(r, access)), None)
        if covering is not None:
            yield Finding(place(access, "when"), "warning", "shadowed-rule",
                          f"access rule {access.name}: shadowed by rule {covering.name} "
                          f"({covering.location}), which has the same effect and condition "
                          f"for these tools, so {access.name} never decides anything; remove "
                          "it or change its condition")
        same_access.append(access)


def check_allows_always_denied(compilation: Compilation) -> Iterator[Finding]:
    """An allow rule all of whose tools an unconditional deny names can never allow."""
    always_deny = [r for r in compilation.access_rules
                   if r.effect == "deny" and r.mode == Mode.ENFORCE
                   and constant_value(r.when) is True]
    for allow in compilation.access_rules:
        if allow.effect != "allow" or allow.mode != Mode.ENFORCE:
            continue
        deny = next((d for d in always_deny if "*" in d.tools or allow.tools <= d.tools), None)
        if deny is not None:
            tools = ", ".join(sorted(allow.tools))
            yield Finding(allow.location, "warning", "allow-always-denied",
                          f"access rule {allow.name}: never allows anything, because deny rule "
                          f"{deny.name} ({deny.location}) is always true for {tools} and a "
                          f"matching deny beats every allow; remove one of them or give "
                          f"{deny.name} a real condition")


def check_unknown_outcomes(compilation: Compilation) -> Iterator[Finding]:
    """A write whose destination can neither deduplicate nor be asked hands every unknown
    outcome (a timeout after sending) to a person; with a confirmation a person takes part
    anyway. ``lookup`` without ``reconcile.match`` is not reported: the operation ID is
    derived from the call's canonical arguments, so what the destination holds under it is
    this call, and ``match`` only guards against a destination that mixes up IDs."""
    for name, contract in compilation.contracts.items():
        if (contract.is_write and contract.idempotency == Idempotency.NONE
                and not contract.confirmation.required):
            source = compilation.contract_sources[name]
            yield Finding(source.locate(("spec", "idempotency")), "warning",
                          "outcome-needs-person",
                          f"{name} writes with idempotency none and no confirmation: after a "
                          "timeout or a lost connection the destination can neither "
                          "deduplicate nor be asked, so an unknown outcome will always need a "
                          "person. Declare idempotency key or lookup if the destination "
                          "supports it, or set confirmation.required")


# A forbidden call must end here: any other route goes on with it, or lets the model try again
# and learn from each answer which records exist.
FORBIDDEN_ROUTES = frozenset({Route.REFUSE, Route.REVIEW})


def check_forbidden_routes(compilation: Compilation) -> Iterator[Finding]:
    advice = "route it to refuse (or to review, to hand it to a person)"
    source = compilation.routing_source
    if source is not None:
        route = source.data.get("spec", {}).get("routes", {}).get(str(ErrorClass.FORBIDDEN))
        if route is not None and route not in FORBIDDEN_ROUTES:
            yield Finding(source.locate(("spec", "routes", "forbidden")), "error",
                          "forbidden-route",
                          f"RoutingTable routes forbidden to {route}, which goes on with a "
                          f"refused call or lets the model try again and probe which records "
                          f"exist; {advice}")
    for name, contract in compilation.contracts.items():
        contract_source = compilation.contract_sources[name]
        places = _item_paths(contract_source, ("spec", "rules"))
        for rule in contract.rules:
            if (rule.error_class == ErrorClass.FORBIDDEN and rule.route is not None
                    and rule.route not in FORBIDDEN_ROUTES):
                yield Finding(_at(contract_source, places, rule.location, "route"), "error",
                              "forbidden-route",
                              f"{name} rule {rule.name}: a forbidden rule routed to "
                              f"{rule.route} goes on with a refused call or lets the model try "
                              f"again and probe which records exist; {advice}")


CHECKS: tuple[Callable[[Compilation], Iterable[Finding]], ...] = (
    check_variables,
    check_fields,
    check_routes,
    check_examples,
    check_disclosure,
    check_access_coverage,
    check_message_fields,
    check_constant_rules,
    check_shadowed_rules,
    check_allows_always_denied,
    check_unknown_outcomes,
    check_forbidden_routes,
)


# Helpers for the checks ------------------------------------------------------------------------


def constant_value(expression: CompiledExpression) -> bool | None:
    """``True`` or ``False`` when the expression reads no variable, so its verdict is the same
    on every call; ``None`` when it depends on the call (or does not give a bool)."""
    if expression.variables:
        return None
    try:
        value = expression({})
    except CelEvaluationError:
        return None
    return value if isinstance(value, bool) else None


_CEL_TOKEN = re.compile(
    r"(?P<string>[rRbB]{0,2}(?:"
    r'"""(?:\\.|[^\\])*?"""'
    r"|'''(?:\\.|[^\\])*?'''"
    r'|"(?:\\.|[^"\\\n])*"'
    r"|'(?:\\.|[^'\\\n])*'))"
    r"|(?P<comment>//[^\n]*)"
    r"|(?P<space>\s+)"
    r"|(?P<word>\w+)"
    r"|(?P<other>.)",
    re.DOTALL,
)


def normalized_cel(source: str) -> str:
    """``source`` without comments and with its tokens separated by one space, so expressions
    that differ only in layout compare equal; string literals are kept exactly as written."""
    return " ".join(match.group() for match in _CEL_TOKEN.finditer(source)
                    if match.lastgroup not in ("space", "comment"))


def _rule_shadows(first: Rule, later: Rule) -> bool:
    """Rules run in order and the first enforced failure stops: with the same expression,
    ``later`` fails only where ``first`` has already refused — unless ``first`` merely
    reports (audit, warn) or lets pass an evaluation error that ``later`` would refuse."""
    return first.mode == Mode.ENFORCE and (
        first.on_error == OnError.FAIL_CLOSED or later.on_error == OnError.IGNORE)


def _access_shadows(first: AccessRule, later: AccessRule) -> bool:
    return (first.effect == later.effect and first.mode == later.mode
            and first.on_error == later.on_error
            and ("*" in first.tools or later.tools <= first.tools))


def _item_paths(source: SourceDocument, prefix: NodePath) -> dict[Location, NodePath]:
    """Where each item of the list at ``prefix`` starts → its node path. Compiled rules and
    look-ups keep only their location; this finds their fields (expression, message) again."""
    node: Any = source.data
    for part in prefix:
        node = node.get(part) if isinstance(node, Mapping) else None
    if not isinstance(node, list):
        return {}
    return {source.locate((*prefix, index)): (*prefix, index) for index in range(len(node))}


def _at(source: SourceDocument, places: Mapping[Location, NodePath], item: Location,
        field: str) -> Location:
    path = places.get(item)
    return source.locate((*path, field)) if path is not None else item


def _access_rule_places(compilation: Compilation) -> Callable[[AccessRule, str], Location]:
    """A function giving the place of one field of an access rule."""
    places: dict[Location, tuple[SourceDocument, NodePath]] = {}
    for source in compilation.sources:
        if isinstance(source.data, Mapping) and source.data.get("kind") == "AccessPolicy":
            for location, path in _item_paths(source, ("spec", "rules")).items():
                places[location] = (source, path)

    def place(rule: AccessRule, field: str) -> Location:
        found = places.get(rule.location)
        return found[0].locate((*found[1], field)) if found else rule.location

    return place


# Reports: how findings reach a person, a CI log or a code-scanning tab --------------------------

FORMATS = ("text", "json", "github", "sarif")
SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")

# One line per finding code: SARIF's rule descriptions, shown by code-scanning tools.
CODE_DESCRIPTIONS: Mapping[str, str] = {
    "yaml": "The file is not valid YAML.",
    "schema": "The document does not match the JSON Schema of its kind.",
    "cel-syntax": "A CEL expression does not parse.",
    "duplicate-tool": "Two ToolContracts define the same tool.",
    "duplicate-actor-schema": "More than one AccessPolicy declares the actor schema.",
    "duplicate-session-schema": "More than one AccessPolicy declares the session schema.",
    "duplicate-routing-table": "More than one RoutingTable; a gate uses exactly one.",
    "unknown-variable": "An expression reads a variable that is not defined where it runs.",
    "unknown-tool": "An access rule names a tool that no contract defines.",
    "unknown-field": "An expression reads a field its schema does not declare.",
    "unguarded-optional-field": "An optional field is read without has().",
    "no-routing-table": "No RoutingTable: the built-in routes and budgets apply.",
    "missing-route": "An error class has no route in the RoutingTable.",
    "example-invalid": "A contract's example fails the contract itself.",
    "forbidden-leak": "A refusal's message could reveal that a record exists.",
    "no-allow-rule": "No allow rule names the tool, so every call is denied.",
    "unknown-placeholder": "A message placeholder names no variable.",
    "never-fires": "A rule's condition is constant, so the rule never takes effect.",
    "always-refuses": "A business rule is always false, so it refuses every call.",
    "shadowed-rule": "An earlier, identical rule always decides first.",
    "allow-always-denied": "An unconditional deny beats this allow rule on every call.",
    "outcome-needs-person": "A write whose unknown outcome can only be settled by a person.",
    "forbidden-route": "A forbidden outcome is routed to something other than refuse or review.",
    "version-not-bumped": "A document changed but its metadata.version did not increase.",
    "version-decreased": "A document's metadata.version is lower than before.",
    "narrowed-arguments": "A contract's arguments now refuse calls that passed before.",
    "removed-tool": "A tool the model may still call was removed.",
}


def render(findings: Iterable[Finding], output_format: str) -> str:
    """The findings as ``output_format`` (one of ``FORMATS``), ready to print."""
    findings = list(findings)
    if output_format == "json":
        return json.dumps([f.as_dict() for f in findings], indent=2)
    if output_format == "github":
        return "\n".join(github_annotation(f) for f in findings)
    if output_format == "sarif":
        return json.dumps(sarif_log(findings), indent=2, ensure_ascii=False)
    return "\n".join(str(f) for f in findings)


def github_annotation(finding: Finding) -> str:
    """A GitHub Actions workflow command: the finding appears on the line in the diff."""
    properties = [f"file={_escape_property(relative_path(finding.location.path))}"]
    if finding.location.line:
        properties += [f"line={finding.location.line}", f"col={finding.location.column}"]
    properties.append(f"title={_escape_property(finding.code)}")
    return f"::{finding.severity} {','.join(properties)}::{_escape_data(finding.message)}"


def _escape_data(text: str) -> str:
    # The escaping GitHub's runner undoes (toolkit's escapeData); % first, or it would
    # re-escape the others.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def sarif_log(findings: Iterable[Finding]) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: one reporting rule per finding code."""
    findings = list(findings)
    codes = sorted({f.code for f in findings})
    rule_index = {code: index for index, code in enumerate(codes)}
    rules = [{"id": code, "shortDescription": {"text": CODE_DESCRIPTIONS.get(
        code, f"callgate lint finding {code}.")}} for code in codes]
    results = [_sarif_result(f, rule_index[f.code]) for f in findings]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "callgate", "version": package_version(),
                                "rules": rules}},
            # PyYAML counts columns in code points, not SARIF's default UTF-16 units.
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def _sarif_result(finding: Finding, rule_index: int) -> dict[str, Any]:
    physical: dict[str, Any] = {
        "artifactLocation": {"uri": quote(relative_path(finding.location.path))}}
    if finding.location.line:
        region = {"startLine": finding.location.line}
        if finding.location.column:
            region["startColumn"] = finding.location.column
        physical["region"] = region
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": "error" if finding.severity == "error" else "warning",
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": physical}],
    }


def relative_path(path: str) -> str:
    """``path`` relative to the current directory with ``/`` separators, as GitHub and SARIF
    viewers resolve it against the checkout."""
    try:
        return Path(os.path.relpath(path)).as_posix()
    except ValueError:  # another drive on Windows: there is no relative path
        return Path(path).as_posix()


def package_version() -> str:
    try:
        return metadata.version("callgate-rules")
    except metadata.PackageNotFoundError:
        return "0+unknown"
