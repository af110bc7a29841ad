"""CEL behind one small interface: source text in, a callable over a variables mapping out.

Everything else in callgate sees only ``compile_expression`` and ``CompiledExpression``:
the text is parsed by callgate's parser (``cel.parser``, into ``cel.syntax``'s tree) and
compiled to Python (``cel.compiler``, with the function library ``cel.library``). There is
one definition of what an expression means: every expression the parser accepts is compiled,
or refused with a ``CelCompileError`` at its line:col; nothing falls back to another
interpreter.

Values crossing this border are plain Python: ``dict``, ``list``, ``str``, ``int``,
``float``, ``bool``, ``None``, ``bytes``, timezone-aware ``datetime`` for CEL timestamps and
``timedelta`` for CEL durations, and ``cel.values``' ``UInt``, ``CelType`` and ``Optional``
for what plain Python lacks. Results come back the same way.
"""

from __future__ import annotations

import io
import marshal
import pickle
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, is_dataclass
from functools import cached_property
from importlib.util import MAGIC_NUMBER
from types import CodeType
from typing import Any

from callgate_rules.cache import ContentCache, cache_enabled
from callgate_rules.cel import syntax
from callgate_rules.cel.compiler import Compiled, Inline, compile_program, running
from callgate_rules.cel.compiler.regex import PATTERN_ARGUMENTS, pattern_problem
from callgate_rules.cel.definitions import Definitions

# Re-exported: the errors are part of this interface (``from ...expression import
# CelEvaluationError`` keeps working), though they live below the compiler, in ``errors``.
from callgate_rules.cel.errors import CelCompileError as CelCompileError
from callgate_rules.cel.errors import CelEvaluationError as CelEvaluationError
from callgate_rules.cel.errors import CelSyntaxError as CelSyntaxError
from callgate_rules.cel.library import FUNCTIONS
from callgate_rules.cel.parser import parse as parse

Path = tuple[str, ...]

@dataclass(frozen=True)
class CompiledExpression:
    """One CEL expression, parsed and compiled once."""

    source: str
    backend: str  # always "compiled": the one backend (kept for callers that print it)
    variables: frozenset[str]  # top-level names it reads (``args``, ``actor``, ``now``, ...)
    references: frozenset[Path]  # field paths it reads, e.g. ("args", "dueAt")
    guarded: frozenset[Path]  # paths tested with has() or read with .?, so absence is handled
    evaluate: Callable[[Mapping[str, Any]], Any] = field(repr=False, compare=False)
    # the compiled code to inline in other generated code, where it allows that
    inline: Inline | None = field(default=None, repr=False, compare=False)
    # literal patterns RE2 refuses: (what is wrong, line, column of the literal), 1-based.
    # Evaluating such a call is an error (lazily, as CEL has it); the document compiler
    # refuses the document at load, naming the place.
    refused_patterns: tuple[tuple[str, int, int], ...] = field(default=(), compare=False)
    # the syntax tree (``cel.syntax``), for readers such as the type checker behind lint:
    # ``tree``, which is ``parsed``, or read from ``pickled_tree`` when first asked for (an
    # expression from the load cache; a gate never reads it, so loading does not either)
    parsed: syntax.Node | None = field(default=None, repr=False, compare=False)
    pickled_tree: bytes | None = field(default=None, repr=False, compare=False)
    # this expression's load cache entry (None: none was written), what a whole
    # configuration's entry holds of it (``documents.snapshot``)
    entry: bytes | None = field(default=None, repr=False, compare=False)

    def __call__(self, variables: Mapping[str, Any]) -> Any:
        return self.evaluate(variables)

    @cached_property
    def tree(self) -> syntax.Node | None:
        if self.parsed is not None or self.pickled_tree is None:
            return self.parsed
        try:  # from a whole entry (its digest matched), as trusted as __pycache__
            tree: syntax.Node = pickle.loads(self.pickled_tree)  # noqa: S301
        except Exception:  # noqa: BLE001 - an unreadable tree is no tree, as for a miss
            return None
        return tree


def compile_expression(source: str,
                       definitions: Definitions | None = None) -> CompiledExpression:
    """Parse and compile ``source`` once; the result is safe to share between threads.
    Raises ``CelSyntaxError`` (or its subclass ``CelCompileError``) with the place.
    ``definitions``: the configuration's named definitions, expanded in the tree first.
    An expression compiled before (the same source and definitions) comes from the load
    cache (``callgate_rules.cache``) as a whole: nothing is parsed, lowered or generated."""
    key = _entry_key(source, definitions)
    found = _remembered(key, source, definitions)
    if found is not None:
        return found
    tree = parse(source)
    used: frozenset[str] = frozenset()
    if definitions is not None and definitions.bodies:
        # expanded by a copy, to learn which definitions this tree uses (a cached entry
        # marks them used again without expanding)
        reader = Definitions(definitions.bodies, definitions.parameters, definitions.uses)
        tree = reader.expand(tree)
        used = frozenset(reader.used)
        for name in used:
            definitions.mark_used(name)
    compiled = compile_program(tree, FUNCTIONS, tag=key[:20])
    references, guarded, variables = _references(tree)
    read = (frozenset(variables), frozenset(references), frozenset(guarded))
    refused = tuple((f"pattern {pattern!r} of {function}(): {problem}", at.line, at.column)
                    for function, pattern, at in _literal_patterns(tree)
                    if (problem := pattern_problem(pattern)) is not None)
    entry = _remember(compiled, tree, read, refused, used)
    if entry is not None:
        COMPILED_EXPRESSIONS.put(key, entry)
    return CompiledExpression(source=source, backend="compiled", variables=read[0],
                              references=read[1], guarded=read[2],
                              evaluate=compiled.evaluate, inline=compiled.inline,
                              refused_patterns=refused, parsed=tree, entry=entry)


# Compiled expressions in the load cache -----------------------------------------------------

COMPILED_EXPRESSIONS = ContentCache("cel-expression")
_FINGERPRINTS: weakref.WeakKeyDictionary[Definitions, bytes] = weakref.WeakKeyDictionary()


def _entry_key(source: str, definitions: Definitions | None) -> str:
    """Named by the source, the definitions it may expand and the bytecode magic (the entry
    holds a code object); callgate's version is in every key."""
    fingerprint = b""
    if definitions is not None and definitions.bodies:
        fingerprint = _FINGERPRINTS.get(definitions, b"")
        if not fingerprint:  # computed once per configuration, not once per expression
            fingerprint = repr((sorted(definitions.bodies.items()),
                                sorted(definitions.parameters.items()),
                                sorted(definitions.uses.items()))).encode()
            _FINGERPRINTS[definitions] = fingerprint
    return COMPILED_EXPRESSIONS.key(
        MAGIC_NUMBER + len(fingerprint).to_bytes(8, "little") + fingerprint
        + source.encode("utf-8", "surrogatepass"))


def _remember(compiled: Compiled, tree: syntax.Node,
              read: tuple[frozenset[str], frozenset[Path], frozenset[Path]],
              refused: tuple[tuple[str, int, int], ...], used: frozenset[str]) -> bytes | None:
    """The entry ``restored`` makes the expression again from (``read``: its variables,
    references and guarded paths); None for an expression whose constants or tree cannot
    be pickled (or nest too deeply to), compiled afresh each time. The tree is pickled on
    its own, so that a load need not read it back."""
    if compiled.code is None or not cache_enabled():
        return None
    body = None if compiled.inline is None else compiled.inline.body
    try:
        written = io.BytesIO()
        pickler = pickle.Pickler(written, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.dispatch_table = _TREE_PICKLING
        pickler.dump(tree)
        return pickle.dumps((marshal.dumps(compiled.code), dict(compiled.constants), body,
                             *read, refused, written.getvalue(), used),
                            protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, ValueError, RecursionError):
        return None


def _node(kind: type[Any], values: tuple[Any, ...]) -> Any:
    """A syntax node from its slots' values: what pickle does for a slotted dataclass,
    without looking up its fields for every node (a third of reading an entry)."""
    node = object.__new__(kind)
    for name, value in zip(kind.__slots__, values, strict=True):
        object.__setattr__(node, name, value)
    return node


def _node_reduced(node: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    kind = type(node)
    return _node, (kind, tuple(getattr(node, name) for name in kind.__slots__))


_TREE_PICKLING: dict[type, Callable[[Any], Any]] = {
    kind: _node_reduced for kind in vars(syntax).values()
    if isinstance(kind, type) and is_dataclass(kind) and kind.__module__ == syntax.__name__
    and "__slots__" in vars(kind)}


def _remembered(key: str, source: str,
                 definitions: Definitions | None) -> CompiledExpression | None:
    stored = COMPILED_EXPRESSIONS.get(key)
    if stored is None:
        return None
    return restored(source, stored, definitions)


def restored(source: str, entry: bytes,
             definitions: Definitions | None = None) -> CompiledExpression | None:
    """The expression ``source`` again from its ``entry`` (see ``_remember``), marking the
    definitions it used in ``definitions``; None for an entry that cannot be read."""
    try:  # the entry's digest matched, so this is what callgate wrote; still, never trust it
        (code_bytes, constants, body, variables, references, guarded, refused, tree,
         used) = pickle.loads(entry)  # noqa: S301 - the cache is as trusted as __pycache__
        code = marshal.loads(code_bytes)
    except Exception:  # noqa: BLE001 - any unreadable entry is a miss, compiled afresh
        return None
    if not isinstance(code, CodeType) or not isinstance(tree, bytes):
        return None
    compiled = running(code, constants, body)
    if definitions is not None:
        for name in used:
            definitions.mark_used(name)
    return CompiledExpression(source=source, backend="compiled", variables=variables,
                              references=references, guarded=guarded,
                              evaluate=compiled.evaluate, inline=compiled.inline,
                              refused_patterns=refused, pickled_tree=tree, entry=entry)


def _literal_patterns(tree: syntax.Node) -> Iterator[tuple[str, str, syntax.Position]]:
    """(function, pattern, its place) for every string literal passed as a pattern."""
    for node in syntax.walk(tree):
        if not isinstance(node, syntax.Call):
            continue
        index = PATTERN_ARGUMENTS.get(node.function)
        arguments = (node.target, *node.args) if node.target is not None else node.args
        if index is None or index >= len(arguments):
            continue
        literal = arguments[index]
        if isinstance(literal, syntax.Literal) and isinstance(literal.value, str):
            yield node.function, literal.value, literal.at


# What an expression reads, for lint ---------------------------------------------------------


def _references(tree: syntax.Node) -> tuple[set[Path], set[Path], set[str]]:
    references: set[Path] = set()
    guarded: set[Path] = set()
    variables: set[str] = set()
    _Reader(references, guarded, variables).read(tree, frozenset())
    return references, guarded, variables


class _Reader:
    """Collects the field paths an expression reads from the activation (not from macro
    variables), and which of them it tests for presence."""

    def __init__(self, references: set[Path], guarded: set[Path], variables: set[str]) -> None:
        # Here, not at the top: an expression the load cache kept is read without lowering.
        from callgate_rules.cel.compiler.lowering import TYPE_NAMES, library_function

        self.references, self.guarded, self.variables = references, guarded, variables
        self.type_names, self.library_function = TYPE_NAMES, library_function

    def found(self, path: Path, guarded: bool = False) -> None:
        self.references.add(path)
        self.variables.add(path[0])
        if guarded:
            self.guarded.add(path)

    def read(self, node: syntax.Node, locals_: frozenset[str]) -> None:
        if isinstance(node, syntax.Macro):
            self.macro(node, locals_)
            return
        if (isinstance(node, syntax.Call) and node.target is not None
                and self.library_function(node, FUNCTIONS) == (
                    f"{syntax.qualified_name(node.target)}.{node.function}", False)):
            for argument in node.args:  # math.greatest(...): ``math`` is no variable
                self.read(argument, locals_)
            return
        if isinstance(node, syntax.Select | syntax.Ident):
            path = _path_of(node, locals_)
            if path is not None:
                if path[0] not in self.type_names or len(path) > 1:
                    self.found(path, guarded=_optional_chain(node))
                return
        for child in syntax.children(node):
            self.read(child, locals_)

    def macro(self, node: syntax.Macro, locals_: frozenset[str]) -> None:
        if node.name == "has":
            path = _path_of(node.args[0], locals_)
            if path is not None:
                self.found(path, guarded=True)
            else:
                self.read(node.args[0], locals_)
            return
        if node.target is not None:
            self.read(node.target, locals_)
        names = [argument.name for argument in node.args if isinstance(argument, syntax.Ident)]
        bodies = list(node.args)
        if node.name == "cel.bind":
            self.read(node.args[1], locals_)
            self.read(node.args[2], locals_ | {names[0]})
            return
        count = 2 if len(node.args) >= 3 and node.name in (
            "all", "exists", "existsOne") or node.name.startswith("transform") else 1
        inner = locals_ | frozenset(names[:count])
        for body in bodies[count:]:
            self.read(body, inner)


def _optional_chain(node: syntax.Node) -> bool:
    while isinstance(node, syntax.Select):
        if node.optional:
            return True
        node = node.operand
    return False


def _path_of(node: syntax.Node, locals_: frozenset[str]) -> Path | None:
    """``args.a.b`` → ("args", "a", "b"); ``None`` when the node is not a plain field chain
    from an activation name (an optional selection ends the chain, included)."""
    names: list[str] = []
    while isinstance(node, syntax.Select):
        if node.optional:
            names.clear()
        names.append(node.field)
        node = node.operand
    if not isinstance(node, syntax.Ident):
        return None
    root = node.name
    if root.startswith("."):
        root = root[1:]
    elif root in locals_:
        return None
    return (root, *reversed(names))
