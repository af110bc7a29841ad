"""``PolicyAssertion`` documents: properties every call the gate lets through must have,
proved (or broken, with a counterexample call) by ``callgate analyze check``.

::

    apiVersion: callgate/v1
    kind: PolicyAssertion
    metadata: {name: refund-invariants, version: "1", owner: ..., description: ...}
    spec:
      assertions:
        - name: own-tenant-only
          tools: [refund]                       # or ["*"]
          expression: order.tenant == actor.tenant

The expression is CEL over ``args``, ``actor``, ``session``, each look-up's record (by the
look-up's name, or ``record`` when the tool has exactly one look-up), ``tool`` and
``route`` — ``"execute"`` or ``"await_confirmation"``, the two routes on which a call gets
through. It must be *true* on every such call: a call on which it is false, or on which
evaluating it is an error, breaks it. With ``tools: ["*"]`` it applies to every tool whose
variables it reads. The gate never reads these documents (``documents.compiler`` skips the
kind); ``documents.assertions`` reads them, for ``analyze`` and ``lint``.

Each (assertion, tool) is one question with its own time limit: ``holds`` (no call can
break it, whatever the not-analysed parts evaluate to), ``broken`` (a call breaks it
whatever they evaluate to: the call is printed, and decided by ``Gate.check``),
``unproved`` (a call breaks it only if some not-analysed part takes a value, named), or
``unknown`` (the solver ran out of time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from callgate_rules.analysis.encode import Encoder, Opaque, Symbols, Term
from callgate_rules.analysis.questions import (
    Call,
    Solver,
    concrete_call,
    decided,
    free_unknowns,
    mentions,
    niceties,
    outcome,
    shown_value,
)
from callgate_rules.analysis.tool_model import NotAnalysed, RecordAlias, ToolModel, build
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.documents.assertions import Assertion
from callgate_rules.documents.assertions import read_assertions as documents_read
from callgate_rules.documents.compiler import Compilation
from callgate_rules.documents.model import GateConfig
from callgate_rules.errors import ConfigError

ROOTS = ("args", "actor", "session", "tool", "route")
PASSING = ("execute", "await_confirmation")


@dataclass
class AssertionResult:
    assertion: str
    place: str  # file:line:col of the assertion's expression
    tool: str
    status: str  # holds, broken, unproved, unknown
    message: str
    call: Call | None = None
    route: str | None = None  # the route the analysis says the call takes
    rules: list[str] = field(default_factory=list)  # "name at file:line:col", and why
    conditions: list[str] = field(default_factory=list)  # unproved: what it needs
    gate: tuple[str, str | None] | None = None  # what Gate.check decides on the call
    holds_on_call: bool | None = None  # the assertion evaluated on the call (None: error)
    not_analysed: list[NotAnalysed] = field(default_factory=list)

    @property
    def confirmed(self) -> bool:
        """The gate lets the call through by the route the analysis said, and the
        assertion, evaluated by the gate's own CEL on the call, is not true."""
        return (self.gate is not None and outcome(self.gate[0]) == self.route
                and self.holds_on_call is not True)


def read_assertions(compilation: Compilation, config: GateConfig) -> list[Assertion]:
    """The PolicyAssertions among the configuration's documents; ``ConfigError`` (exit 2)
    naming file, line and field of each problem."""
    found, problems = documents_read(compilation, config.contracts)
    if problems:
        raise ConfigError(list(problems))
    return found


def available(config: GateConfig, tool: str) -> set[str]:
    """The names an assertion about ``tool`` may read."""
    lookups = config.contracts[tool].lookups
    names = {*ROOTS, *(lookup.name for lookup in lookups)}
    return names | {"record"} if len(lookups) == 1 else names


def applies(config: GateConfig, assertion: Assertion) -> tuple[list[str], list[str]]:
    """The tools the assertion is checked on, and the problems of the ones it names but
    cannot be read on (a variable the tool does not have)."""
    checked: list[str] = []
    problems: list[str] = []
    for tool in sorted(config.contracts):
        missing = sorted(assertion.expression.variables - available(config, tool))
        if "*" in assertion.tools:
            if not missing:
                checked.append(tool)
        elif tool in assertion.tools:
            if missing:
                problems.append(f"{assertion.place}: assertion {assertion.name} reads "
                                f"{', '.join(missing)}, which the tool {tool} does not have "
                                "(no look-up of that name; record needs exactly one look-up)")
            else:
                checked.append(tool)
    return checked, problems


def check_assertions(config: GateConfig, assertions: Sequence[Assertion], *,
                     timeout_ms: int) -> list[AssertionResult]:
    solver = Solver(timeout_ms)
    results: list[AssertionResult] = []
    for assertion in assertions:
        tools, problems = applies(config, assertion)
        if problems:
            raise ConfigError(list(problems))
        for tool in tools:
            results.append(_check_one(config, assertion, tool, solver))
    return results


def _check_one(config: GateConfig, assertion: Assertion, tool: str,
               solver: Solver) -> AssertionResult:
    shared: dict[str, Opaque] = {}
    model = build(config, tool, shared)
    lookups = config.contracts[tool].lookups
    symbols: Symbols = model.symbols
    if len(lookups) == 1 and lookups[0].name in symbols.roots:
        symbols = RecordAlias(model.symbols, lookups[0].name)
    route = z3.If(model.route("execute"), z3.StringVal("execute"),
                  z3.StringVal("await_confirmation"))
    encoder = Encoder(symbols, tool, shared, f"assertion {assertion.name}",
                      {"route": Term("string", route)})
    tree = assertion.expression.tree
    if tree is None:  # an expression always has its tree when compiled here
        raise ConfigError([f"{assertion.place}: the expression's syntax tree is missing"])
    value, error = encoder.condition(tree)
    place = str(assertion.place)
    notes = list(model.not_analysed) + [
        NotAnalysed(item.what, f"{place} (expression {item.line}:{item.column}: "
                    f"{item.text})", assertion.name) for item in encoder.used]
    through = z3.Or(model.route("execute"), model.route("await_confirmation"))
    # after encoding: the assertion's own variables get their schemas' bounds too
    violated = z3.And(model.symbols.domain(), through, z3.Or(error, z3.Not(value)))
    result = AssertionResult(assertion.name, place, tool, "holds",
                             f"every call of {tool} the gate lets through keeps "
                             f"{assertion.name}", not_analysed=notes)
    answer, found = solver.solve(violated)
    if answer == "unsat":
        return result
    if answer != "sat" or found is None:
        result.status, result.message = "unknown", f"{assertion.name} on {tool}: {answer}"
        return result
    unknowns = [*model.opaque, *(o for o in encoder.used if o not in model.opaque)]
    free = free_unknowns(unknowns)
    question = z3.ForAll(free, violated) if free else violated
    definite = True
    if free:
        firm, firm_model = solver.solve(question)
        if firm not in ("sat", "unsat"):  # out of time: not "unproved", which is an answer
            result.status = "unknown"
            result.message = f"{assertion.name} on {tool}: {firm}"
            return result
        definite = firm == "sat" and firm_model is not None
        found = firm_model if definite else found
    # a conditional call reads best with the unknowns true or false, not errors
    no_errors = [] if definite else [z3.Not(o.error) for o in unknowns
                                     if z3.is_const(o.error) and not z3.is_false(o.error)]
    nicer, nicer_model = solver.solve(question if definite else violated,
                                      *niceties(config, tool, [model]), *no_errors)
    if nicer == "sat" and nicer_model is not None:
        found = nicer_model
    assert found is not None
    call = concrete_call(config, tool, [model], found)
    result.call = call
    result.route = ("execute" if z3.is_true(found.eval(model.route("execute"),
                                                       model_completion=True))
                    else "await_confirmation")
    result.rules = involved(model, assertion, found)
    if definite:
        result.status = "broken"
        result.message = (f"a call of {tool} the gate lets through ({result.route}) breaks "
                          f"{assertion.name}")
        result.gate = decided(config, call)
        if result.gate is not None:
            result.holds_on_call = evaluate(config, assertion, call, result.gate[0])
    else:
        result.status = "unproved"
        result.message = (f"{assertion.name} on {tool} is not proved: a call breaks it if "
                          "parts the analysis does not encode come out as below")
        result.conditions = [f"{o.text} is {shown_value(found, o)} ({o.what})"
                             for o in unknowns if mentions(violated, o)]
    return result


def involved(model: ToolModel, assertion: Assertion, found: z3.ModelRef) -> list[str]:
    """The rules that let the call through (the allow rules that match it) and the
    enforced rules that read a field the assertion reads, each with its place."""
    lookups = model.lookups
    alias = lookups[0].name if len(lookups) == 1 else None
    reads = {(alias, *path[1:]) if alias and path[0] == "record" else path
             for path in assertion.expression.references}
    named: list[str] = []
    for verdict in model.verdicts:
        if verdict.mode != "enforce":
            continue
        holds = z3.is_true(found.eval(verdict.holds, model_completion=True))
        if verdict.kind == "allow" and holds:
            named.append(f"{verdict.name} at {verdict.location}: allows the call")
        elif reads & verdict.reads:
            state = "holds" if holds else "fails"
            if verdict.kind == "deny":
                state = "matches" if holds else "does not match"
            shared = ", ".join(sorted(".".join(p) for p in reads & verdict.reads))
            named.append(f"{verdict.name} at {verdict.location}: {state} (reads {shared})")
    return named


def evaluate(config: GateConfig, assertion: Assertion, call: Call,
             gate_route: str) -> bool | None:
    """The assertion evaluated by the gate's CEL on ``call`` with the route the gate
    took: True, False, or None when evaluating it is an error."""
    variables: dict[str, Any] = {"args": call.arguments, "actor": call.actor,
                                 "session": call.session, "tool": call.tool,
                                 "route": gate_route}
    lookups = config.contracts[call.tool].lookups
    for lookup in lookups:
        try:
            key = lookup.key(variables)
        except CelEvaluationError:
            continue
        records = [r for r in call.world.get(lookup.collection, ())
                   if any(r.get(name) == key for name in lookup.fields)]
        if records:
            variables[lookup.name] = records[0]
    if len(lookups) == 1 and lookups[0].name in variables:
        variables["record"] = variables[lookups[0].name]
    try:
        return assertion.expression(variables) is True
    except CelEvaluationError:
        return None
