"""Steps 3 and 4 the common way: an express lane beside the general steps.

Most calls go through each check in the plainest way: the schema holds, each look-up finds
one record, the access rules and business rules evaluate to true or false without error, and
no rule is in a shadow mode. For such calls the general steps (``validate``, ``authorize``)
spend most of their time on what they must be ready for and what did not happen: shadow
verdicts, evaluation errors, candidate filtering. The express lane runs the same compiled
checks, in the same order, in tight loops over what a tool needs (worked out once per tool),
and appends the same trace entries the general steps would.

It decides against a call only in the plainest cases, and then in the general step's own
words: an enforced deny rule that is true, no allow rule true (``authorize.denial``), an
enforced business rule that is false (``validate.violation``). At anything else (a schema
or actor that does not hold, no record or several, an evaluation error, a shadow mode, a
rule asking for confirmation) it stops and reports how far the call got; the general step
then runs from that point and decides, with its messages, shadow verdicts and error
handling. So the general steps stay the one definition of what a check means
(tests/test_express.py holds the two to the same decisions on every reference call,
scenario and policy test).
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import IntEnum
from typing import Any

from .authorize import DEFAULT_DENY, denial
from .cel import CelEvaluationError
from .decision import RawTraceEntry
from .documents import AccessPolicies, AccessRule, Contract, Mode
from .errors import ErrorClass
from .provenance import unknown_sources
from .validate import Resolver, resolve, violation


class Reached(IntEnum):
    """How far a call got along the lane; the general steps take over from there."""

    NOTHING = 0  # run steps 3 and 4 in full
    REFERENCES = 1  # schema, actor and look-ups passed; variables are bound
    AUTHORIZED = 2  # ... and an allow rule matched: ``permit`` names it
    EVERYTHING = 3  # ... and every business rule holds


class ExpressLane:
    """Everything steps 3–4 need of one tool, arranged for the common case; made once."""

    __slots__ = ("contract", "tool", "example", "arguments_valid", "actor_valid",
                 "session_valid", "lookups", "denies", "allow_rules", "allows", "rules",
                 "rules_passed", "reads_provenance")

    def __init__(self, contract: Contract, policies: AccessPolicies,
                 denies: tuple[AccessRule, ...], allows: tuple[AccessRule, ...],
                 reads_provenance: bool, example: str) -> None:
        self.contract = contract
        self.tool = contract.name
        self.example = example
        self.arguments_valid = contract.arguments_valid
        # A validator without its compiled verdict (never made by the compiler) goes the
        # general way; no validator at all means nothing to check.
        self.actor_valid = _verdict(policies.actor_validator, policies.actor_valid)
        self.session_valid = _verdict(policies.session_validator, policies.session_valid)
        self.lookups = tuple(
            (lookup, lookup.key.evaluate, lookup.collection, lookup.fields,
             f"{lookup.collection} ") for lookup in contract.lookups)
        # A deny passes the plain way by not matching: its trace entry is then constant. An
        # enforced one that matches denies the call plainly.
        self.denies = tuple(
            (rule.when.evaluate, rule.unmatched, ("authorize", rule.qualified_name, "deny"),
             rule if rule.mode == Mode.ENFORCE else None) for rule in denies)
        self.allow_rules = allows
        # An allow: entries for those that do not match, then the one that does.
        self.allows = tuple(
            (rule.when.evaluate, rule.unmatched, ("authorize", rule.qualified_name, "allow"),
             rule.qualified_name) for rule in allows)
        # A rule that is false rejects the call plainly when it is enforced and does not
        # just ask for confirmation (which lets the later rules speak too).
        self.rules = tuple(
            (rule.expression.evaluate, ("validate", rule.trace_subject, "fail", ""),
             rule if rule.mode == Mode.ENFORCE
             and rule.error_class != ErrorClass.CONFIRMATION_REQUIRED else None)
            for rule in contract.rules)
        self.rules_passed = tuple(rule.passed for rule in contract.rules)
        self.reads_provenance = reads_provenance

    @classmethod
    def of(cls, contract: Contract, policies: AccessPolicies, denies: tuple[AccessRule, ...],
           allows: tuple[AccessRule, ...], reads_provenance: bool,
           example: str) -> ExpressLane | None:
        """The lane for ``contract``, or ``None`` when its checks are never plain enough:
        conditional or listing look-ups, or allow rules not all enforced (an audited allow
        that matches first changes which rule decides)."""
        if any(lookup.when is not None or lookup.many == "list" for lookup in contract.lookups):
            return None
        if any(rule.mode != Mode.ENFORCE for rule in allows):
            return None
        return cls(contract, policies, denies, allows, reads_provenance, example)

    def run(self, arguments: Any, actor: Mapping[str, Any], session: dict[str, Any],
            now: datetime, resolvers: Mapping[str, Resolver], variables: dict[str, Any],
            trace: list[RawTraceEntry]) -> tuple[Reached, str | None]:
        """Run the checks into ``variables`` and ``trace``; how far the call got, and the
        deciding allow rule once authorized."""
        if not self.arguments_valid(arguments):
            return Reached.NOTHING, None
        if self.actor_valid is None or self.session_valid is None:
            return Reached.NOTHING, None
        if self.actor_valid is not _ALWAYS and not self.actor_valid(actor):
            return Reached.NOTHING, None
        if self.session_valid is not _ALWAYS and not self.session_valid(session):
            return Reached.NOTHING, None
        variables["args"] = arguments
        variables["actor"] = actor
        variables["now"] = now
        variables["tool"] = self.tool
        variables["session"] = session
        found_entries: list[RawTraceEntry] = []
        for lookup, key_of, collection, fields, prefix in self.lookups:
            resolver = resolvers.get(collection)
            if resolver is None:
                return _start_over(variables)
            try:
                found = resolve(resolver, fields, key_of(variables))
            except CelEvaluationError:
                return _start_over(variables)
            if len(found) != 1:
                return _start_over(variables)
            record = variables[lookup.name] = found[0]
            found_entries.append(("validate", lookup.trace_subject, "found",
                                  prefix + str(record.get("id", ""))))
        trace.append(_SCHEMA_PASSED)
        trace.extend(found_entries)
        if self.reads_provenance:  # no conversation: every value's origin is unknown
            variables["provenance"] = unknown_sources(arguments)

        # Step 4's entries are kept aside until it is decided: if the lane cannot decide
        # it, the general step runs from its start and writes them all.
        decided: list[RawTraceEntry] = []
        for when, unmatched, matched, plain in self.denies:
            try:
                value = when(variables)
            except CelEvaluationError:
                return Reached.REFERENCES, None
            if value is not False:
                if value is not True or plain is None:
                    return Reached.REFERENCES, None
                trace.extend(decided)
                trace.append(matched)
                raise denial(self.contract, plain, (plain,), variables)
            decided.append(unmatched)
        for when, unmatched, matched, name in self.allows:
            try:
                value = when(variables)
            except CelEvaluationError:
                return Reached.REFERENCES, None
            if value is True:
                decided.append(matched)
                permit = name
                break
            if value is not False:
                return Reached.REFERENCES, None
            decided.append(unmatched)
        else:
            trace.extend(decided)
            trace.append(DEFAULT_DENY)
            raise denial(self.contract, None, self.allow_rules, variables)
        trace.extend(decided)

        for index, (holds, failed, plain_rule) in enumerate(self.rules):
            try:
                value = holds(variables)
            except CelEvaluationError:
                return Reached.AUTHORIZED, permit
            if value is not True:
                if value is not False or plain_rule is None:
                    return Reached.AUTHORIZED, permit
                trace.extend(self.rules_passed[:index])
                trace.append(failed)
                raise violation(self.contract, plain_rule, variables, None, self.example)
        trace.extend(self.rules_passed)
        return Reached.EVERYTHING, permit


_SCHEMA_PASSED: RawTraceEntry = ("validate", "schema", "pass")


def _ALWAYS(value: Any) -> bool:
    return True


def _verdict(validator: object | None, valid: Any) -> Any:
    """The compiled check of a host-given value: ``_ALWAYS`` when nothing is declared,
    ``None`` when there is a schema but no compiled check."""
    if validator is None:
        return _ALWAYS
    return valid


def _start_over(variables: dict[str, Any]) -> tuple[Reached, None]:
    variables.clear()  # the general steps bind them again, in their own order
    return Reached.NOTHING, None


