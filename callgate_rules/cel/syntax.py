"""The CEL abstract syntax tree: what ``callgate_rules.cel.parser`` produces from source text.

It is the one tree every consumer reads: lowering to the compiler's ``ir``, the type checker
behind ``callgate lint``, the field-path analysis (``references``, ``guarded``), partial
evaluation. Macros stay visible as what the author wrote (``Macro``), not expanded into
comprehension loops as cel-go's checked AST has them, so lint can speak of ``exists`` and
``cel.bind`` rather than of accumulators.

Every node carries its place in the source (``line`` and ``column``, 1-based, of the token
that starts it; for operators and calls, of the operator or the function name), so a
finding can say file:line:col.

Operators are ``Call`` nodes named as cel-go names them: ``_+_``, ``_-_``, ``_*_``, ``_/_``,
``_%_``, ``-_`` (negation), ``!_``, ``_==_``, ``_!=_``, ``_<_``, ``_<=_``, ``_>_``, ``_>=_``,
``@in``, ``_&&_``, ``_||_``, ``_?_:_``. Indexing is ``Index`` (not ``_[_]``) because of its
optional form ``a[?b]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Position:
    """Where a node starts in the expression's own text (1-based line and column)."""

    line: int = 1
    column: int = 1


@dataclass(frozen=True, slots=True)
class Literal:
    """A literal: ``int``, ``UInt`` (``1u``), ``float``, ``str``, ``bytes`` (``b'..'``),
    ``bool`` or ``None`` (``null``), in the runtime representation of ``cel.values``."""

    value: Any
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class Ident:
    """A name: a variable, a macro's iteration variable, a type name (``int``), or, with a
    leading dot (``.name``), a name resolved in the root scope only."""

    name: str
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class Select:
    """``operand.field``; ``optional`` for ``operand.?field`` (an optional value). A field
    written in backticks (``a.`b-c```) arrives here unquoted."""

    operand: Node
    field: str
    optional: bool = False
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class Index:
    """``operand[index]``; ``optional`` for ``operand[?index]``."""

    operand: Node
    index: Node
    optional: bool = False
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class Call:
    """A function or operator call: ``function(args)`` or, with a ``target``,
    ``target.function(args)``. A namespaced global function (``math.greatest(1, 2)``,
    ``base64.encode(b)``) has no target and its dotted name as ``function``; the parser
    cannot always know whether ``a.b(c)`` is a namespaced function or a method on ``a``, so
    it produces the method form and consumers resolve ``Ident`` targets against the
    function library (see ``qualified_name``)."""

    function: str
    args: tuple[Node, ...]
    target: Node | None = None
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class Macro:
    """A macro as written: ``has(a.b)``; ``r.all(x, p)``, ``exists``, ``exists_one``
    (``existsOne``), ``map`` (2 or 3 arguments), ``filter``; the two-variable forms
    ``r.all(k, v, p)``, ``exists``, ``existsOne``, ``transformList``, ``transformMap``,
    ``transformMapEntry``; ``cel.bind(name, init, body)``; ``r.sortBy(x, key)``; the
    optionals' ``o.optMap(x, expr)`` and ``o.optFlatMap(x, expr)``;
    ``optional.ofNonZeroValue`` is a function, not a macro. ``args`` are the macro's argument
    expressions, the variable names among them as ``Ident`` nodes."""

    name: str
    args: tuple[Node, ...]
    target: Node | None = None
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class ListLiteral:
    """``[a, b, ?c]``: ``optional_indices`` are the positions written with ``?``."""

    elements: tuple[Node, ...]
    optional_indices: frozenset[int] = frozenset()
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class MapEntry:
    key: Node
    value: Node
    optional: bool = False  # ``{?k: v}``
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class MapLiteral:
    entries: tuple[MapEntry, ...]
    at: Position = dataclass_field(default=Position(), compare=False)


@dataclass(frozen=True, slots=True)
class StructLiteral:
    """``Name{field: value}``: a protobuf message literal. Parsed so the error can say what
    it is; callgate has no message types, so compiling one is an error."""

    type_name: str
    fields: tuple[MapEntry, ...]  # keys are Literal field names
    at: Position = dataclass_field(default=Position(), compare=False)


Node = (
    Literal | Ident | Select | Index | Call | Macro | ListLiteral | MapLiteral | StructLiteral
)


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of ``node``, in source order."""
    if isinstance(node, Select):
        return (node.operand,)
    if isinstance(node, Index):
        return (node.operand, node.index)
    if isinstance(node, Call | Macro):
        return ((node.target,) if node.target is not None else ()) + node.args
    if isinstance(node, ListLiteral):
        return node.elements
    if isinstance(node, MapLiteral):
        return tuple(part for entry in node.entries for part in (entry.key, entry.value))
    if isinstance(node, StructLiteral):
        return tuple(entry.value for entry in node.fields)
    return ()


def walk(node: Node) -> list[Node]:
    """Every node of the tree, parents before children (iteratively: trees may be deep)."""
    found: list[Node] = []
    pending = [node]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(reversed(children(current)))
    return found


def qualified_name(node: Node) -> str | None:
    """``a.b.c`` for a chain of plain selects on an identifier, else ``None``: how a
    namespaced function's target (``math`` in ``math.greatest``) is recognised."""
    parts: list[str] = []
    while isinstance(node, Select) and not node.optional:
        parts.append(node.field)
        node = node.operand
    if not isinstance(node, Ident):
        return None
    parts.append(node.name)
    return ".".join(reversed(parts))
