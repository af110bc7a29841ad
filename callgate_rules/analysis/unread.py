"""``unread-field`` findings: rules that hold for any value of a field they never read,
where the configuration itself shows the field matters.

"A field the rule never reads when it should" is read two ways, each only on evidence the
configuration gives, so a finding is never a guess about names:

- **a tie field left unread**: some enforced rule of the configuration compares a
  record's field with the actor's field of the same name (``ticket.tenant ==
  actor.tenant``): that field ties records to actors. A tool whose look-up's record
  declares that field (and the actor schema too, of the same type), where no enforced rule
  of the tool reads it, lets a record whose field differs from the actor's through — the
  solver finds such a call, and ``Gate.check`` decides it. The look-up's key field is never
  such a field (finding the record by it is reading it).
- **an unbounded argument**: an argument that no schema keyword bounds (numbers: minimum,
  maximum, enum, const; strings: enum, const, maxLength, pattern, format) and no enforced
  rule of its tool reads, while an enforced rule of another tool reads the argument of the
  same name and type: the other tool's authors thought its value needed checking. The
  solver shows a call that gets through with a value no one bounded (a number of a
  million or more, where it can be had).
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from callgate_rules.analysis.encode import NotEncoded, Symbols
from callgate_rules.analysis.questions import (
    Finding,
    Solver,
    concrete_call,
    decided,
    niceties,
)
from callgate_rules.analysis.tool_model import ToolModel, Verdict, build
from callgate_rules.cel import syntax
from callgate_rules.documents.model import GateConfig

NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum",
                 "const")
STRING_BOUNDS = ("enum", "const", "maxLength", "pattern", "format")
LARGE = 1_000_000


@dataclass(frozen=True)
class Evidence:
    """An enforced rule reading a field: which rule, where, on which tool."""

    tool: str
    rule: str
    place: str


def unread_fields(config: GateConfig, *, timeout_ms: int) -> tuple[list[Finding], list[str]]:
    """The findings, and the questions the solver could not answer in time."""
    solver = Solver(timeout_ms)
    models = {tool: build(config, tool, {}) for tool in sorted(config.contracts)}
    ties = _tie_fields(models)
    argued = _read_arguments(models)
    findings: list[Finding] = []
    unknown: list[str] = []
    for tool, model in models.items():
        reads = {path for v in _enforced(model) for path in v.reads}
        for lookup in model.lookups:
            for name, evidence in sorted(ties.items()):
                if name in lookup.fields or (lookup.name, name) in reads:
                    continue
                found = _tie_question(config, model, lookup.name, name, solver, unknown)
                if found is not None:
                    found.place = str(lookup.location)
                    found.subject = f"{tool}: {lookup.name}.{name}"
                    found.message = (
                        f"no enforced rule of {tool} reads {lookup.name}.{name}, yet "
                        f"{evidence.rule} ({evidence.place}) ties records to actors by "
                        f"{name}: a call of {tool} gets through ({found.route}) with "
                        f"{lookup.name}.{name} unlike actor.{name}")
                    findings.append(found)
        for name, evidence in sorted(argued.items()):
            if evidence.tool == tool or ("args", name) in reads:
                continue
            found = _argument_question(config, model, name, evidence, solver, unknown)
            if found is not None:
                findings.append(found)
    return findings, unknown


def _enforced(model: ToolModel) -> list[Verdict]:
    return [v for v in model.verdicts if v.mode == "enforce"]


def _tie_fields(models: dict[str, ToolModel]) -> dict[str, Evidence]:
    """Field names some enforced rule reads both on the actor and on a record."""
    ties: dict[str, Evidence] = {}
    for tool, model in models.items():
        records = {lookup.name for lookup in model.lookups}
        for verdict in _enforced(model):
            actor = {path[1] for path in verdict.reads if len(path) == 2 and path[0] == "actor"}
            on_records = {path[1] for path in verdict.reads
                          if len(path) == 2 and path[0] in records}
            for name in sorted(actor & on_records):
                ties.setdefault(name, Evidence(tool, verdict.name, str(verdict.location)))
    return ties


def _read_arguments(models: dict[str, ToolModel]) -> dict[str, Evidence]:
    """Argument names an enforced rule of some tool reads (the first rule found)."""
    argued: dict[str, Evidence] = {}
    for tool, model in models.items():
        for verdict in _enforced(model):
            for path in sorted(verdict.reads):
                if len(path) == 2 and path[0] == "args":
                    argued.setdefault(path[1], Evidence(tool, verdict.name,
                                                        str(verdict.location)))
    return argued


def _same_kind(symbols: Symbols, first: tuple[str, ...], second: tuple[str, ...]) -> bool:
    try:
        return (symbols.variable(first, syntax.Position()).kind
                == symbols.variable(second, syntax.Position()).kind)
    except NotEncoded:
        return False


def _tie_question(config: GateConfig, model: ToolModel, lookup: str, name: str,
                  solver: Solver, unknown: list[str]) -> Finding | None:
    record, actor = (lookup, name), ("actor", name)
    if not _same_kind(model.symbols, record, actor):
        return None
    field_var = model.symbols.variables[record]
    actor_var = model.symbols.variables[actor]
    question = z3.And(model.symbols.domain(), _through(model), field_var.present,
                      actor_var.present, field_var.term != actor_var.term)
    return _shown(config, model, question, solver, unknown,
                  f"{model.tool}: unread-field {lookup}.{name}")


def _argument_question(config: GateConfig, model: ToolModel, name: str, evidence: Evidence,
                       solver: Solver, unknown: list[str]) -> Finding | None:
    path = ("args", name)
    schema = model.symbols.schema_at(path)
    if schema is None or evidence.tool not in config.contracts:
        return None
    other = build(config, evidence.tool, {})
    if not _same_kind(model.symbols, path, path) or not _same_kind(other.symbols, path, path):
        return None
    var = model.symbols.variables[path]
    if var.kind != other.symbols.variables[path].kind:
        return None
    bounds = STRING_BOUNDS if var.kind == "string" else NUMBER_BOUNDS
    if var.kind == "bool" or any(key in schema for key in bounds):
        return None
    question = z3.And(model.symbols.domain(), _through(model), var.present)
    large = ([var.term >= LARGE] if var.kind == "int" else
             [var.term >= z3.RealVal(LARGE)] if var.kind == "double" else [])
    found = _shown(config, model, question, solver, unknown,
                   f"{model.tool}: unread-field args.{name}", large)
    if found is not None:
        found.subject = f"{model.tool}: args.{name}"
        found.place = str(config.contracts[model.tool].document.location)
        found.message = (f"args.{name} of {model.tool} is bounded by no schema keyword and "
                         f"read by no enforced rule, while {evidence.rule} of "
                         f"{evidence.tool} ({evidence.place}) checks args.{name}: a call "
                         f"of {model.tool} gets through ({found.route}) whatever its "
                         f"{name}")
    return found


def _through(model: ToolModel) -> z3.BoolRef:
    return z3.Or(model.route("execute"), model.route("await_confirmation"))


def _shown(config: GateConfig, model: ToolModel, question: z3.BoolRef, solver: Solver,
           unknown: list[str], label: str, wishes: list[z3.BoolRef] | None = None
           ) -> Finding | None:
    """A finding with the call the solver shows for ``question`` (the caller says what it
    means), or None when no call gets through. The not-analysed parts must hold for every
    value, so a finding never rests on one of them."""
    free = [t for o in model.opaque for t in (o.value, o.error)
            if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED]
    firm = z3.ForAll(free, question) if free else question
    answer, found = solver.solve(firm)
    if answer != "sat" or found is None:
        if answer != "unsat":
            unknown.append(f"{label}: {answer}")
        return None
    for extra in ([*(wishes or []), *niceties(config, model.tool, [model])], wishes or []):
        nicer, nicer_model = solver.solve(firm, *extra)
        if nicer == "sat" and nicer_model is not None:
            found = nicer_model
            break
    call = concrete_call(config, model.tool, [model], found)
    route = ("execute" if z3.is_true(found.eval(model.route("execute"), model_completion=True))
             else "await_confirmation")
    return Finding(model.tool, "unread-field", label, "", "", call, route,
                   decided(config, call))
