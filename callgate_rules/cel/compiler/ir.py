"""The compiler's intermediate form: a small typed tree between the syntax tree and Python.

Lowering (``lowering.py``) builds it from ``cel.syntax``'s tree, resolving names, macros,
functions and constants; code generation (``codegen.py``) turns it into Python source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Const:
    """A value known at compile time (immutable: scalars, timestamps, compiled patterns)."""

    value: Any


@dataclass(frozen=True)
class Fail:
    """An error known at compile time, raised only if evaluation reaches it
    (``false && 1/0 == 1`` is still false)."""

    message: str


@dataclass(frozen=True)
class Var:
    """A top-level name from the activation (``args``, ``actor``, ``now``)."""

    name: str


@dataclass(frozen=True)
class Local:
    """A macro's iteration variable; ``name`` is its Python identifier."""

    name: str


@dataclass(frozen=True)
class Select:
    """``operand.field`` on a map."""

    operand: Node
    field: str


@dataclass(frozen=True)
class Has:
    """``has(operand.field)``."""

    operand: Node
    field: str


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class Logic:
    """An n-ary ``&&`` or ``||`` chain with CEL's commutative error absorption."""

    operator: str  # "&&" or "||"
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Conditional:
    test: Node
    then: Node
    otherwise: Node


@dataclass(frozen=True)
class Compare:
    """``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``."""

    operator: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Member:
    """``item in container``."""

    item: Node
    container: Node


@dataclass(frozen=True)
class Call:
    """An operator or function implemented in ``runtime``; ``function`` keys ``FUNCTIONS``."""

    function: str
    arguments: tuple[Node, ...]


@dataclass(frozen=True)
class Apply:
    """A call of a library function (``cel.library``): ``implementation`` is called with the
    evaluated arguments, the receiver first; ``name`` is for messages."""

    name: str
    implementation: Callable[..., Any]
    arguments: tuple[Node, ...]


@dataclass(frozen=True)
class ListLiteral:
    items: tuple[Node, ...]
    optional: frozenset[int] = frozenset()  # ``[?x]``: positions holding an optional


@dataclass(frozen=True)
class MapLiteral:
    entries: tuple[tuple[Node, Node], ...]
    optional: frozenset[int] = frozenset()  # ``{?k: v}``: entries whose value is optional


@dataclass(frozen=True)
class Comprehension:
    """``range.all(v, p)``, ``exists``, ``exists_one``, ``map`` (with optional filter),
    ``filter``, and the two-variable forms (``variable2`` set: index and element of a
    list, key and value of a map): ``all``, ``exists``, ``exists_one``, ``transformList``,
    ``transformMap``, ``transformMapEntry``; ``variable`` is the Python identifier bound to
    each element or key."""

    macro: str
    variable: str
    range: Node
    predicate: Node | None
    transform: Node | None
    variable2: str | None = None


@dataclass(frozen=True)
class Bind:
    """``cel.bind(v, init, body)``, and ``opt.optMap(v, body)`` / ``optFlatMap``
    (``optional`` set to "map" or "flat_map": ``init`` is the optional, ``v`` its value)."""

    variable: str
    init: Node
    body: Node
    optional: str | None = None


Node = (
    Const | Fail | Var | Local | Select | Has | Not | Logic | Conditional | Compare | Member
    | Call | Apply | ListLiteral | MapLiteral | Comprehension | Bind
)


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of ``node``."""
    if isinstance(node, Select | Has | Not):
        return (node.operand,)
    if isinstance(node, Logic):
        return node.operands
    if isinstance(node, Conditional):
        return (node.test, node.then, node.otherwise)
    if isinstance(node, Compare):
        return (node.left, node.right)
    if isinstance(node, Member):
        return (node.item, node.container)
    if isinstance(node, Call | Apply):
        return node.arguments
    if isinstance(node, Bind):
        return (node.init, node.body)
    if isinstance(node, ListLiteral):
        return node.items
    if isinstance(node, MapLiteral):
        return tuple(part for entry in node.entries for part in entry)
    if isinstance(node, Comprehension):
        parts = [node.range]
        parts += [part for part in (node.predicate, node.transform) if part is not None]
        return tuple(parts)
    return ()


def free_locals(node: Node) -> frozenset[str]:
    """Iteration variables that ``node`` reads but does not bind itself."""
    if isinstance(node, Local):
        return frozenset({node.name})
    if isinstance(node, Comprehension):  # each part once: nested macros stay linear
        body: frozenset[str] = frozenset()
        for part in (node.predicate, node.transform):
            if part is not None:
                body |= free_locals(part)
        return free_locals(node.range) | (body - {node.variable, node.variable2 or ""})
    if isinstance(node, Bind):
        return free_locals(node.init) | (free_locals(node.body) - {node.variable})
    found: frozenset[str] = frozenset()
    for child in children(node):
        found |= free_locals(child)
    return found


def variables_read(node: Node) -> frozenset[str]:
    """Activation names that ``node`` reads."""
    if isinstance(node, Var):
        return frozenset({node.name})
    found: frozenset[str] = frozenset()
    for child in children(node):
        found |= variables_read(child)
    return found


def has_loop(node: Node) -> bool:
    """Whether evaluating ``node`` may run a comprehension's loop."""
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, Comprehension):
            return True
        pending.extend(children(current))
    return False


def loop_cost(node: Comprehension) -> int:
    """The operations one pass of ``node``'s loop is charged (``runtime.cost``): one for
    the pass and one per node of its body; a comprehension nested in the body counts its
    range here and charges its own loop when it runs."""
    pending = [part for part in (node.predicate, node.transform) if part is not None]
    count = 1
    while pending:
        current = pending.pop()
        count += 1
        if isinstance(current, Comprehension):
            pending.append(current.range)
        else:
            pending.extend(children(current))
    return count
