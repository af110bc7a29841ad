"""Every expression's worst-case cost, estimated from declared bounds and held to a limit.

``cel.cost`` does the estimating (Kubernetes' model: a comprehension costs its body times
the size of its range); this module says what each variable may hold where an expression
runs, and finds the place: file:line:col of the comprehension that costs most, inside the
expression. An expression whose estimate is over the limit (``cel-cost``, an error) is
refused; the finding gives the estimate, the limit, the ranges it runs over, and for each
input whose size no schema bounds, the keyword to add and where.

The limit is the RoutingTable's ``spec.cel.cost_limit`` (``DEFAULT_COST_LIMIT`` without
one); sizes nothing declares are taken from its ``spec.input`` limits (the parse step's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from callgate_rules.authoring.lint.expressions import (
    ExpressionPlace,
    access_expressions,
    contract_expressions,
)
from callgate_rules.cel import cost
from callgate_rules.cel.cost import DEFAULT_COST_LIMIT, Declared, Estimate, Fallback, Value
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.model import Contract, InputLimits
from callgate_rules.pipeline.lookups import MAX_RECORDS
from callgate_rules.store.history import HISTORY_LIMIT

CODE = "cel-cost"


# What callgate's own variables are assumed to hold when telling whether an expression is
# over the limit only because of them (``_over``).
_ONE = Fallback(1, 1, 1)


def check_cost(compilation: Compilation) -> Iterator[Finding]:
    limit, fallback = limits(compilation)
    for contract in compilation.contracts.values():
        variables = variable_values(compilation, contract, fallback)
        for place in contract_expressions(compilation, contract):
            found = _estimated(place, variables, fallback)
            if found is not None and found.cost > limit:
                yield _over(compilation, contract, place, found, limit, fallback, place.label)
    yield from _access_findings(compilation, limit, fallback)


def _over(compilation: Compilation, contract: Contract, place: ExpressionPlace,
          found: Estimate, limit: int, fallback: Fallback, label: str) -> Finding:
    """The finding of an expression over the limit: an error, unless it is over only
    because of what callgate makes from the conversation (``reads``, ``origins``,
    ``provenance``, the inside of ``history``), whose size no document can bound: then a
    note, as the run-time budget is what bounds it."""
    alone = _estimated(place, variable_values(compilation, contract, fallback, _ONE),
                       fallback)
    if alone is not None and alone.cost <= limit:
        return _finding(place, found, limit, label, "note")
    return _finding(place, found, limit, label)


def limits(compilation: Compilation) -> tuple[int, Fallback]:
    """The configuration's cost limit and the sizes assumed where none is declared (a value
    the RoutingTable's schema refuses counts as absent: its own finding says so)."""
    spec: Any = {}
    if compilation.routing_source is not None:
        data = compilation.routing_source.data
        spec = data.get("spec") if isinstance(data, Mapping) else {}
    defaults = InputLimits()
    cel, given = (_section(spec, name) for name in ("cel", "input"))
    return (_positive(cel.get("cost_limit"), DEFAULT_COST_LIMIT),
            Fallback.of(_positive(given.get("max_bytes"), defaults.max_bytes),
                        _positive(given.get("max_string_length"), defaults.max_string_length)))


def _section(spec: Any, name: str) -> Mapping[str, Any]:
    found = spec.get(name) if isinstance(spec, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _positive(value: Any, default: int) -> int:
    return (value if isinstance(value, int) and not isinstance(value, bool) and value > 0
        else default)


def _access_findings(compilation: Compilation, limit: int,
                     fallback: Fallback) -> Iterator[Finding]:
    """An access rule runs for each tool it applies to: its cost is the highest of them."""
    worst: dict[tuple[str, int, int], tuple[ExpressionPlace, Estimate]] = {}
    values: dict[str, Mapping[str, Value]] = {}
    for place in access_expressions(compilation):
        if place.tool not in values:
            values[place.tool] = variable_values(
                compilation, compilation.contracts[place.tool], fallback)
        found = _estimated(place, values[place.tool], fallback)
        location = place.location
        key = (location.path, location.line, location.column)
        if found is not None and (key not in worst or found.cost > worst[key][1].cost):
            worst[key] = (place, found)
    for place, found in worst.values():
        if found.cost > limit:
            yield _over(compilation, compilation.contracts[place.tool], place, found, limit,
                        fallback, f"{place.label} (for {place.tool})")


def _estimated(place: ExpressionPlace, variables: Mapping[str, Value],
               fallback: Fallback) -> Estimate | None:
    tree = place.expression.tree
    if tree is None:
        return None  # did not compile: the compiler's finding says why
    known = {name: value for name, value in variables.items() if name in place.allowed}
    if place.record is not None:
        known["record"] = _record(place.record.record_schema, place.record.name, fallback)
    try:
        return cost.estimate(tree, known)
    except RecursionError:  # nested past Python's stack: the compiler has its own finding
        return None


def _finding(place: ExpressionPlace, found: Estimate, limit: int, label: str,
             severity: str = "error") -> Finding:
    loop = found.costliest
    line, column = (loop.at.line, loop.at.column) if loop is not None else (1, 1)
    location = place.source.locate_in_scalar(place.path, line, column)
    ranges = ", ".join(cost.sizes(found))
    message = (f"{label}: the estimated worst-case cost of this expression is "
               f"{found.cost:,} operations, over the limit of {limit:,} (RoutingTable "
               f"spec.cel.cost_limit)")
    if ranges:
        message += f"; its comprehensions run over {ranges}"
    advice = [reason.advice() for reason in found.unbounded]
    if advice:
        message += ". " + "; ".join(advice)
    if severity == "note":
        message += (". What makes it so is callgate's own data about the conversation "
                     "(reads, origins, provenance, history), which no schema bounds: the "
                     "run-time budget of each evaluation does")
        return Finding(location, severity, CODE, message)
    message += (". Bound it: declare a smaller maxItems (or maxLength, maxProperties; "
                "max_records on a many: list look-up) on what the comprehensions run over, "
                "or nest fewer comprehensions over it")
    return Finding(location, severity, CODE, message)


# What each variable may hold -----------------------------------------------------------------


def variable_values(compilation: Compilation, contract: Contract, fallback: Fallback,
                    made: Fallback | None = None) -> dict[str, Value]:
    """What bounds each variable a contract's expressions may read (as ``typecheck``'s
    ``variable_types`` types them). ``made``: the sizes assumed inside what callgate makes
    from the conversation (``fallback`` unless given)."""
    made = made or fallback
    arguments = Declared(contract.arguments_schema, "args",
                         f"the arguments schema of {contract.name} (spec.arguments)", fallback)
    values: dict[str, Value] = {
        "args": arguments,
        "actor": Declared(compilation.actor_schema, "actor",
                          "the AccessPolicy's actor schema (spec.actor)", fallback),
        "session": Declared(compilation.session_schema, "session",
                            "the AccessPolicy's session schema (spec.session)", fallback),
        # callgate keeps the newest HISTORY_LIMIT entries; their arguments passed the parse
        # step
        "history": Declared({"type": "array", "items": {"type": "object"}}, "history", None,
                            made, cap=HISTORY_LIMIT),
        "result": Declared(contract.result_schema, "result",
                           f"the result schema of {contract.name} (spec.result)", fallback),
    }
    for name in ("provenance", "origins", "reads", "found", "item", "intent"):
        # made by callgate from the arguments and the conversation: nothing to declare
        values[name] = Declared(None, name, None, made)
    for lookup in contract.lookups:
        record = _record(lookup.record_schema, lookup.name, fallback)
        if lookup.many == "list":
            values[lookup.name] = Declared(
                {"type": "array", "items": lookup.record_schema or {}}, lookup.name,
                f"the schema of look-up {lookup.name} (spec.lookups[].schema)", fallback,
                cap=lookup.max_records or MAX_RECORDS)
        else:
            values[lookup.name] = record
    return values


def _record(schema: Mapping[str, Any] | None, name: str, fallback: Fallback) -> Declared:
    return Declared(schema, name, f"the schema of look-up {name} (spec.lookups[].schema)",
                    fallback)
