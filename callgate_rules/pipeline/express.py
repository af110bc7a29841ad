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
enforced business rule that is false (``validate.violation``). Each such rejection is
``Foreseen``: made once, when the lane is written, with every field but its messages, so
that a rejected call costs about what a passed one does. At anything else (a schema,
actor or session that does not hold, no record or several, an evaluation error, a shadow
mode, a rule asking for confirmation) it stops and reports how far the call got; the general step
then runs from that point and decides, with its messages, shadow verdicts and error
handling. So the general steps stay the one definition of what a check means
(tests/test_express.py holds the two to the same decisions on every reference call,
scenario and policy test).

The lane of a tool is one generated Python function (``ExpressLane.source`` shows it): the
checks as straight-line code, with every trace entry a constant made once, and the code of
each compiled CEL expression inlined where the compiler allows it (``Inline``), so that a
rule costs no call of its own.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from enum import IntEnum
from typing import Any

from callgate_rules.cel.compiler import FAILURES
from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.documents.model import AccessPolicies, AccessRule, Contract, Mode, Rule
from callgate_rules.integrations.provenance import unknown_sources
from callgate_rules.pipeline.authorize import DEFAULT_DENY, denial, denial_reads, records_read
from callgate_rules.pipeline.decision import RawTraceEntry
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.validate import (
    SCHEMA_PASSED,
    Resolver,
    Resume,
    resolve,
    violation,
    violation_reads,
)
from callgate_rules.taxonomy import ErrorClass


class Reached(IntEnum):
    """How far a call got along the lane; the general steps take over from there."""

    NOTHING = 0  # run steps 3 and 4 in full
    LOOKING_UP = 1  # schema and actor passed, variables bound, some look-ups done: resume
    REFERENCES = 2  # ... and every look-up found its one record
    AUTHORIZED = 3  # ... and an allow rule matched: ``permit`` names it
    EVERYTHING = 4  # ... and every business rule holds
    REJECTED = 5  # the lane rejected the call, in the general step's words: ``Foreseen``


class Foreseen:
    """A rejection the lane may decide, made once when the lane is written.

    ``template`` is the general step's own rejection at this point with every field but its
    messages, which are the same for every call (rule, error class, detail, hint, route);
    ``make(variables)`` makes the whole rejection, messages included, from the variables
    the call was decided on, and is called only when someone reads a message. ``reads``
    names the variables those messages may read; the gate copies the arguments and the
    actor (for the log in any case) and passes the tool's name, and ``more_reads`` names
    the rest, which it copies just for the messages."""

    __slots__ = ("make", "template", "more_reads")

    def __init__(self, make: Callable[[Mapping[str, Any]], Rejection],
                 reads: Iterable[str]) -> None:
        self.make = make
        self.template = make({})
        self.more_reads = tuple(sorted(set(reads) - {"args", "actor", "tool"}))


def _denial_foreseen(contract: Contract, rule: AccessRule | None,
                     deciding: tuple[AccessRule, ...]) -> Foreseen:
    read = records_read(contract, deciding)
    return Foreseen(lambda variables: denial(contract, rule, deciding, variables, read),
                    denial_reads(contract, read))


def _violation_foreseen(contract: Contract, rule: Rule, example: str) -> Foreseen:
    return Foreseen(lambda variables: violation(contract, rule, variables, None, example),
                    violation_reads(contract, rule))


class ExpressLane:
    """Steps 3–4 of one tool, the common way, as one generated function; made once."""

    __slots__ = ("tool", "source", "run", "foreseen")

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
        # authorized, or the Foreseen rejection)
        self.run: Callable[[Any, Mapping[str, Any], dict[str, Any], datetime,
                            Mapping[str, Resolver], dict[str, Any], list[RawTraceEntry]],
                           tuple[Reached, Resume | str | Foreseen | None]] = \
            writer.namespace["run"]
        self.foreseen: tuple[Foreseen, ...] = tuple(writer.foreseen)  # every one it may return

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


# A return inside a loop cannot become a break: the break would leave only that loop.
_LOOPS = ("for ", "while ", "async ")


class _Writer:
    """Writes a lane's source; every value it needs is bound in ``namespace`` by name."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "_FAILURES": FAILURES, "_LOOKING_UP": Reached.LOOKING_UP,
            "_NOTHING": (Reached.NOTHING, None), "_REFERENCES": (Reached.REFERENCES, None),
            "_AUTHORIZED": Reached.AUTHORIZED, "_EVERYTHING": Reached.EVERYTHING,
            "_REJECTED": Reached.REJECTED, "_unknown_sources": unknown_sources,
        }
        self.foreseen: list[Foreseen] = []

    def rejection(self, name: str, foreseen: Foreseen) -> str:
        self.foreseen.append(foreseen)
        return self.bind(name, foreseen)

    def evaluation(self, name: str, expression: CompiledExpression, pad: str,
                   target: str = "value") -> list[str]:
        """Lines that set ``target`` to what ``expression`` evaluates to, or raise one of
        ``_FAILURES``: its compiled code inlined where it allows that, else a call of its
        function, bound as ``name``."""
        inline = expression.inline
        if inline is None or any(line.lstrip().startswith(_LOOPS) for line in inline.body) \
                or any(self.namespace.get(key, value) is not value
                       for key, value in inline.namespace.items()):
            return [f"{pad}{target} = {self.bind(name, expression.evaluate)}(variables)"]
        self.namespace.update(inline.namespace)
        body = inline.body
        if len(body) == 1 and body[0].startswith("return "):
            return [f"{pad}{target} = {body[0].removeprefix('return ')}"]
        lines = [f"{pad}while True:  # the expression's code: each return becomes a break"]
        for line in body:
            code = line.lstrip()
            indent = pad + "    " + line[:len(line) - len(code)]
            if code.startswith("return "):
                lines += [f"{indent}{target} = {code.removeprefix('return ')}", f"{indent}break"]
            else:
                lines.append(f"{indent}{code}")
        # never reached by the code the compiler writes; the function would return None
        return [*lines, f"{pad}    {target} = None", f"{pad}    break"]

    def bind(self, name: str, value: Any) -> str:
        self.namespace[name] = value
        return name

    def lane(self, contract: Contract, policies: AccessPolicies,
             denies: tuple[AccessRule, ...], allows: tuple[AccessRule, ...],
             reads_provenance: bool, example: str) -> str:
        bind, rejection = self.bind, self.rejection
        lines = ["def run(arguments, actor, session, now, resolvers, variables, trace):",
                 f"    if not {bind('_arguments_valid', contract.arguments_valid)}(arguments):",
                 "        return _NOTHING"]
        # No validator: nothing declared to check.
        if policies.actor_validator is not None:
            lines += [f"    if not {bind('_actor_valid', policies.actor_valid)}(actor):",
                      "        return _NOTHING"]
        if policies.session_validator is not None:
            valid = bind("_session_valid", policies.session_valid)
            # Most hosts pass no session: when the schema takes an empty one, it is not
            # checked again for every call.
            empty_holds = policies.session_valid is not None and policies.session_valid({})
            lines += [f"    if {'session and ' if empty_holds else ''}not {valid}(session):",
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
            fields = lookup.fields
            lines += [f"    resolver = resolvers.get({lookup.collection!r})",
                      "    try:",
                      *self.evaluation(f"_key{index}", lookup.key, "        ", "key"),
                      "    except _FAILURES:",
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
            lines += [*self.evaluation(f"_deny{index}", rule.when, "        "),
                      "        if value is not False:"]
            if rule.mode == Mode.ENFORCE:
                denied = (*unmatched, rule.matched)
                lines += ["            if value is True:",
                          f"                trace.extend({bind(f'_DENIED{index}', denied)})",
                          "                return _REJECTED, " + rejection(
                              f"_DENY{index}", _denial_foreseen(contract, rule, (rule,)))]
            lines.append("            return _REFERENCES")
            unmatched += (rule.unmatched,)
        lines.append("        permit = None")
        for index, rule in enumerate(allows):
            allowed = (*unmatched, rule.matched)
            pad = "        " if index == 0 else "            "
            if index:
                lines.append("        if permit is None:")
            lines += [*self.evaluation(f"_allow{index}", rule.when, pad),
                      f"{pad}if value is True:",
                      f"{pad}    trace.extend({bind(f'_ALLOWED{index}', allowed)})",
                      f"{pad}    permit = {rule.qualified_name!r}",
                      f"{pad}elif value is not False:",
                      f"{pad}    return _REFERENCES"]
            unmatched += (rule.unmatched,)
        default_denied = bind("_DEFAULT_DENIED", (*unmatched, DEFAULT_DENY))
        lines += ["        if permit is None:  # default deny, in the general step's words",
                  f"            trace.extend({default_denied})",
                  "            return _REJECTED, " + rejection(
                      "_DEFAULT_DENY", _denial_foreseen(contract, None, allows)),
                  "    except _FAILURES:",
                  "        return _REFERENCES"]

        # The business rules: a plain false is decided here, the rest by the general step.
        passed: tuple[RawTraceEntry, ...] = ()
        if contract.rules:
            lines.append("    try:")
            for index, business in enumerate(contract.rules):
                lines += [*self.evaluation(f"_rule{index}", business.expression, "        "),
                          "        if value is not True:"]
                if business.mode == Mode.ENFORCE and \
                        business.error_class != ErrorClass.CONFIRMATION_REQUIRED:
                    failed = (*passed, business.failed)
                    lines += ["            if value is False:",
                              f"                trace.extend({bind(f'_FAILED{index}', failed)})",
                              "                return _REJECTED, " + rejection(
                                  f"_RULE{index}", _violation_foreseen(contract, business,
                                                                       example))]
                lines.append("            return _AUTHORIZED, permit")
                passed += (business.passed,)
            lines += ["    except _FAILURES:",
                      "        return _AUTHORIZED, permit",
                      f"    trace.extend({bind('_PASSED', passed)})"]
        lines += ["    return _EVERYTHING, permit", ""]
        return "\n".join(lines)


