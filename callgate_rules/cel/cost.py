"""The worst-case cost of a CEL expression, estimated when it is loaded, from declared bounds.

Kubernetes' model (cel-go's ``checker/cost.go``), in spirit: every node of the expression
costs one operation; a comprehension (``all``, ``exists``, ``exists_one``, ``map``,
``filter``, ``sortBy``, the two-variable forms) costs its range plus, for each element the
range may hold, one pass of its body, so nested comprehensions multiply; string operations
that scan a text (``contains``, ``matches``, ``split``...) cost a tenth of an operation per
code point they may scan (cel-go's traversal factor), ``in`` on a list and list functions
one per element; comparing two texts is one operation (one memory comparison here). The
run-time meter (``compiler.runtime.cost``) charges in the same unit.

Sizes come from what bounds each input (``Value``):

- a JSON Schema's ``maxItems``, ``maxLength`` and ``maxProperties`` (or a closed object's
  property count) where one is declared: the arguments (``args``), each look-up's record
  schema, the actor and session schemas, a contract's ``spec.result``;
- callgate's own limits: a run's ``history`` keeps at most ``HISTORY_LIMIT`` entries, a
  look-up with ``many: list`` at most ``MAX_RECORDS`` records;
- where nothing is declared, the parse step's hard limits (``Fallback``): no list longer
  than ``max_bytes / 2`` elements, no string longer than ``max_string_length``. For the
  arguments that is a true bound (the parse step refuses anything bigger); for data that
  does not pass through it (records, the actor, results) it is an assumption, which the
  run-time budget backs. Each size taken from the fallback is an ``Unbounded``: the
  finding says where to declare the bound.

The estimate is an upper bound of the work, not a prediction: ``exists`` is priced as if
it never stopped early, both sides of ``&&`` and ``||`` as if neither decided.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate_rules.cel import syntax
from callgate_rules.cel.bounds import MOST_RANGE

# cel-go's common.StringTraversalCostFactor: scanning ten code points costs one operation.
STRING_TRAVERSAL = 0.1
# The default limit of the estimate, per expression: equal to the run-time budget
# (``compiler.runtime.cost.RUNTIME_BUDGET``), so an expression lint accepts is not stopped
# at run time while its inputs keep to their declared bounds.
DEFAULT_COST_LIMIT = 1_000_000

_LOOPS = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter",
                    "transformList", "transformMap", "transformMapEntry", "sortBy"})
# The functions whose work grows with the size of a value: the estimate prices them by the
# sizes their operands may have, and the run-time meter charges them by the sizes they have
# (``compiler.codegen`` wraps their operands in ``runtime.cost.scanned``).
STRING_SCANS = frozenset({"contains", "startsWith", "endsWith", "indexOf", "lastIndexOf",
                           "lowerAscii", "upperAscii", "replace", "split", "substring",
                           "trim", "charAt", "reverse", "format", "strings.quote", "matches",
                           "find", "findAll", "string", "bytes", "base64.encode",
                           "base64.decode"})
LIST_SCANS = frozenset({"sort", "distinct", "flatten", "join", "slice", "sum", "min", "max",
                         "sets.contains", "sets.equivalent", "sets.intersects", "isSorted",
                         "indexOf", "lastIndexOf", "math.greatest", "math.least", "reverse"})
# The library's functions the estimate prices that are called on a dotted name
_NAMESPACED = frozenset(name for name in LIST_SCANS | STRING_SCANS | {"lists.range"}
                        if "." in name)
# How deep the estimate follows lists nested in lists for what a scan visits.
_NESTING = 8
_SAME_SIZE = frozenset({"sort", "distinct", "slice", "reverse", "lowerAscii", "upperAscii",
                        "trim", "substring"})


@dataclass(frozen=True)
class Fallback:
    """The sizes assumed where no bound is declared: the parse step's hard limits
    (``InputLimits``) as sizes. The shortest JSON list element is one digit and a comma,
    the shortest object member ``"":0,``."""

    items: int
    properties: int
    length: int

    @classmethod
    def of(cls, max_bytes: int, max_string_length: int) -> Fallback:
        return cls(max(max_bytes // 2, 1), max(max_bytes // 5, 1),
                   max(min(max_string_length, max_bytes), 1))


@dataclass(frozen=True)
class Unbounded:
    """An input whose size no bound declares: ``path`` as the expression reads it
    (``args.items``), the ``keyword`` that would bound it, ``where`` to write it, and the
    size assumed instead."""

    path: str
    keyword: str
    where: str
    assumed: int

    def advice(self) -> str:
        return (f"{self.path} has no {self.keyword}, so {self.assumed:,} is assumed (the "
                f"parse step's limits); add {self.keyword} to {self.path} in {self.where}")


@dataclass(frozen=True)
class Size:
    """An upper bound of ``size()`` of a value, and the inputs whose missing bound it
    assumes."""

    most: int
    unbounded: frozenset[Unbounded] = frozenset()


class Value:
    """What the estimate knows of a value: its kind where known (``list``, ``map``,
    ``string``), a bound of its size, and what its elements and fields are."""

    @property
    def kind(self) -> str | None:
        return None

    def size(self) -> Size:
        raise NotImplementedError

    def element(self) -> Value:
        """An element of a list, or a key of a map."""
        return Computed(None, Size(0))

    def entry(self) -> Value:
        """A value of a map (a list's element)."""
        return self.element()

    def field(self, name: str) -> Value:
        return Computed(None, Size(0))


@dataclass(frozen=True)
class Computed(Value):
    """A value the expression makes: its size is known from its parts."""

    made: str | None  # its kind
    known: Size
    parts: Value | None = None

    @property
    def kind(self) -> str | None:
        return self.made

    def size(self) -> Size:
        return self.known

    def element(self) -> Value:
        return self.parts if self.parts is not None else Computed(None, Size(0))


SCALAR = Computed(None, Size(1))


@dataclass(frozen=True)
class Declared(Value):
    """An input described by a JSON Schema (``None``: no schema, anything). ``where``: the
    document field to declare a bound in (``None``: the value is callgate's, nothing to
    declare); ``cap``: callgate's own bound on its count (history, look-up records)."""

    schema: Mapping[str, Any] | None
    path: str
    where: str | None
    fallback: Fallback
    cap: int | None = None

    @property
    def kind(self) -> str | None:
        schema = self.schema or {}
        declared = schema.get("type")
        types = set(declared) if isinstance(declared, list) else {declared}
        if "array" in types or "items" in schema or "maxItems" in schema:
            return "list"
        if "object" in types or "properties" in schema or "maxProperties" in schema:
            return "map"
        if "string" in types or "maxLength" in schema:
            return "string"
        return None if not types - {None} else "scalar"

    def size(self) -> Size:
        schema = self.schema or {}
        kind = self.kind
        if kind == "scalar":
            return Size(1)
        keyword, assumed = {"list": ("maxItems", self.fallback.items),
                            "map": ("maxProperties", self.fallback.properties),
                            "string": ("maxLength", self.fallback.length)}.get(
            kind or "", ("maxItems", max(self.fallback.items, self.fallback.length)))
        declared = schema.get(keyword)
        if (kind == "map" and declared is None and schema.get("additionalProperties") is False
                and not schema.get("patternProperties")):
            declared = len(schema.get("properties") or {})
        if isinstance(declared, int) and not isinstance(declared, bool):
            most = declared if self.cap is None else min(declared, self.cap)
            return Size(most)
        if self.cap is not None:
            return Size(self.cap)
        if self.where is None:
            return Size(assumed)
        return Size(assumed, frozenset({Unbounded(self.path, keyword, self.where, assumed)}))

    def _child(self, schema: Any, path: str) -> Declared:
        return Declared(schema if isinstance(schema, Mapping) else None, path, self.where,
                        self.fallback)

    def element(self) -> Value:
        schema = self.schema or {}
        if self.kind == "map":
            names = schema.get("propertyNames")
            return self._child(names if isinstance(names, Mapping) else {"type": "string"},
                               f"{self.path} (its keys)")
        return self._child(schema.get("items"), f"{self.path}[]")

    def entry(self) -> Value:
        schema = self.schema or {}
        if self.kind == "map":
            return self._child(schema.get("additionalProperties"), f"{self.path}[]")
        return self.element()

    def field(self, name: str) -> Value:
        schema = self.schema or {}
        properties = schema.get("properties") or {}
        if name in properties:
            return self._child(properties[name], f"{self.path}.{name}")
        return self._child(schema.get("additionalProperties"), f"{self.path}.{name}")


@dataclass(frozen=True)
class Loop:
    """A comprehension the estimate priced: where it is written, what it costs in all
    (its nested loops included), and the range it runs over."""

    at: syntax.Position
    macro: str
    cost: int
    range: str
    elements: int


@dataclass
class Estimate:
    """The worst-case cost of one expression, the loops it is made of (outermost first),
    and the inputs whose sizes were assumed."""

    cost: int
    loops: list[Loop] = field(default_factory=list)
    unbounded: dict[Unbounded, None] = field(default_factory=dict)

    @property
    def costliest(self) -> Loop | None:
        return max(self.loops, key=lambda loop: loop.cost, default=None)


def estimate(tree: syntax.Node, variables: Mapping[str, Value]) -> Estimate:
    """The worst-case cost of the expression ``tree`` with ``variables`` bound to what is
    known of them (a name not among them: a scalar of unknown size, as a type name is)."""
    estimator = _Estimator(variables)
    cost, _ = estimator.cost(tree, {})
    return Estimate(cost, estimator.loops, estimator.unbounded)


def described(path: syntax.Node) -> str:
    """How an expression is written, shortly, for messages (``args.items``)."""
    name = syntax.qualified_name(path)
    if name is not None:
        return name
    if isinstance(path, syntax.Macro) and path.target is not None:
        return f"{described(path.target)}.{path.name}(...)"
    if isinstance(path, syntax.Call) and path.target is not None:
        return f"{described(path.target)}.{path.function}(...)"
    return "an expression"


class _Estimator:
    def __init__(self, variables: Mapping[str, Value]) -> None:
        self.variables = variables
        self.loops: list[Loop] = []
        self.unbounded: dict[Unbounded, None] = {}

    def size(self, value: Value) -> int:
        found = value.size()
        for reason in found.unbounded:
            self.unbounded[reason] = None
        return found.most

    def elements(self, value: Value, depth: int = 0) -> int:
        """What scanning or comparing a list or map may visit (as the run-time meter
        charges it): its elements, and the elements of the lists and maps nested in it."""
        most = self.size(value)
        inner = value.entry()  # a list's element, a map's value
        if inner.kind in ("list", "map") and depth < _NESTING:
            return most + most * self.elements(inner, depth + 1)
        return most

    def scan(self, value: Value) -> int:
        """What reading a value through once costs: a tenth per code point of a string,
        one per element of a list or map."""
        most = self.size(value)
        return math.ceil(most * STRING_TRAVERSAL) if value.kind == "string" else most

    def range_bound(self, count: syntax.Node, scope: Mapping[str, Value]) -> int:
        """How many numbers ``lists.range(count)`` may give: a literal's, the size of what
        ``size(x)`` measures when ``x`` is a path to a bounded value (the common
        ``lists.range(size(args.items))``), else the library's limit."""
        if isinstance(count, syntax.Literal):
            value = count.value
            return value if isinstance(value, int) and 0 <= value <= MOST_RANGE else MOST_RANGE
        if isinstance(count, syntax.Call) and count.function.lstrip(".") == "size":
            sized = count.args if count.target is None else (count.target, *count.args)
            if len(sized) == 1 and _is_path(sized[0]):  # a path: pricing it records nothing
                return min(self.size(self.cost(sized[0], scope)[1]), MOST_RANGE)
        return MOST_RANGE

    def cost(self, node: syntax.Node, scope: Mapping[str, Value]) -> tuple[int, Value]:
        if isinstance(node, syntax.Literal):
            length = len(node.value) if isinstance(node.value, str | bytes) else 1
            return 1, Computed("string" if isinstance(node.value, str) else None,
                               Size(length))
        if isinstance(node, syntax.Ident):
            name = node.name.lstrip(".")
            found = scope.get(node.name) if not node.name.startswith(".") else None
            return 1, found or self.variables.get(name, SCALAR)
        if isinstance(node, syntax.Select):
            cost, operand = self.cost(node.operand, scope)
            return cost + 1, operand.field(node.field)
        if isinstance(node, syntax.Index):
            cost, operand = self.cost(node.operand, scope)
            index_cost, _ = self.cost(node.index, scope)
            key = node.index.value if isinstance(node.index, syntax.Literal) else None
            found = operand.field(key) if isinstance(key, str) else operand.entry()
            return cost + index_cost + 1, found
        if isinstance(node, syntax.Macro):
            return self.macro(node, scope)
        if isinstance(node, syntax.Call):
            return self.call(node, scope)
        if isinstance(node, syntax.ListLiteral):
            total, element = 1, None
            for item in node.elements:
                cost, value = self.cost(item, scope)
                total += cost
                element = element or value
            return total, Computed("list", Size(len(node.elements)), element)
        parts = syntax.children(node)  # map and message literals
        total = 1 + sum(self.cost(part, scope)[0] for part in parts)
        return total, Computed("map", Size(len(parts) // 2 or len(parts)))

    def call(self, node: syntax.Call, scope: Mapping[str, Value]) -> tuple[int, Value]:
        function = node.function.lstrip(".")
        operands = ((node.target,) if node.target is not None else ()) + node.args
        namespace = syntax.qualified_name(node.target) if node.target is not None else None
        if namespace is not None and f"{namespace.lstrip('.')}.{function}" in _NAMESPACED:
            # ``sets.contains(a, b)`` is the library's function of a and b, as the compiler
            # reads it (``compiler.lowering``), not a member ``contains`` of ``sets``
            function, operands = f"{namespace.lstrip('.')}.{function}", node.args
        priced = [self.cost(operand, scope) for operand in operands]
        total = 1 + sum(cost for cost, _ in priced)
        values = [value for _, value in priced]
        if function == "_?_:_":
            (test, _), (then, then_value), (otherwise, other_value) = priced
            larger = then_value if then >= otherwise else other_value
            return 1 + test + max(then, otherwise), larger
        if function == "_+_" and len(values) == 2:
            left, right = values
            size = Size(self.size(left) + self.size(right))
            if left.kind == "string" or right.kind == "string":
                return total + math.ceil(size.most * STRING_TRAVERSAL), Computed("string", size)
            return total, Computed(left.kind or right.kind, size, left.element())
        if function in ("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_") and len(values) == 2:
            # one operation, as the run-time meter counts it: comparing two texts is one
            # memory comparison, not a scan priced per code point (cel-go prices it so)
            if all(value.kind in ("list", "map") for value in values):
                total += min(self.elements(value) for value in values)
            return total, SCALAR
        if function == "@in" and len(values) == 2:
            item, container = values
            if container.kind == "map":  # by hash, unless the key is not a string
                return total + (1 if item.kind == "string" else self.size(container)), SCALAR
            return total + self.elements(container), SCALAR
        if function in ("size", "int", "uint", "double", "bool", "dyn", "type", "timestamp",
                        "duration"):
            return total, values[0] if function == "dyn" and values else SCALAR
        if function == "lists.range" and operands:
            most = self.range_bound(operands[0], scope)
            return total + most, Computed("list", Size(most), SCALAR)
        if (function in LIST_SCANS and values and values[0].kind in ("list", "map", None)
                and values[0].kind != "string"):
            scanned = sum(self.elements(value) for value in values if value.kind != "string")
            if function == "sort":
                scanned *= max(1, math.ceil(math.log2(max(scanned, 2))))
            receiver = values[0]
            if function == "join":
                joined = self.size(receiver) * max(self.size(receiver.element()), 1)
                return total + math.ceil(joined * STRING_TRAVERSAL), Computed(
                    "string", Size(joined))
            if function == "flatten":
                inner = receiver.element()
                return total + scanned, Computed(
                    "list", Size(self.size(receiver) * max(self.size(inner), 1)),
                    inner.element())
            result = receiver if function in _SAME_SIZE else SCALAR
            return total + scanned, result
        if function in STRING_SCANS:
            scanned = sum(self.scan(value) for value in values if value.kind != "list")
            if function == "matches" and len(values) == 2:
                pattern = values[1]
                states = 1 + math.ceil(self.size(pattern) / 4)
                scanned = math.ceil((self.size(values[0]) + 1) * STRING_TRAVERSAL) * states
            if function == "split" and values:
                text = self.size(values[0])
                return total + scanned, Computed("list", Size(text + 1),
                                                 Computed("string", Size(text)))
            if function in _SAME_SIZE and values:
                return total + scanned, values[0]
            if function in ("string", "replace", "format", "strings.quote", "base64.encode",
                            "base64.decode", "bytes"):
                longest = sum(self.size(value) for value in values)
                return total + scanned, Computed("string", Size(2 * longest + 2))
            return total + scanned, SCALAR
        return total, Computed(None, Size(max((self.size(value) for value in values
                                                if value.kind in ("list", "map", "string")),
                                               default=1)))

    def macro(self, node: syntax.Macro, scope: Mapping[str, Value]) -> tuple[int, Value]:
        names = [argument.name for argument in node.args if isinstance(argument, syntax.Ident)]
        if node.name == "has":
            return 1 + self.cost(node.args[0], scope)[0], SCALAR
        if node.name == "cel.bind":
            init_cost, init = self.cost(node.args[1], scope)
            body_cost, body = self.cost(node.args[2], {**scope, names[0]: init})
            return 1 + init_cost + body_cost, body
        assert node.target is not None
        range_cost, over = self.cost(node.target, scope)
        if node.name not in _LOOPS:  # optMap, optFlatMap: the body once
            body_cost, body = self.cost(node.args[-1], {**scope, names[0]: over.element()})
            return 1 + range_cost + body_cost, body
        two = node.name.startswith("transform") or (
            len(node.args) == 3 and node.name in ("all", "exists", "existsOne"))
        bound = node.args[:2] if two else node.args[:1]
        inner = dict(scope)
        if two:
            first = Computed(None, Size(1)) if over.kind != "map" else over.element()
            inner[names[0]], inner[names[1]] = first, over.entry()
        else:
            inner[names[0]] = over.element()
        start = len(self.loops)
        body_cost, body_value = 0, None
        for part in node.args[len(bound):]:
            cost, body_value = self.cost(part, inner)
            body_cost += cost
        elements = self.size(over)
        total = 1 + range_cost + elements * (1 + body_cost)
        if node.name == "sortBy":
            total += elements * max(1, math.ceil(math.log2(max(elements, 2))))
        self.loops.insert(start, Loop(node.at, node.name, total, described(node.target),
                                      elements))
        if node.name in ("map", "transformList"):
            return total, Computed("list", Size(elements), body_value)
        if node.name in ("transformMap", "transformMapEntry"):
            return total, Computed("map", Size(elements), body_value)
        if node.name in ("filter", "sortBy"):
            return total, Computed("list", Size(elements), over.element())
        return total, SCALAR


def _is_path(node: syntax.Node) -> bool:
    """A variable, or fields and elements selected from one (``args.items``, ``xs[0]``)."""
    while isinstance(node, syntax.Select | syntax.Index):
        if isinstance(node, syntax.Index) and not isinstance(node.index, syntax.Literal):
            return False
        node = node.operand
    return isinstance(node, syntax.Ident)


def sizes(estimate: Estimate) -> Iterator[str]:
    """The loops of an estimate as a reader follows them: ``args.items (700)``."""
    seen: set[tuple[str, int]] = set()
    for loop in estimate.loops:
        if (loop.range, loop.elements) not in seen:
            seen.add((loop.range, loop.elements))
            yield f"{loop.range} (up to {loop.elements:,})"
