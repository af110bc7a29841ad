"""Step 4 — AUTHORIZE: the actor from the runtime, rights as CEL, default deny, deny wins.

The order of the rules is the tool's plan (``plan``), compiled once per tool; this module
holds the tool's rules, what a rule's verdict means, and the denials.

The actor is whatever the host passes to the gate, never a value from the model's
arguments. A denial tells the model nothing about the record: when the deciding rules read
a looked-up record, the agent message is the same one the model gets for a record that does
not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from callgate_rules.cel.errors import CelEvaluationError, CostExceeded
from callgate_rules.documents.model import (
    AccessPolicies,
    AccessRule,
    Contract,
    Lookup,
    Mode,
    OnError,
    records_read,
)
from callgate_rules.documents.yaml_errors import boolean_hint
from callgate_rules.pipeline.decision import RawTraceEntry, ShadowVerdict
from callgate_rules.pipeline.outcome import Rejection, as_decided
from callgate_rules.pipeline.validate import MaySee, unavailable_message
from callgate_rules.taxonomy import NOT_FOUND_USER_MESSAGE, ErrorClass

# Enum members are looked up through a descriptor in Python 3.11: the rule loop compares with
# this.
_ENFORCE = Mode.ENFORCE


@dataclass(frozen=True)
class ToolRules:
    """The access rules that apply to one tool, all of them and by effect, in order: the
    same for every call of the tool, so a gate works them out once."""

    rules: tuple[AccessRule, ...]
    denies: tuple[AccessRule, ...]
    allows: tuple[AccessRule, ...]

    @classmethod
    def of(cls, policies: AccessPolicies, tool: str) -> ToolRules:
        rules = policies.rules_for(tool)
        return cls(rules, tuple(r for r in rules if r.effect == "deny"),
                   tuple(r for r in rules if r.effect == "allow"))


def host_fact_rejection(validator: Validator, value: Any, name: str,
                        rule: str) -> Rejection | None:
    """The rejection of an actor or session (``name``) that the compiled check of its
    declared schema refused, in jsonschema's words; ``None`` should jsonschema find no
    error. What does not match its schema is never trusted."""
    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or name
    return Rejection(
        ErrorClass.FORBIDDEN,
        f"the {name} passed by the host does not match the declared {name} schema: "
        f"{where}: {error.message}{_boolean_hint(error)}",
        rule=rule,
    )


def _boolean_hint(error: Any) -> str:
    """A ``user: no`` in an actor file read as ``False`` where a text was expected: why."""
    expected = error.validator_value
    if error.validator == "type" and (
            expected == "string" or isinstance(expected, list) and "string" in expected):
        return boolean_hint(error.instance, None)
    return ""


DEFAULT_DENY: RawTraceEntry = ("authorize", "default", "deny", "no allow rule matched")


def may_see(
    policies: AccessPolicies, contract: Contract, tool_rules: ToolRules | None = None,
) -> MaySee:
    """A filter for the candidates of a look-up with several matches: may the actor act
    on this record? It may not when an enforced deny reading the record holds, or when the
    enforced allow rules could let the call through without the record and every one of
    them is false with it. Rules are evaluated with what is known so far: a later look-up
    is absent, and CEL's error absorption (``false && error`` is false) lets a rule decide
    on the parts it can read; an error counts as "could allow". ``tool_rules``: the tool's
    rules, when the caller has them already. Made once per tool."""
    rules = tool_rules.rules if tool_rules else policies.rules_for(contract.name)
    allows = tuple(r for r in rules if r.effect == "allow" and r.mode == _ENFORCE)
    denies = tuple(r for r in rules if r.effect == "deny" and r.mode == _ENFORCE)

    def visible(lookup: Lookup, record: Mapping[str, Any], variables: Mapping[str, Any]) -> bool:
        probe = {**variables, lookup.name: record}
        if any(_holds(r, probe) is True for r in denies if lookup.name in r.when.variables):
            return False
        reading = [r for r in allows if lookup.name in r.when.variables]
        if not reading:
            return True
        absent = {k: v for k, v in variables.items() if k != lookup.name}
        if not any(_holds(r, absent) is not False for r in allows):
            return True  # no allow could pass whatever the record: the rights decide, later
        return any(_holds(r, probe) is not False for r in allows)

    return visible


def _holds(rule: AccessRule, variables: Mapping[str, Any]) -> bool | None:
    """What ``rule``'s condition says of ``variables``: True, False, or None (an error, or
    not a bool)."""
    try:
        value = rule.when.evaluate(variables)
    except CelEvaluationError:
        return None
    return value if isinstance(value, bool) else None


def _matches(
    rule: AccessRule,
    variables: Mapping[str, Any],
    trace: list[RawTraceEntry],
    shadow: list[ShadowVerdict],
) -> bool:
    try:
        value = rule.when.evaluate(variables)  # .evaluate: one call frame less
    except CelEvaluationError as failure:
        value = failure
    return access_verdict(rule, value, trace, shadow)


def access_verdict(rule: AccessRule, value: Any, trace: list[RawTraceEntry],
                   shadow: list[ShadowVerdict]) -> bool:
    """Does ``rule`` match, given what its condition gave (``value``: a value, or the
    ``CelEvaluationError`` it raised)? Failing closed: a deny that cannot be evaluated
    denies, an allow does not allow; a rule in shadow never matches, and leaves a
    verdict."""
    if isinstance(value, CelEvaluationError):
        error: str | None = str(value)
    else:
        error = None if isinstance(value, bool) else f"returned {type(value).__name__}, not bool"
    if error is not None:
        matched = rule.effect == "deny" and (rule.on_error == OnError.FAIL_CLOSED
                                             or isinstance(value, CostExceeded))
        trace.append(("authorize", rule.qualified_name, "error",
                      f"{error}; counts as {'match' if matched else 'no match'}"))
    else:
        matched = value is True
        trace.append(rule.matched if matched else rule.unmatched)
    if matched and rule.mode != _ENFORCE:
        shadow.append(ShadowVerdict(rule.qualified_name, str(rule.mode),
                                    "forbidden" if rule.effect == "deny" else "allowed",
                                    f"{rule.effect} rule {rule.name} matched"))
        return False
    return matched


def denial(
    contract: Contract,
    rule: AccessRule | None,
    deciding: tuple[AccessRule, ...],
    variables: Mapping[str, Any],
    record_lookups: list[Lookup] | None = None,
) -> Rejection:
    """The rejection of a call denied by ``rule``, or by default (``None``) when none of the
    ``deciding`` allow rules matched. ``record_lookups``: ``records_read(contract,
    deciding)``, when the caller keeps it."""
    if record_lookups is None:
        record_lookups = records_read(contract, deciding)
    name = rule.qualified_name if rule else "default-deny"
    return Rejection(
        ErrorClass.FORBIDDEN,
        f"denied by {name}",
        rule=name,
        # rendered when first read: most denials are only routed
        agent_message=partial(_denial_message, contract, rule, record_lookups,
                              as_decided(variables, denial_reads(contract, record_lookups))),
        user_message=NOT_FOUND_USER_MESSAGE if record_lookups else None,
        speaks_as=ErrorClass.NOT_FOUND if record_lookups else None,
    )


_DENIAL_READS = ("args", "actor", "tool")  # what a deny rule's own message may name


def denial_reads(contract: Contract, record_lookups: list[Lookup]) -> Iterable[str]:
    """The variables a denial's message may read (``record_lookups`` as for ``denial``)."""
    return contract.unavailable_reads if record_lookups else _DENIAL_READS


def _denial_message(contract: Contract, rule: AccessRule | None, record_lookups: list[Lookup],
                    variables: Mapping[str, Any]) -> str:
    if record_lookups:
        # The verdict depends on a record: answer exactly as if it did not exist.
        return unavailable_message(contract, record_lookups[0], variables)
    if rule is not None and rule.message is not None:
        return rule.message.render({"args": variables.get("args", {}),
                                    "actor": variables.get("actor", {}),
                                    "tool": contract.name})
    return (f"You are not allowed to call {contract.name} for this user. Tell the user "
            "it cannot be done here.")
