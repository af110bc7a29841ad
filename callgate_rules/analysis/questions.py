"""The questions ``callgate analyze`` asks the solver, and concrete calls from its answers.

``diff``: for each tool, a call whose route differs between two configurations. A
difference that holds whatever the not-analysed parts say is *definite* (z3 proves it for
every value of the unknowns); one that needs them to take some value is *conditional*, and
names them. "Equivalent" is proved with the unknowns free, so it never rests on a guess.

``check``: findings that hold for every call (a rule that can never fail or never hold, an
allow rule a deny always shadows, a tool no call can execute). Each is an unsatisfiable
question with the unknowns free, so the not-analysed parts can only hide a finding, never
invent one.

Every question has its own time limit (z3's ``timeout``); a timeout is reported as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from callgate_rules.analysis.encode import Opaque, Variable
from callgate_rules.analysis.tool_model import ROUTES, NotAnalysed, ToolModel, build
from callgate_rules.documents.model import GateConfig
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.gate import Gate

DEFAULT_TIMEOUT_MS = 10_000


@dataclass
class Call:
    """A concrete call: what to propose, as whom, with which records in which
    collections."""

    tool: str
    arguments: dict[str, Any]
    actor: dict[str, Any]
    session: dict[str, Any]
    world: dict[str, list[dict[str, Any]]]
    valid: bool = True  # the values pass every schema (jsonschema agrees)


@dataclass
class Difference:
    tool: str
    old_route: str
    new_route: str
    definite: bool
    call: Call
    deciding: list[str]  # the rules whose verdict differs, or that decide
    conditions: list[str] = field(default_factory=list)  # unknowns it needs, conditional
    # what the gates decide on the call (Gate.check): route and deciding rule, OLD and NEW
    gate_old: tuple[str, str | None] | None = None
    gate_new: tuple[str, str | None] | None = None

    @property
    def confirmed(self) -> bool:
        """The gates decide the call as the analysis said (a definite difference must)."""
        return (self.gate_old is not None and self.gate_new is not None
                and outcome(self.gate_old[0]) == self.old_route
                and outcome(self.gate_new[0]) == self.new_route)


@dataclass
class ToolDiff:
    tool: str
    status: str  # equivalent, different, unknown, added, removed
    differences: list[Difference] = field(default_factory=list)
    not_analysed: list[NotAnalysed] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # questions without an answer


@dataclass
class Finding:
    tool: str
    kind: str  # dead-rule, never-holds, shadowed-allow, never-matches, uncallable,
    # unread-field (``unread``)
    subject: str
    place: str
    message: str
    call: Call | None = None  # a call that shows it, when one does
    route: str | None = None  # the route the analysis says ``call`` takes
    gate: tuple[str, str | None] | None = None  # what Gate.check decides on ``call``


@dataclass
class CheckReport:
    findings: list[Finding]
    not_analysed: list[NotAnalysed]
    unknown: list[str]


class Solver:
    def __init__(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.timeout_ms = timeout_ms

    def solve(self, *facts: Any) -> tuple[str, z3.ModelRef | None]:
        """"sat" with a model, "unsat", or "timeout"/"unknown"."""
        solver = z3.Solver()
        solver.set("timeout", self.timeout_ms)
        solver.add(*facts)
        answer = solver.check()
        if answer == z3.sat:
            return "sat", solver.model()
        if answer == z3.unsat:
            return "unsat", None
        reason = solver.reason_unknown()
        return ("timeout" if "timeout" in reason or "canceled" in reason else
                f"unknown ({reason})"), None


def free_unknowns(opaque: Sequence[Opaque]) -> list[z3.ExprRef]:
    consts: list[z3.ExprRef] = []
    for item in opaque:
        consts.extend(t for t in (item.value, item.error) if z3.is_const(t)
                      and t.decl().kind() == z3.Z3_OP_UNINTERPRETED)
    return consts


def diff(old: GateConfig, new: GateConfig, *, timeout_ms: int = DEFAULT_TIMEOUT_MS,
         tools: Sequence[str] | None = None) -> list[ToolDiff]:
    solver = Solver(timeout_ms)
    names = sorted(set(old.contracts) | set(new.contracts))
    results: list[ToolDiff] = []
    for tool in names if tools is None else [t for t in names if t in tools]:
        if tool not in old.contracts or tool not in new.contracts:
            results.append(ToolDiff(tool, "added" if tool in new.contracts else "removed"))
            continue
        shared: dict[str, Opaque] = {}
        before, after = build(old, tool, shared), build(new, tool, shared)
        report = ToolDiff(tool, "equivalent", not_analysed=_unique(
            before.not_analysed + after.not_analysed))
        unknowns = [*before.opaque, *(o for o in after.opaque if o not in before.opaque)]
        for old_route in ROUTES:
            for new_route in ROUTES:
                if old_route == new_route:
                    continue
                question = z3.And(before.route(old_route), after.route(new_route))
                answer, model = solver.solve(question)
                if answer != "sat" or model is None:
                    if answer != "unsat":
                        report.unknown.append(f"{old_route} → {new_route}: {answer}")
                    continue
                definite = True
                free = free_unknowns(unknowns)
                if free:
                    firm, firm_model = solver.solve(z3.ForAll(free, question))
                    definite = firm == "sat" and firm_model is not None
                    model = firm_model if definite else model
                assert model is not None
                nicer, nicer_model = solver.solve(
                    z3.ForAll(free, question) if definite and free else question,
                    *niceties(new, tool, [before, after]))
                if nicer == "sat" and nicer_model is not None:
                    model = nicer_model
                call = concrete_call(new, tool, [before, after], model)
                conditions = [] if definite else [
                    f"{o.text} is {shown_value(model, o)} ({o.what})"
                    for o in unknowns if mentions(question, o)]
                report.differences.append(Difference(
                    tool, old_route, new_route, definite, call,
                    _deciding(before, after, model), conditions,
                    decided(old, call), decided(new, call)))
        if report.differences:
            report.status = "different"
        elif report.unknown:
            report.status = "unknown"
        results.append(report)
    return results


def check(config: GateConfig, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> CheckReport:
    solver = Solver(timeout_ms)
    findings: list[Finding] = []
    notes: list[NotAnalysed] = []
    unknown: list[str] = []

    def never(tool: str, question: Any, finding: Finding) -> bool:
        answer, _ = solver.solve(question)
        if answer == "unsat":
            findings.append(finding)
            return True
        if answer != "sat":
            unknown.append(f"{tool}: {finding.kind} {finding.subject}: {answer}")
        return False

    for tool in sorted(config.contracts):
        model = build(config, tool, {})
        notes.extend(model.not_analysed)
        ways = z3.Or(model.route("execute"), model.route("await_confirmation"))
        place = str(config.contracts[tool].document.location)
        let_in = z3.And(model.reached, model.authorized)
        if never(tool, ways, Finding(tool, "uncallable", tool, place,
                                     f"no call of {tool} can ever execute or await "
                                     "confirmation, whoever the actor")):
            if solver.solve(let_in)[0] == "unsat":
                findings[-1].message += ": no allow rule can match without a deny matching"
                continue
        denies = [v.holds for v in model.verdicts if v.kind == "deny" and v.mode == "enforce"]
        for verdict in model.verdicts:
            if verdict.mode != "enforce":
                continue
            where = str(verdict.location)
            if verdict.kind == "allow":
                if not never(tool, z3.And(model.reached, verdict.holds),
                             Finding(tool, "never-matches", verdict.name, where,
                                     f"allow rule {verdict.name} can never match a valid "
                                     f"call of {tool}")):
                    never(tool, z3.And(model.reached, verdict.holds, z3.Not(z3.Or(*denies))),
                          Finding(tool, "shadowed-allow", verdict.name, where,
                                  f"allow rule {verdict.name} never lets a call of {tool} "
                                  "through: a deny rule matches whenever it does"))
            elif verdict.kind == "rule":
                never(tool, z3.And(let_in, z3.Not(verdict.holds)),
                      Finding(tool, "dead-rule", verdict.name, where,
                              f"rule {verdict.name} can never fail on a call that reaches "
                              "it: it checks nothing"))
                outcome = ("every call waits for a person's confirmation" if verdict.confirms
                           else f"the tool {tool} is unusable")
                never(tool, z3.And(let_in, verdict.holds),
                      Finding(tool, "never-holds", verdict.name, where,
                              f"rule {verdict.name} can never hold on a call that reaches "
                              f"it: {outcome}"))
    return CheckReport(findings, _unique(notes), unknown)


def outcome(route: str) -> str:
    """The analysis's three outcomes from a gate's route."""
    return route if route in ("execute", "await_confirmation") else "refused"


def decided(config: GateConfig, call: Call) -> tuple[str, str | None] | None:
    """What ``Gate.check`` decides on ``call`` (its records served from memory), or None
    when its values do not pass a schema the analysis does not fully encode."""
    if not call.valid:
        return None
    gate = Gate(config, resolvers=WorldResolvers(call.world))
    decision = gate.check({"name": call.tool, "arguments": call.arguments},
                          actor=call.actor, session=call.session or None)
    return str(decision.route), decision.rule


def niceties(config: GateConfig, tool: str, sides: Sequence[ToolModel]) -> list[Any]:
    """What makes a call easier to read and to replay, asked for only when it can be had:
    a string with a ``pattern`` or ``format`` (which the analysis does not encode) takes
    the contract's example value, any other string is not empty, a double is whole."""
    examples = config.contracts[tool].examples
    shown = dict(examples[0].arguments) if examples else {}
    wishes: list[Any] = []
    for side in sides:
        for path, var in side.symbols.variables.items():
            if var.kind == "double":  # a whole number is a double exactly; 1/3 is not
                wishes.append(z3.IsInt(var.term))
            if var.kind != "string":
                continue
            example = shown.get(path[1]) if path[0] == "args" and len(path) == 2 else None
            if ("pattern" in var.schema or "format" in var.schema) and isinstance(example, str):
                wishes.append(var.term == z3.StringVal(example))
            else:
                wishes.append(z3.Length(var.term) > 0)
    return wishes


def _unique(notes: list[NotAnalysed]) -> list[NotAnalysed]:
    return list(dict.fromkeys(notes))


def mentions(question: z3.ExprRef, item: Opaque) -> bool:
    text = question.sexpr()
    return any(z3.is_const(t) and str(t.decl().name()) in text
               for t in (item.value, item.error)
               if t.decl().kind() == z3.Z3_OP_UNINTERPRETED)


def shown_value(model: z3.ModelRef, item: Opaque) -> str:
    if z3.is_true(model.eval(item.error, model_completion=True)):
        return "an error"
    return "true" if z3.is_true(model.eval(item.value, model_completion=True)) else "false"


def _deciding(before: ToolModel, after: ToolModel, model: z3.ModelRef) -> list[str]:
    """The rules whose verdict differs between the configurations on this call, or, where
    the same rules judge differently only through the schemas, each side's failing ones."""
    def verdicts(side: ToolModel) -> dict[str, bool]:
        return {v.name: z3.is_true(model.eval(v.holds, model_completion=True))
                for v in side.verdicts if v.mode == "enforce"}
    old, new = verdicts(before), verdicts(after)
    named: list[str] = []
    for name in dict.fromkeys([*old, *new]):
        if old.get(name) != new.get(name):
            was = {None: "absent", True: "holds", False: "fails"}
            named.append(f"{name}: {was[old.get(name)]} in OLD, {was[new.get(name)]} in NEW")
    for side, label in ((before, "OLD"), (after, "NEW")):
        if not z3.is_true(model.eval(side.reached, model_completion=True)):
            named.append(f"{label}: the call does not pass the schemas or find its records")
    return named


def concrete_call(config: GateConfig, tool: str, sides: Sequence[ToolModel],
                  model: z3.ModelRef) -> Call:
    """The call ``model`` describes, with every present variable's value."""
    values: dict[str, dict[str, Any]] = {}
    for side in sides:
        for path, var in side.symbols.variables.items():
            if z3.is_true(model.eval(var.present, model_completion=True)):
                _put(values.setdefault(path[0], {}), path[1:], _value(model, var))
    lookups = {lk.name: lk for side in sides for lk in side.lookups}
    world: dict[str, list[dict[str, Any]]] = {}
    for name, lookup in lookups.items():
        record = values.get(name)
        if record and lookup.fields[0] in record:
            record.setdefault("id", f"{lookup.collection}-1")
            world.setdefault(lookup.collection, []).append(record)
    contract = config.contracts[tool]
    arguments, actor = values.get("args", {}), values.get("actor", {})
    session = values.get("session", {})
    valid = not any(contract.validator.iter_errors(arguments))
    if config.policies.actor_validator is not None:
        valid = valid and not any(config.policies.actor_validator.iter_errors(actor))
    return Call(tool, arguments, actor, session, world, valid)


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value


def _value(model: z3.ModelRef, var: Variable) -> Any:
    found = model.eval(var.term, model_completion=True)
    if var.kind == "int":
        return found.as_long()
    if var.kind == "double":
        fraction = found.as_fraction()
        return float(fraction)
    if var.kind == "string":
        return found.as_string()
    return z3.is_true(found)

