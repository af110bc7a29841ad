"""How the type checker types CEL's macros: the comprehensions (one and two variables),
``cel.bind``, ``sortBy``, the optionals' ``optMap`` and ``optFlatMap`` (``has`` is the
checker's own: it reads a field without guarding it).

A comprehension binds its variables with the range's element types: over ``list(T)`` the
variable is a ``T`` (with two variables, the index is an ``int``), over ``map(K, V)`` it is
the key ``K`` (with two, the key and the value), over an object it is the field name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from callgate_rules.cel import syntax
from callgate_rules.cel import types as t
from callgate_rules.cel.types import Type

# name → (variables, arguments after the variables): the arities each macro has
_SHAPES: Mapping[str, tuple[tuple[int, int], ...]] = {
    "all": ((1, 1), (2, 1)), "exists": ((1, 1), (2, 1)), "exists_one": ((1, 1), (2, 1)),
    "existsOne": ((1, 1), (2, 1)), "filter": ((1, 1),), "map": ((1, 1), (1, 2)),
    "sortBy": ((1, 1),), "transformList": ((2, 1), (2, 2)), "transformMap": ((2, 1), (2, 2)),
    "transformMapEntry": ((2, 1), (2, 2)), "optMap": ((1, 1),), "optFlatMap": ((1, 1),),
}
_PREDICATES = frozenset({"all", "exists", "exists_one", "existsOne"})


class MacroHost(Protocol):
    """What the macros need of the checker: a node's type, and a place to report."""

    def node_type(self, node: syntax.Node, scope: Mapping[str, Type]) -> Type: ...

    def report(self, node: syntax.Node, severity: str, code: str, message: str,
               suggestion: str | None = None) -> None: ...


def check_macro(host: MacroHost, node: syntax.Macro, scope: Mapping[str, Type]) -> Type:
    """The type of the macro ``node``; its problems reported to ``host``."""
    if node.name in ("cel.bind", "bind") and len(node.args) == 3:
        name = _variable(node.args[0])
        bound = host.node_type(node.args[1], scope)
        inner = {**scope, name: bound} if name else scope
        return host.node_type(node.args[2], inner)
    shapes = _SHAPES.get(node.name)
    if node.target is None or shapes is None:
        for part in syntax.children(node):
            host.node_type(part, scope)
        return t.DYN
    return _comprehension(host, node, scope, shapes)


def _comprehension(host: MacroHost, node: syntax.Macro, scope: Mapping[str, Type],
                   shapes: tuple[tuple[int, int], ...]) -> Type:
    assert node.target is not None
    range_type = host.node_type(node.target, scope)
    count = next((v for v, rest in shapes if v + rest == len(node.args)), None)
    if count is None:
        for part in node.args:
            host.node_type(part, scope)
        return t.DYN
    variables = [_variable(argument) for argument in node.args[:count]]
    bound = _bound_types(host, node, range_type, count)
    inner = dict(scope)
    for name, type_ in zip(variables, bound, strict=True):
        if name:
            inner[name] = type_
    results = [host.node_type(part, inner) for part in node.args[count:]]
    if len(results) == 2 or node.name in _PREDICATES or node.name == "filter":
        condition, part = results[0], node.args[count]  # the predicate, or map's filter
        if not (condition.is_dyn or condition.kind == "bool"):
            host.report(part, "error", "not-a-condition",
                        f"the condition of {node.name} is {t.describe(condition)}, not a bool")
    return _result(node.name, range_type, bound, results[-1])


def _bound_types(host: MacroHost, node: syntax.Macro, range_type: Type,
                 count: int) -> list[Type]:
    """The types of the comprehension's variables over ``range_type``."""
    kind = range_type.kind
    if range_type.is_dyn:
        return [t.DYN] * count
    if node.name in ("optMap", "optFlatMap"):
        return [range_type.parameters[0] if kind == "optional_type" else t.DYN]
    if kind == "list":
        element = range_type.parameters[0]
        return [element] if count == 1 else [t.INT, element]
    if kind == "map":
        key, value = range_type.parameters
        return [key] if count == 1 else [key, value]
    if kind == "object":
        return [t.STRING] if count == 1 else [t.STRING, t.DYN]
    assert node.target is not None
    host.report(node, "error", "no-overload",
                f"{node.name} runs over a list or a map; its range is "
                f"{t.describe(range_type)} here")
    return [t.DYN] * count


def _result(name: str, range_type: Type, bound: list[Type], last: Type) -> Type:
    if name in _PREDICATES:
        return t.BOOL
    if name == "optMap":
        return t.optional_of(last)
    if name == "optFlatMap":
        return last
    if name == "filter":
        return t.list_of(bound[0]) if range_type.kind != "list" else range_type
    if name == "sortBy":
        return range_type if range_type.kind == "list" else t.DYN
    if name in ("map", "transformList"):
        return t.list_of(last)
    if name == "transformMap":
        key = t.INT if range_type.kind == "list" else bound[0]
        return t.map_of(key, last)
    return t.map_of(t.DYN, t.DYN)


def _variable(node: syntax.Node) -> str | None:
    return node.name if isinstance(node, syntax.Ident) else None
