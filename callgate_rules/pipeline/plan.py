"""Steps 3 and 4 of one tool, compiled once into one Python function: the tool's plan.

Everything about a tool that is known when it is compiled decides the shape of its plan:
the argument schema's compiled check, the actor and session schemas, each look-up (its
key, its ``when``, whether it lists), the access rules in order with their modes and
``on_error``, the business rules likewise, whether anything reads ``provenance``. The
plan is that knowledge written out as straight-line code (``ToolPlan.source`` shows it),
with the code of each compiled CEL expression inlined where the compiler allows it, so a
rule costs no call of its own, reading what the plan holds in locals (the arguments, the actor,
each record found) from them rather than from ``variables`` (``cel.compiler.reading_locals``).

What only the data can decide (no record or several, an evaluation error, a value that
is not a bool, a rule in shadow, a false rule, a deny) calls the step's own functions in
``validate`` and ``authorize``, which make the rejection, the trace entry or the shadow
verdict. Rejections are returned, never raised. The commonest (an enforced deny that
holds, no allow rule, an enforced rule that is false) are prepared (``outcome.prepared``):
made once, here, with every field but their messages, and routed.

The plan reads as the policy: each look-up and rule has its CEL text in a comment above
its code, and ``ToolPlan.outline()`` shows the same steps without the code. The functions
it calls are bound into its namespace by reference (``CALLED``), never named in a string.

The plan is *the* implementation of steps 3–4. ``tests/pipeline/reference_steps.py`` holds it to a
plain, slow evaluator written check by check, on every scenario, policy test and
hypothesis-made call.

    decide(arguments, actor, now, resolvers, progress) -> the deciding allow rule's name
    (str), or the rejection; what the steps learn goes into ``progress`` (its variables,
    trace and shadow verdicts), which also holds the session and the conversation
"""
from __future__ import annotations

import itertools
import linecache
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from callgate_rules import provenance
from callgate_rules.cel.compiler import FAILURES, reading_locals
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.documents.model import (
    AccessPolicies,
    AccessRule,
    Contract,
    GateConfig,
    Lookup,
    Mode,
    Rule,
    records_read,
)
from callgate_rules.pipeline import (
    approvals,
    argument_origins,
    authorize,
    lookups,
    plan_outline,
    validate,
)
from callgate_rules.pipeline.decision import RawTraceEntry
from callgate_rules.pipeline.outcome import Rejection, prepared
from callgate_rules.pipeline.progress import Progress
from callgate_rules.pipeline.rejection_messages import Routed
from callgate_rules.pipeline.route import Router
from callgate_rules.provenance.labels import configuration_labeller
from callgate_rules.provenance.origins import Labeller
from callgate_rules.taxonomy import ErrorClass

# decide(arguments, actor, now, resolvers, progress): the allow rule's name, or a rejection
Decide = Callable[[Any, Mapping[str, Any], datetime, Mapping[str, Any], Progress],
                  "str | Rejection"]


class ToolPlan:
    """What deciding about one tool needs that is the same for every call: made on the
    tool's first call, so that no decision works it out again."""

    __slots__ = ("contract", "rules", "may_see", "example", "versions", "parsed", "passed",
                 "reads_provenance", "reads_history", "reads_intent", "source", "decide", "steps")

    def __init__(self, config: GateConfig, contract: Contract) -> None:
        self.contract = contract
        self.rules = authorize.ToolRules.of(config.policies, contract.name)
        self.may_see = authorize.may_see(config.policies, contract, self.rules)
        self.example = validate.example_call(contract)  # the hint of a rejected call
        self.versions = config.versions_for(contract.name)  # each decision gets a copy
        self.parsed: RawTraceEntry = ("parse", contract.name, "pass",
                                      f"contract v{contract.version}")
        self.passed = f"All checks passed for {contract.name}."  # the agent message
        # Working out every argument's origin costs as much as a rule: skipped when nothing
        # about this tool reads it and no conversation asks for it.
        read = variables_read(contract, self.rules)
        self.reads_provenance = "provenance" in read
        # The run's history is read from the store only for a tool whose rules read it.
        # (and the approvals it holds for one that declares approval_covers)
        self.reads_history = "history" in read or approvals.declares_covering(contract)
        # The run's intent is judged before the rules only for a tool whose rules read it.
        self.reads_intent = "intent" in read
        writer = _Writer()
        # ``origins`` and ``reads`` (which read each value came from, with its labels) only
        # for a tool whose rules read them
        if read & {"origins", "reads"}:
            writer.labeller = configuration_labeller(config)
        self.source = writer.plan(config, self)
        self.steps = tuple(writer.steps)  # the plan in words, a line each: ``outline``
        self.decide: Decide = writer.compiled(self.source, contract.name)
        for rejection in writer.prepared:  # routed before any call
            rejection.routed = Routed.of(rejection, config.routing)

    def outline(self) -> str:
        """The plan in words, without its code: the steps in order, each look-up with its
        collection and key, each rule with its CEL text, mode and error class."""
        name, version = self.contract.name, self.contract.version
        return "\n".join((f"plan of {name} v{version}", *self.steps)) + "\n"


class Plans:
    """The plans of one configuration: a ``ToolPlan`` per tool (made on its first call),
    the router of step 7, and what a call of no known tool is decided with."""

    __slots__ = ("config", "tool_list", "tools", "no_tool_versions", "router",
                 "_records_history")

    def __init__(self, config: GateConfig) -> None:
        self.config = config
        self.tool_list = ", ".join(sorted(config.contracts))
        self.tools: dict[str, ToolPlan] = {}  # by tool name, made by ``tool``
        self.no_tool_versions = config.versions_for(None)  # each decision gets a copy
        self.router = Router(config, self.tool_list, self.versions_of)
        self._records_history: bool | None = None

    @property
    def records_history(self) -> bool:
        """Whether any expression of the configuration reads ``history``, any question
        declares ``approval_covers``, or run intents are on (their counts and totals, and
        a first intent's "nothing decided yet"): if none, a run's history is not kept
        (worked out on first use)."""
        if self._records_history is None:
            self._records_history = self.config.routing.intent is not None or any(
                "history" in variables_read(contract, authorize.ToolRules.of(
                    self.config.policies, name)) or approvals.declares_covering(contract)
                for name, contract in self.config.contracts.items())
        return self._records_history

    def tool(self, contract: Contract) -> ToolPlan:
        plan = self.tools.get(contract.name)
        if plan is None:
            plan = self.tools[contract.name] = ToolPlan(self.config, contract)
        return plan

    def versions_of(self, contract: Contract | None) -> Mapping[str, str]:
        return self.tool(contract).versions if contract else self.no_tool_versions


def variables_read(contract: Contract, rules: authorize.ToolRules) -> set[str]:
    """Every variable an expression or message template about ``contract`` reads."""
    names: set[str] = set()
    expressions = [*(r.when for r in rules.rules), *(r.expression for r in contract.rules),
                   *(lookup.key for lookup in contract.lookups),
                   *(lookup.when for lookup in contract.lookups if lookup.when is not None),
                   contract.verify, contract.reconcile_match]
    for expression in expressions:
        if expression is not None:
            names.update(expression.variables)
    templates = [*(r.message for r in rules.rules), *(r.message for r in contract.rules),
                 *(r.user_message for r in contract.rules),
                 *(lookup.message for lookup in contract.lookups),
                 contract.verify_message, contract.confirmation.summary]
    for template in templates:
        if template is not None:
            names.update(path[0] for path in template.fields if path)
    return names


# What the generated code calls when the data, not the tool, decides ----------------------


def failure_of(expression: CompiledExpression, variables: Mapping[str, Any],
               caught: BaseException) -> CelEvaluationError:
    """The ``CelEvaluationError`` an expression's function reports for the failure its
    inlined code raised (``caught``): the function is the one wording of CEL errors."""
    if isinstance(caught, CelEvaluationError):
        return caught
    try:
        expression.evaluate(variables)
    except CelEvaluationError as error:
        return error
    return CelEvaluationError(str(caught) or type(caught).__name__)


# The functions a plan calls, by the step they belong to, and its own. They are bound into
# its namespace by reference and its code names each by its ``__name__`` (``_validate.unmatched``,
# ``_failure_of``): a rename is seen by mypy, ruff and rename tools, and a function the writer
# has not bound here cannot be written into a plan (``called`` refuses it).
CALLED: dict[str, tuple[Callable[..., Any], ...]] = {
    "_validate": (validate.schema_rejection, validate.key_rejection, validate.no_resolver,
                  validate.records_of, validate.resolver_failed, validate.too_slow,
                  validate.visible_records, validate.candidates, validate.unmatched,
                  validate.listed_entry, validate.rule_outcome),
    "_authorize": (authorize.host_fact_rejection, authorize.access_verdict),
    "_lookups": (lookups.ask, lookups.LookupLate),
    "_origins": (argument_origins.traced_sources, argument_origins.traced_origins),
    "_provenance": (provenance.unknown_sources,),
}
_PLAN_FUNCTIONS: tuple[Callable[..., Any], ...] = (failure_of,)
_BOUND: dict[str, Any] = {
    **{step: SimpleNamespace(**{f.__name__: f for f in functions})
       for step, functions in CALLED.items()},
    **{f"_{f.__name__}": f for f in _PLAN_FUNCTIONS}}
_NAMES: dict[Callable[..., Any], str] = {
    **{f: f"{step}.{f.__name__}" for step, functions in CALLED.items() for f in functions},
    **{f: f"_{f.__name__}" for f in _PLAN_FUNCTIONS}}


def called(function: Callable[..., Any]) -> str:
    """The name a plan's code calls ``function`` by: it must be bound above."""
    return _NAMES[function]


# Writing the plan --------------------------------------------------------------------------


# A return inside a loop cannot become a break: the break would leave only that loop.
_LOOPS = ("for ", "while ", "async ")
_PLANS = itertools.count(1)  # numbers each plan's file name, for tracebacks and coverage


class _Writer:
    """Writes a plan's source; every value it needs is bound in ``namespace`` by name."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"_FAILURES": FAILURES, **_BOUND}
        self.labeller: Labeller | None = None  # set when the tool's rules read origins
        self.prepared: list[Rejection] = []  # the rejections it returns as they are
        self.lines: list[str] = []
        self.steps: list[str] = []  # the plan in words (``ToolPlan.outline``)
        self.step = ""  # the step ``steps`` ends in
        self.locals: dict[str, str] = {}  # the local holding a variable, by the variable's name

    def bind(self, name: str, value: Any) -> str:
        self.namespace[name] = value
        return name

    def note(self, step: str, heading: str, cel: CompiledExpression | None = None,
             pad: str = "    ", joint: str = ": ") -> None:
        """A step of the plan in words (with its CEL text): a comment above its code, and
        lines of the outline, under ``step`` where it changes (3 VALIDATE, 4 AUTHORIZE)."""
        described, text = plan_outline.described, None if cel is None else cel.source
        shown = "" if self.steps and self.step == step else step
        self.step = step
        self.lines += [f"{pad}# {line}" for line in described(
            f"{shown} {heading}".lstrip(), text, 98 - len(pad), joint)]
        lines = described(heading, text, 88, joint)
        self.steps += [f"{shown:<12}{lines[0]}", *(f"{'':<12}{line}" for line in lines[1:])]

    def rejection(self, name: str, rejection: Rejection) -> str:
        """A rejection the plan returns as it is (``outcome.prepared``)."""
        self.prepared.append(rejection)
        return self.bind(name, rejection)

    def compiled(self, source: str, tool: str) -> Decide:
        filename = f"<callgate plan {next(_PLANS)} of {tool}>"
        # Registered so that tracebacks, debuggers and coverage show the plan's lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), self.namespace)
        decide: Decide = self.namespace["decide"]
        return decide

    def evaluation(self, name: str, expression: CompiledExpression, pad: str,
                   target: str = "value") -> list[str]:
        """Lines that set ``target`` to what ``expression`` evaluates to, or raise one of
        ``_FAILURES``: its compiled code inlined where it allows that, else a call of its
        function, bound as ``name``."""
        inline = expression.inline
        if (inline is None or any(line.lstrip().startswith(_LOOPS) for line in inline.body)
                or any(self.namespace.get(key, value) is not value
                       for key, value in inline.namespace.items())):
            return [f"{pad}{target} = {self.bind(name, expression.evaluate)}(variables)"]
        self.namespace.update(inline.namespace)
        body = reading_locals(inline.body, self.locals)
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

    def guarded(self, name: str, expression: CompiledExpression, pad: str,
                target: str = "value") -> list[str]:
        """``evaluation``, with a failure caught as the error the expression reports."""
        return [f"{pad}try:", *self.evaluation(name, expression, pad + "    ", target),
                f"{pad}except _FAILURES as caught:",
                f"{pad}    {target} = {called(failure_of)}({name}_expression, variables, "
                "caught)"]

    def plan(self, config: GateConfig, tool: ToolPlan) -> str:
        contract = tool.contract
        self.bind("_contract", contract)
        self.bind("_example", tool.example)
        self.bind("_may_see", tool.may_see)
        self.bind("_thresholds", config.routing.provenance)
        self.lines = ["def decide(arguments, actor, now, resolvers, progress):",
                      "    session, conversation = progress.session, progress.conversation",
                      "    variables, trace, shadow = progress.variables, progress.trace, "
                      "progress.shadow"]
        self.note("2 PARSE", plan_outline.parse_bounds(config.routing.input_limits))
        self.lines.append("    append = trace.append")
        self.schemas(contract, config.policies)
        if contract.lookups:
            # A resolver cannot be interrupted; an answer later than the contract's timeout
            # is not trusted to decide.
            self.lines.append(f"    started = {self.bind('_clock', time.perf_counter)}()")
            self.bind("_timeout", float(contract.timeout_seconds))
            for index, lookup in enumerate(contract.lookups):
                self.lookup(index, lookup)
            self.note("3 VALIDATE", f"every look-up answered within {contract.timeout_seconds:g} s "
                      f"(else {ErrorClass.TRANSIENT})")
            self.lines += ["    elapsed = _clock() - started",
                           f"    if elapsed > {contract.timeout_seconds!r}:",
                           f"        return {called(validate.too_slow)}(_contract, elapsed)"]
        self.origins(tool.reads_provenance)
        self.access(contract, tool.rules)
        self.business_rules(contract)
        return "\n".join(self.lines) + "\n"

    def schemas(self, contract: Contract, policies: AccessPolicies) -> None:
        """3 VALIDATE the arguments; then the host's actor and session facts (4)."""
        bind = self.bind
        self.note("3 VALIDATE", f"the arguments match the contract's schema (else "
                  f"{ErrorClass.INVALID_ARGUMENT})")
        self.lines += [
            f"    if not {bind('_arguments_valid', contract.arguments_valid)}(arguments):",
            f"        rejection = {called(validate.schema_rejection)}(_contract, arguments, "
            "trace)",
            "        if rejection is not None:",
            "            return rejection",
            f"    append({bind('_SCHEMA_PASSED', validate.SCHEMA_PASSED)})"]
        for name, validator, valid in (
                ("actor", policies.actor_validator, policies.actor_valid),
                ("session", policies.session_validator, policies.session_valid)):
            if validator is None:
                continue  # nothing declared to check
            bind(f"_{name}_validator", validator)
            check = f"not {bind(f'_{name}_valid', valid)}({name})" if valid else "True"
            if name == "session" and valid is not None and valid({}):
                # Most hosts pass no session: an empty one is not checked on every call.
                check = f"session and {check}"
            self.note("4 AUTHORIZE", f"the host's {name} matches the declared {name} schema "
                      f"(else {ErrorClass.FORBIDDEN})")
            self.lines += [
                f"    if {check}:",
                f"        rejection = {called(authorize.host_fact_rejection)}("
                f"_{name}_validator, {name}, {name!r}, {name + '-schema'!r})",
                "        if rejection is not None:",
                "            return rejection"]
        # JSON numbers as their schemas type them (cel.json_numbers): `600` is a double where
        # the schema says number, so `args.amount + 0.5` means the same for 600 and 600.0
        for name, typing in (("arguments", contract.number_typing),
                             ("actor", policies.actor_typing),
                             ("session", policies.session_typing)):
            if typing is not None:
                self.lines.append(f"    {name} = {bind(f'_{name}_typing', typing)}({name})")
        self.lines += ["    variables['args'] = arguments", "    variables['actor'] = actor",
                       "    variables['now'] = now", f"    variables['tool'] = {contract.name!r}",
                       "    variables['session'] = session"]
        self.locals.update(args="arguments", actor="actor", now="now", session="session")

    def lookup(self, index: int, lookup: Lookup) -> None:
        """3 VALIDATE a reference: exactly one record the actor may see, or a list."""
        bind = self.bind
        name = bind(f"_lookup{index}", lookup)
        pad = "    "
        self.note("3 VALIDATE", plan_outline.lookup_heading(lookup), lookup.key, joint=" ")
        if lookup.when is not None:
            self.note("3 VALIDATE", "    only when", lookup.when)
            bind(f"_when{index}_expression", lookup.when)
            self.lines += [*self.guarded(f"_when{index}", lookup.when, pad),
                           "    if value is not True:",
                           f"        variables[{lookup.name!r}] = None",
                           f"        append({bind(f'_SKIPPED{index}', validate.skipped(lookup))})",
                           "    else:"]
            pad = "        "
        if lookup.visible is not None:
            self.note("3 VALIDATE", "    of those the actor may see", lookup.visible, pad)
        bind(f"_key{index}_expression", lookup.key)
        self.lines += [
            f"{pad}try:", *self.evaluation(f"_key{index}", lookup.key, pad + "    ", "key"),
            f"{pad}except _FAILURES as caught:",
            f"{pad}    return {called(validate.key_rejection)}(_contract, {name}, "
            f"{called(failure_of)}(_key{index}_expression, variables, caught), _example)",
            f"{pad}resolver = resolvers.get({lookup.collection!r})",
            f"{pad}if resolver is None:",
            f"{pad}    raise {called(validate.no_resolver)}(_contract, {name})",
            *self.answer(index, lookup, name, pad)]
        if lookup.when is None and lookup.many != "list":  # its record, in a local from now
            self.locals[lookup.name] = f"record{index}"

    def answer(self, index: int, lookup: Lookup, name: str, pad: str) -> list[str]:
        """Lines that ask the look-up's resolver and bind what it found, or return why not."""
        # Whatever the resolver does, raise or return junk, is a classified decision.
        # by the contract's deadline, in another thread unless it keeps the deadline itself
        asked = f"{called(lookups.ask)}(resolver, {lookup.fields!r}, key, started, _timeout)"
        record = f"record{index}"
        # the commonest answer, one record as a plain dict in a list or tuple, is taken as it
        # is: for a look-up that neither types, filters nor lists records, straight away
        direct = (lookup.number_typing is None and lookup.visible is None
            and lookup.many != "list")
        one = (f"(type(found) is list or type(found) is tuple) and len(found) == 1 and "
              f"type({record + ' := ' if direct else ''}found[0]) is dict")
        lines = [f"{pad}try:",
                 f"{pad}    found = {asked}",
                 f"{pad}    if not ({one}):",
                 f"{pad}        found = {called(validate.records_of)}(found)",
                 *([f"{pad}        {record} = None"] if direct else []),
                 f"{pad}except {called(lookups.LookupLate)} as late:",
                 f"{pad}    return {called(validate.too_slow)}(_contract, late.seconds, "
                 "str(late))",
                 f"{pad}except Exception as error:",
                 f"{pad}    return {called(validate.resolver_failed)}(_contract, {name}, error)"]
        if lookup.number_typing is not None:
            typing = self.bind(f"_record{index}_typing", lookup.number_typing)
            lines.append(f"{pad}found = [{typing}(record) for record in found]")
        if lookup.visible is not None:  # records the actor may not see count as absent
            lines.append(f"{pad}found = {called(validate.visible_records)}({name}, found, "
                         "variables, trace)")
        if lookup.many != "list":
            return [*lines, *self.one_record(lookup, name, record, pad, direct)]
        lines.append(f"{pad}found = {called(validate.candidates)}({name}, found, variables, "
                     "_may_see, trace)")
        if lookup.max_records is not None:  # more than the list may hold: which one?
            lines += [f"{pad}if len(found) > {lookup.max_records}:",
                      f"{pad}    return {called(validate.unmatched)}(_contract, {name}, key, "
                      "found, variables, trace)"]
        return [*lines, f"{pad}variables[{lookup.name!r}] = found",
                f"{pad}append({called(validate.listed_entry)}({name}, found))"]

    @staticmethod
    def one_record(lookup: Lookup, name: str, record: str, pad: str,
                   direct: bool) -> list[str]:
        """Lines that take the one record a look-up found (in ``record`` already when
        ``direct``), or return why there is none or several."""
        found = (f"('validate', {lookup.trace_subject!r}, 'found', "
                f"{lookup.collection + ' '!r} + format({record}.get('id', '')))")
        # records_of, typing or filtering may leave none or several
        inner = pad + "    " if direct else pad
        return [*([f"{pad}if {record} is None:"] if direct else []),
                f"{inner}if len(found) != 1:",
                f"{inner}    found = {called(validate.candidates)}({name}, found, variables, "
                "_may_see, trace)",
                f"{inner}    if len(found) != 1:",
                f"{inner}        return {called(validate.unmatched)}(_contract, {name}, key, "
                "found, variables, trace)",
                f"{inner}{record} = found[0]",
                f"{pad}variables[{lookup.name!r}] = {record}",
                f"{pad}append({found})"]

    def origins(self, reads_provenance: bool) -> None:
        """Where each argument value came from, when the host passed the conversation."""
        self.note("3 VALIDATE", "where each argument value came from, when the host passes "
                  "the conversation" + (", else unknown" if reads_provenance else ""))
        sources = called(argument_origins.traced_sources)
        self.lines += ["    if conversation is not None:",
                       f"        variables['provenance'] = {sources}(arguments, "
                       "conversation, _contract, variables, _thresholds, trace)"]
        origins = called(argument_origins.traced_origins)
        if self.labeller is not None:
            self.bind("_labeller", self.labeller)
            self.lines.append(f"        {origins}(arguments, conversation, _contract, "
                              "variables, _thresholds, _labeller)")
        if reads_provenance or self.labeller is not None:
            self.lines.append("    else:")  # no conversation: every value's origin unknown
        if reads_provenance:
            self.lines.append("        variables['provenance'] = "
                              f"{called(provenance.unknown_sources)}(arguments)")
        if self.labeller is not None:
            self.lines.append(f"        {origins}(arguments, None, _contract, variables, "
                              "_thresholds, _labeller)")

    def access(self, contract: Contract, rules: authorize.ToolRules) -> None:
        """4 AUTHORIZE: a deny that matches beats any allow; default deny."""
        bind, rejection = self.bind, self.rejection
        for index, rule in enumerate(rules.denies):
            denied = rejection(f"_DENIED{index}", _denial_prepared(contract, rule, (rule,)))
            self.note("4 AUTHORIZE", plan_outline.access_heading(rule, False), rule.when)
            self.lines += self.verdict(f"_deny{index}", rule, "    ", f"return {denied}")
        self.lines.append("    permit = None")
        for index, rule in enumerate(rules.allows):
            pad = "    " if index == 0 else "        "
            if index:
                self.lines.append("    if permit is None:")
            self.note("4 AUTHORIZE", plan_outline.access_heading(rule, index > 0), rule.when, pad)
            self.lines += self.verdict(f"_allow{index}", rule, pad,
                                       f"permit = {rule.qualified_name!r}")
        default = rejection("_DEFAULT_DENIED", _denial_prepared(contract, None, rules.allows))
        self.note("4 AUTHORIZE", f"{'else ' if rules.allows else ''}denied by default "
                  f"({ErrorClass.FORBIDDEN})")
        self.lines += ["    if permit is None:",
                       f"        append({bind('_DEFAULT_DENY', authorize.DEFAULT_DENY)})",
                       f"        return {default}"]

    def verdict(self, prefix: str, rule: AccessRule, pad: str, matched: str) -> list[str]:
        """Lines that evaluate ``rule`` and run ``matched`` when it matches: a plain
        verdict of an enforced rule here, the rest as its step says (``access_verdict``)."""
        bind = self.bind
        name = bind(f"{prefix}_rule", rule)
        bind(f"{prefix}_expression", rule.when)
        lines = [*self.guarded(prefix, rule.when, pad),
                 f"{pad}if value is False:",
                 f"{pad}    append({bind(f'{prefix}_UNMATCHED', rule.unmatched)})"]
        if rule.mode == Mode.ENFORCE:
            lines += [f"{pad}elif value is True:",
                      f"{pad}    append({bind(f'{prefix}_MATCHED', rule.matched)})",
                      f"{pad}    {matched}"]
        return [*lines, f"{pad}elif {called(authorize.access_verdict)}({name}, value, trace, "
                "shadow):",
                f"{pad}    {matched}"]

    def business_rules(self, contract: Contract) -> None:
        """3 VALIDATE the business rules, in declared order, after the actor may see the
        records they read; a rule asking for confirmation lets the later rules speak."""
        bind, rejection = self.bind, self.rejection
        asks = any(rule.error_class == ErrorClass.CONFIRMATION_REQUIRED for rule in
                   contract.rules)
        if asks:
            self.lines.append("    confirm = None")
        for index, rule in enumerate(contract.rules):
            prefix = f"_rule{index}"
            name = bind(f"{prefix}_rule", rule)
            bind(f"{prefix}_expression", rule.expression)
            confirms = rule.error_class == ErrorClass.CONFIRMATION_REQUIRED
            self.note("3 VALIDATE", plan_outline.rule_heading(rule), rule.expression)
            self.lines += [*self.guarded(prefix, rule.expression, "    "),
                           "    if value is True:",
                           f"        append({bind(f'{prefix}_PASSED', rule.passed)})"]
            if rule.mode == Mode.ENFORCE and not confirms:
                violated = rejection(f"_RULE{index}", _violation_prepared(
                    contract, rule, validate.example_call(contract)))
                self.lines += ["    elif value is False:",
                               f"        append({bind(f'{prefix}_FAILED', rule.failed)})",
                               f"        return {violated}"]
            # a rule asking for confirmation lets the later rules speak; the first one counts
            keep = (["            if confirm is None:", "                confirm = rejection"]
                if confirms else ["            return rejection"])
            if confirms and rule.approval_covers:  # unless a person's approval covers it
                question = f"{contract.name}/{rule.name}"
                keep = [f"            if not {bind('_covered', approvals.covered)}("
                        f"{question!r}, {bind(f'{prefix}_covers', rule.approval_covers)}, "
                        f"rejection, variables, trace, {rule.trace_subject!r}):",
                        *("    " + line for line in keep)]
            self.lines += ["    else:",
                           f"        rejection = {called(validate.rule_outcome)}(_contract, "
                           f"{name}, value, variables, trace, shadow, example=_example)",
                           "        if rejection is not None:", *keep]
        if asks:
            self.note("3 VALIDATE", f"the first rule that asks for confirmation, if any "
                      f"({ErrorClass.CONFIRMATION_REQUIRED})")
            self.lines += ["    if confirm is not None:", "        return confirm"]
        self.note("ALLOWED", "in the name of the allow rule that matched")
        self.lines.append("    return permit")



def _denial_prepared(contract: Contract, rule: AccessRule | None,
                     deciding: tuple[AccessRule, ...]) -> Rejection:
    read = records_read(contract, deciding)
    return prepared(lambda variables: authorize.denial(contract, rule, deciding, variables,
                                                       read),
                    authorize.denial_reads(contract, read))


def _violation_prepared(contract: Contract, rule: Rule, example: str) -> Rejection:
    return prepared(lambda variables: validate.violation(contract, rule, variables, None,
                                                         example),
                    validate.violation_reads(contract, rule))
