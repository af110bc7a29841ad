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

The lane of a tool is one generated Python function (``ExpressLane.source`` shows it): the
checks as straight-line code, with every trace entry a constant made once.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from enum import IntEnum
from typing import Any

from .authorize import DEFAULT_DENY, denial, records_read
from .cel import CelEvaluationError
from .decision import RawTraceEntry
from .documents import AccessPolicies, AccessRule, Contract, Mode
from .errors import ErrorClass
from .outcome import Rejection
from .provenance import unknown_sources
from .validate import SCHEMA_PASSED, Resolver, Resume, resolve, violation


class Reached(IntEnum):
    """How far a call got along the lane; the general steps take over from there."""

    NOTHING = 0  # run steps 3 and 4 in full
    LOOKING_UP = 1  # schema and actor passed, variables bound, some look-ups done: resume
    REFERENCES = 2  # ... and every look-up found its one record
    AUTHORIZED = 3  # ... and an allow rule matched: ``permit`` names it
    EVERYTHING = 4  # ... and every business rule holds
    REJECTED = 5  # the lane rejected the call, in the general step's words


class ExpressLane:
    """Steps 3–4 of one tool, the common way, as one generated function; made once."""

    __slots__ = ("tool", "source", "run")

    def __init__(self, contract: Contract, policies: AccessPolicies,
                 denies: tuple[AccessRule, ...], allows: tuple[AccessRule, ...],
                 reads_provenance: bool, example: str) -> None:
        self.tool = contract.name
        writer = _Writer()
        self.source = writer.lane(contract, policies, denies, allows, reads_provenance, example)
        exec(compile(self.source, f"<express lane of {contract.name}>", "exec"),
             writer.namespace)
        # run(arguments, actor, session, now, resolvers, variables, trace) -> (how far the
        # call got, then: where the look-ups resume, the deciding allow rule once
        # authorized, or the Rejection)
        self.run: Callable[[Any, Mapping[str, Any], dict[str, Any], datetime,
                            Mapping[str, Resolver], dict[str, Any], list[RawTraceEntry]],
                           tuple[Reached, Resume | str | Rejection | None]] = \
            writer.namespace["run"]

    @classmethod
    def of(cls, contract: Contract, policies: AccessPolicies, denies: tuple[AccessRule, ...],
           allows: tuple[AccessRule, ...], reads_provenance: bool,
           example: str) -> ExpressLane | None:
        """The lane for ``contract``, or ``None`` when its checks are never plain enough:
        conditional or listing look-ups, or allow rules not all enforced (an audited allow
        that matches first changes which rule decides), or a schema without a compiled
        check."""
        if any(lookup.when is not None or lookup.many == "list" for lookup in contract.lookups):
            return None
        if any(rule.mode != Mode.ENFORCE for rule in allows):
            return None
        if (policies.actor_validator is not None and policies.actor_valid is None) or \
                (policies.session_validator is not None and policies.session_valid is None):
            return None
        return cls(contract, policies, denies, allows, reads_provenance, example)


class _Writer:
    """Writes a lane's source; every value it needs is bound in ``namespace`` by name."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "_CelError": CelEvaluationError, "_LOOKING_UP": Reached.LOOKING_UP,
            "_NOTHING": (Reached.NOTHING, None), "_REFERENCES": (Reached.REFERENCES, None),
            "_AUTHORIZED": Reached.AUTHORIZED, "_EVERYTHING": Reached.EVERYTHING,
            "_REJECTED": Reached.REJECTED,
            "_denial": denial, "_violation": violation, "_unknown_sources": unknown_sources,
        }

    def bind(self, name: str, value: Any) -> str:
        self.namespace[name] = value
        return name

    def lane(self, contract: Contract, policies: AccessPolicies,
             denies: tuple[AccessRule, ...], allows: tuple[AccessRule, ...],
             reads_provenance: bool, example: str) -> str:
        bind = self.bind
        bind("_contract", contract)
        bind("_example", example)
        lines = ["def run(arguments, actor, session, now, resolvers, variables, trace):",
                 f"    if not {bind('_arguments_valid', contract.arguments_valid)}(arguments):",
                 "        return _NOTHING"]
        # No validator: nothing declared to check.
        if policies.actor_validator is not None:
            lines += [f"    if not {bind('_actor_valid', policies.actor_valid)}(actor):",
                      "        return _NOTHING"]
        if policies.session_validator is not None:
            lines += [f"    if not {bind('_session_valid', policies.session_valid)}(session):",
                      "        return _NOTHING"]
        lines += ["    variables['args'] = arguments", "    variables['actor'] = actor",
                  "    variables['now'] = now", f"    variables['tool'] = {contract.name!r}",
                  "    variables['session'] = session"]

        # Look-ups: exactly one record each, or the general step resumes the look-ups where
        # the lane stopped (every resolver is asked once).
        schema_passed = bind("_SCHEMA_PASSED", SCHEMA_PASSED)
        found_entries: list[str] = []

        def hand_over(index: int, resolved: str) -> list[str]:
            return [f"        trace.append({schema_passed})",
                    *(f"        trace.append({entry})" for entry in found_entries),
                    f"        return _LOOKING_UP, ({index}, {resolved})"]

        for index, lookup in enumerate(contract.lookups):
            key, fields = bind(f"_key{index}", lookup.key.evaluate), lookup.fields
            lines += [f"    resolver = resolvers.get({lookup.collection!r})",
                      "    try:",
                      f"        key = {key}(variables)",
                      "    except _CelError:",
                      "        resolver = None",
                      "    if resolver is None:",
                      *hand_over(index, "None")]
            if len(fields) == 1:  # as validate.resolve does it
                lines += [f"    found = resolver({fields[0]!r}, key)",
                          "    if type(found) is not tuple and type(found) is not list:",
                          "        found = list(found)"]
            else:
                lines += [f"    found = {bind('_resolve', resolve)}(resolver, {fields!r}, key)"]
            lines += ["    if len(found) != 1:",
                      *hand_over(index, "(key, found)"),
                      f"    record{index} = variables[{lookup.name!r}] = found[0]"]
            found_entries.append(f"('validate', {lookup.trace_subject!r}, 'found', "
                                 f"{lookup.collection + ' '!r} + "
                                 f"format(record{index}.get('id', '')))")
        lines.append(f"    trace.append({schema_passed})")
        lines += [f"    trace.append({entry})" for entry in found_entries]
        if reads_provenance:  # no conversation: every value's origin is unknown
            lines.append("    variables['provenance'] = _unknown_sources(arguments)")

        # Step 4: a plain deny match or no allow at all is decided here; anything else
        # (an error, a value not a bool, a shadow mode) goes to the general step.
        lines += ["    try:"]
        unmatched: tuple[RawTraceEntry, ...] = ()
        for index, rule in enumerate(denies):
            when = bind(f"_deny{index}", rule.when.evaluate)
            lines += [f"        value = {when}(variables)",
                      "        if value is not False:"]
            if rule.mode == Mode.ENFORCE:
                denied = (*unmatched, rule.matched)
                lines += ["            if value is True:",
                          f"                trace.extend({bind(f'_DENIED{index}', denied)})",
                          f"                return _REJECTED, _denial(_contract, "
                          f"{bind(f'_DENY{index}', rule)}, ({bind(f'_DENY{index}', rule)},), "
                          f"variables, {bind(f'_READ{index}', records_read(contract, (rule,)))})"]
            lines.append("            return _REFERENCES")
            unmatched += (rule.unmatched,)
        lines.append("        permit = None")
        for index, rule in enumerate(allows):
            when = bind(f"_allow{index}", rule.when.evaluate)
            allowed = (*unmatched, rule.matched)
            pad = "        " if index == 0 else "            "
            if index:
                lines.append("        if permit is None:")
            lines += [f"{pad}value = {when}(variables)",
                      f"{pad}if value is True:",
                      f"{pad}    trace.extend({bind(f'_ALLOWED{index}', allowed)})",
                      f"{pad}    permit = {rule.qualified_name!r}",
                      f"{pad}elif value is not False:",
                      f"{pad}    return _REFERENCES"]
            unmatched += (rule.unmatched,)
        default_denied = bind("_DEFAULT_DENIED", (*unmatched, DEFAULT_DENY))
        all_allows = bind("_ALLOWS", allows)
        lines += ["        if permit is None:  # default deny, in the general step's words",
                  f"            trace.extend({default_denied})",
                  f"            return _REJECTED, _denial(_contract, None, {all_allows}, "
                  f"variables, {bind('_READ', records_read(contract, allows))})",
                  "    except _CelError:",
                  "        return _REFERENCES"]

        # The business rules: a plain false is decided here, the rest by the general step.
        passed: tuple[RawTraceEntry, ...] = ()
        if contract.rules:
            lines.append("    try:")
            for index, business in enumerate(contract.rules):
                holds = bind(f"_rule{index}", business.expression.evaluate)
                lines += [f"        value = {holds}(variables)",
                          "        if value is not True:"]
                if business.mode == Mode.ENFORCE and \
                        business.error_class != ErrorClass.CONFIRMATION_REQUIRED:
                    failed = (*passed, business.failed)
                    lines += ["            if value is False:",
                              f"                trace.extend({bind(f'_FAILED{index}', failed)})",
                              f"                return _REJECTED, _violation(_contract, "
                              f"{bind(f'_RULE{index}', business)}, variables, None, _example)"]
                lines.append("            return _AUTHORIZED, permit")
                passed += (business.passed,)
            lines += ["    except _CelError:",
                      "        return _AUTHORIZED, permit",
                      f"    trace.extend({bind('_PASSED', passed)})"]
        lines += ["    return _EVERYTHING, permit", ""]
        return "\n".join(lines)


