"""Rules that can never decide anything: a tool no allow rule names, a condition that is
constant, a rule an identical earlier one always pre-empts, an allow an unconditional deny
always beats."""

from __future__ import annotations

import re
from collections.abc import Iterator

from callgate_rules.authoring.lint.cascade import broken
from callgate_rules.authoring.lint.places import access_rule_places, field_at, item_paths
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.model import AccessRule, Mode, OnError, Rule


def check_access_coverage(compilation: Compilation) -> Iterator[Finding]:
    """A tool that no allow rule names can never be called: default deny always wins."""
    cascade = broken(compilation)
    for name, contract in compilation.contracts.items():
        if cascade.may_allow(name):
            continue  # the allow rule may be in what did not compile: that is the finding
        if not any(r.effect == "allow" and r.applies_to(name) for r in compilation.access_rules):
            yield Finding(contract.document.location, "warning", "no-allow-rule",
                          f"no allow rule applies to {name}; every call will be denied")


def check_constant_rules(compilation: Compilation) -> Iterator[Finding]:
    """A rule that reads nothing has the same verdict on every call."""
    for name, contract in compilation.contracts.items():
        source = compilation.contract_sources[name]
        places = item_paths(source, ("spec", "rules"))
        for rule in contract.rules:
            value = constant_value(rule.expression)
            where = field_at(source, places, rule.location, "expression")
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
    place = access_rule_places(compilation)
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
        places = item_paths(source, ("spec", "rules"))
        earlier: dict[str, list[Rule]] = {}
        for rule in contract.rules:
            same = earlier.setdefault(normalized_cel(rule.expression.source), [])
            first = next((r for r in same if _rule_shadows(r, rule)), None)
            if first is not None:
                yield Finding(field_at(source, places, rule.location, "expression"), "warning",
                              "shadowed-rule",
                              f"{name} rule {rule.name}: shadowed by rule {first.name} "
                              f"(line {first.location.line}), which tests the same expression "
                              f"first and refuses every call this one would; remove "
                              f"{rule.name} or change its expression")
            same.append(rule)
    place = access_rule_places(compilation)
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
