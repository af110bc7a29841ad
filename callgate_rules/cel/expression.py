"""CEL behind one small interface: source text in, a callable over a variables mapping out.

Everything else in callgate sees only ``compile_expression`` and ``CompiledExpression``, so
the evaluator can be swapped (cel-python's interpreter today, a compiler to Python
closures tomorrow) without touching the pipeline.

Values crossing this border are plain Python: ``dict``, ``list``, ``str``, ``int``,
``float``, ``bool``, ``None``, timezone-aware ``datetime`` for CEL timestamps and
``timedelta`` for CEL durations. Results come back the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import celpy
from celpy import celtypes
from lark import Token, Tree

from callgate_rules.cel.compiler import Compiled, Inline, compile_program
from callgate_rules.cel.compiler.regex import PATTERN_ARGUMENTS, compile_pattern, pattern_problem

# Re-exported: the errors are part of this interface (``from ...expression import
# CelEvaluationError`` keeps working), though they live below the compiler, in ``errors``.
from callgate_rules.cel.errors import CelEvaluationError as CelEvaluationError
from callgate_rules.cel.errors import CelSyntaxError as CelSyntaxError

Path = tuple[str, ...]

# Macros whose first argument names a new local variable, not a field of the activation.
_BINDING_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


@dataclass(frozen=True)
class CompiledExpression:
    """One CEL expression, parsed and prepared once."""

    source: str
    backend: str  # "cel-python" or "compiled"
    variables: frozenset[str]  # top-level names it reads (``args``, ``actor``, ``now``, ...)
    references: frozenset[Path]  # field paths it reads, e.g. ("args", "dueAt")
    guarded: frozenset[Path]  # paths tested with has(), so absence is handled
    evaluate: Callable[[Mapping[str, Any]], Any] = field(repr=False, compare=False)
    # the compiled code to inline in other generated code, where it allows that
    inline: Inline | None = field(default=None, repr=False, compare=False)
    # literal patterns RE2 refuses: (what is wrong, line, column of the literal), 1-based.
    # Evaluating such a call is an error (lazily, as CEL has it); the document compiler
    # refuses the document at load, naming the place.
    refused_patterns: tuple[tuple[str, int, int], ...] = field(default=(), compare=False)

    def __call__(self, variables: Mapping[str, Any]) -> Any:
        return self.evaluate(variables)


_environment = celpy.Environment()


def parse(source: str) -> Tree:
    """Parse ``source`` with cel-python's parser; raise ``CelSyntaxError`` with its place."""
    try:
        return _environment.compile(source)
    except celpy.CELParseError as error:
        line = getattr(error, "line", None) or 1
        column = getattr(error, "column", None) or 1
        raise CelSyntaxError(_syntax_message(source, line, column), line, column) from None


def _syntax_message(source: str, line: int, column: int) -> str:
    """Name what the parser stumbled on, not a dump of the whole expression."""
    lines = source.splitlines() or [""]
    text = lines[min(line, len(lines)) - 1]
    rest = text[column - 1:].strip()
    if not rest:
        return "CEL syntax error: the expression ends too early (a missing operand or ')'?)"
    token = re.match(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\S{1,2}", rest)
    found = token.group(0) if token else rest[:1]
    return f"CEL syntax error: unexpected `{found}` here"


def compile_expression(source: str) -> CompiledExpression:
    """Parse and prepare ``source`` once; the result is safe to share between threads."""
    tree = parse(source)
    references, guarded, variables = _references(tree)
    compiled = _compile_fast(tree)
    return CompiledExpression(
        source=source,
        backend="compiled" if compiled is not None else "cel-python",
        variables=frozenset(variables),
        references=frozenset(references),
        guarded=frozenset(guarded),
        evaluate=compiled.evaluate if compiled is not None else _interpreted(tree),
        inline=compiled.inline if compiled is not None else None,
        refused_patterns=tuple(
            (f"pattern {pattern!r} of {function}(): {problem}", token.line, token.column)
            for function, pattern, token in _literal_patterns(tree)
            if (problem := pattern_problem(pattern)) is not None),
    )


def _literal_patterns(tree: Tree) -> Iterator[tuple[str, str, Token]]:
    """(function, pattern, its token) for every string literal passed as a pattern."""
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg":
            name = str(node.children[1])
            arguments = [node.children[0], *_exprlist(node.children[2:])]
        elif node.data == "ident_arg":
            name = str(node.children[0])
            arguments = _exprlist(node.children[1:])
        else:
            continue
        index = PATTERN_ARGUMENTS.get(name)
        if index is None or index >= len(arguments):
            continue
        primary = _unwrap(arguments[index])
        literal = primary.children[0] if primary.data == "primary" and primary.children \
            else None
        if not (isinstance(literal, Tree) and literal.data == "literal"):
            continue
        token = literal.children[0]
        if isinstance(token, Token) and token.type in ("STRING_LIT", "MLSTRING_LIT"):
            try:
                yield name, str(celpy.evaluation.celstr(token)), token
            except ValueError:
                continue  # an invalid literal is reported when evaluated, as before


def _compile_fast(tree: Tree) -> Compiled | None:
    """The compiler to Python; ``None`` means "not supported, use cel-python"."""
    return compile_program(tree)


# The cel-python fallback ---------------------------------------------------------------------


# Functions callgate adds to standard CEL (both backends must provide them).
EXTENSION_FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "lowerAscii": lambda s: celtypes.StringType(
        "".join(c.lower() if c.isascii() else c for c in s)),
    "upperAscii": lambda s: celtypes.StringType(
        "".join(c.upper() if c.isascii() else c for c in s)),
}


def _matches(text: Any, pattern: Any) -> Any:
    """``matches`` on cel-python by the compiled backend's engine (``callgate_rules.regex``),
    so the two agree by construction: RE2 semantics, linear time."""
    if not (isinstance(text, str) and isinstance(pattern, str)):
        raise TypeError(f"no such overload: matches({type(text).__name__}, "
                        f"{type(pattern).__name__})")
    try:
        compiled = compile_pattern(str(pattern))
    except CelEvaluationError as error:
        return celpy.CELEvalError(str(error), ValueError, (str(error),))
    return celtypes.BoolType(compiled.search(text))


_CEL_NUMBER_TYPES = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _is_number(value: Any) -> bool:
    return isinstance(value, _CEL_NUMBER_TYPES) and not isinstance(value, celtypes.BoolType)


def _plain_number(value: Any) -> int | float:
    return float(value) if isinstance(value, celtypes.DoubleType) else int(value)


def _equal(left: Any, right: Any) -> Any:
    """CEL ``==`` on cel-python values with the spec's heterogeneous numeric equality:
    numbers of any numeric type compare by value, a number and a non-number are unequal,
    lists and maps compare element-wise by this equality; everything else is cel-python's.
    Returns a ``BoolType`` or a ``CELEvalError``."""
    if isinstance(left, celpy.CELEvalError):
        return left
    if isinstance(right, celpy.CELEvalError):
        return right
    left_number, right_number = _is_number(left), _is_number(right)
    if left_number and right_number:
        return celtypes.BoolType(_plain_number(left) == _plain_number(right))
    if left_number or right_number:
        other = right if left_number else left
        if not isinstance(other, celtypes.ListType | celtypes.MapType):
            return celtypes.BoolType(False)
    if isinstance(left, celtypes.ListType) and isinstance(right, celtypes.ListType):
        return _all_equal(list(zip(left, right, strict=False)), len(left) == len(right))
    if isinstance(left, celtypes.MapType) and isinstance(right, celtypes.MapType):
        if len(left) != len(right):
            return celtypes.BoolType(False)
        pairs = []
        for key, value in left.items():
            found = _find_key(right, key)
            if found is None:
                return celtypes.BoolType(False)
            pairs.append((value, right[found]))
        return _all_equal(pairs, True)
    return celpy.evaluation.bool_eq(left, right)


def _all_equal(pairs: list[tuple[Any, Any]], same_length: bool) -> Any:
    # An unequal pair decides "false" even past a pair that cannot be compared.
    if not same_length:
        return celtypes.BoolType(False)
    error = None
    for left_item, right_item in pairs:
        try:
            result = _equal(left_item, right_item)
        except (TypeError, ValueError) as failure:
            result = celpy.CELEvalError("no such overload", type(failure), failure.args)
        if isinstance(result, celpy.CELEvalError):
            error = error or result
        elif not result:
            return celtypes.BoolType(False)
    return error if error is not None else celtypes.BoolType(True)


def _find_key(mapping: Mapping[Any, Any], key: Any) -> Any:
    """The key of ``mapping`` equal to ``key``: numeric keys find each other by value."""
    for candidate in mapping:
        if _is_number(key) and _is_number(candidate):
            if _plain_number(candidate) == _plain_number(key):
                return candidate
        elif type(candidate) is type(key) and candidate == key:
            return candidate
    return None


def _not_equal(left: Any, right: Any) -> Any:
    result = _equal(left, right)
    return result if isinstance(result, celpy.CELEvalError) else celtypes.BoolType(not result)


def _numeric_ordering(
    operator: Callable[[Any, Any], bool], standard: Callable[[Any, Any], Any],
) -> Callable[[Any, Any], Any]:
    """cel-python's ordering, with numbers of different numeric types ordered by value."""
    def ordered(left: Any, right: Any) -> Any:
        if _is_number(left) and _is_number(right) and type(left) is not type(right):
            return celtypes.BoolType(operator(_plain_number(left), _plain_number(right)))
        return standard(left, right)

    return ordered


def _is_in(item: Any, container: Any) -> Any:
    """CEL ``in`` by :func:`_equal`: list elements, or map keys (numeric keys by value).
    A match decides "true" past elements that cannot be compared; without one, such an
    element makes the result an error."""
    if isinstance(item, celpy.CELEvalError):
        return item
    if isinstance(container, celtypes.MapType):
        return celtypes.BoolType(_find_key(container, item) is not None)
    if not isinstance(container, celtypes.ListType):
        return celpy.evaluation.operator_in(item, container)
    error = None
    for element in container:
        try:
            result = _equal(element, item)
        except (TypeError, ValueError) as failure:
            result = celpy.CELEvalError("no such overload", type(failure), failure.args)
        if isinstance(result, celpy.CELEvalError):
            error = error or result
        elif result:
            return celtypes.BoolType(True)
    return error if error is not None else celtypes.BoolType(False)


# The comparisons with the current spec's numeric semantics, which cel-python (it answers
# ``1 == 1.0`` with "no such overload") does not have; the fallback and the conformance
# harness's plain cel-python evaluator both run with them.
SPEC_COMPARISONS: Mapping[str, Callable[..., Any]] = {
    "_==_": _equal,
    "_!=_": _not_equal,
    "_<_": _numeric_ordering(lambda a, b: a < b, celpy.evaluation.bool_lt),
    "_<=_": _numeric_ordering(lambda a, b: a <= b, celpy.evaluation.bool_le),
    "_>_": _numeric_ordering(lambda a, b: a > b, celpy.evaluation.bool_gt),
    "_>=_": _numeric_ordering(lambda a, b: a >= b, celpy.evaluation.bool_ge),
    "_in_": _is_in,
}

# Standard functions the fallback takes from callgate rather than from cel-python.
_SHARED_FUNCTIONS: Mapping[str, Callable[..., Any]] = {"matches": _matches, **SPEC_COMPARISONS}


def _interpreted(tree: Tree) -> Callable[[Mapping[str, Any]], Any]:
    program = _environment.program(tree, functions={**EXTENSION_FUNCTIONS,
                                                    **_SHARED_FUNCTIONS})

    def evaluate(variables: Mapping[str, Any]) -> Any:
        activation = {name: to_cel(value) for name, value in variables.items()}
        try:
            result = program.evaluate(activation)
        except celpy.CELEvalError as error:
            raise CelEvaluationError(_eval_message(error)) from None
        except (TypeError, ValueError, KeyError, ZeroDivisionError, OverflowError) as error:
            raise CelEvaluationError(str(error)) from None
        if isinstance(result, celpy.CELEvalError):
            raise CelEvaluationError(_eval_message(result))
        return from_cel(result)

    return evaluate


def _eval_message(error: BaseException) -> str:
    args = getattr(error, "args", ())
    text = args[0] if args and isinstance(args[0], str) else str(error)
    # cel-python appends a dump of the whole activation; a person needs the first clause.
    return text.split(" (in activation", 1)[0].splitlines()[0][:300]


def to_cel(value: Any) -> Any:
    """Plain Python → cel-python's types."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if value is None:
        return None
    if isinstance(value, datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, timedelta):
        return celtypes.DurationType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType(
            {celtypes.StringType(k): to_cel(v) for k, v in value.items()}
        )
    if isinstance(value, list | tuple):
        return celtypes.ListType([to_cel(v) for v in value])
    if isinstance(value, bytes):
        return celtypes.BytesType(value)
    return value


def from_cel(value: Any) -> Any:
    """cel-python's types → plain Python."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.TimestampType):
        return datetime.fromtimestamp(value.timestamp(), tz=value.tzinfo)
    if isinstance(value, celtypes.DurationType):
        return timedelta(seconds=value.total_seconds())
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.BytesType):
        return bytes(value)
    if isinstance(value, Mapping):
        return {from_cel(k): from_cel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_cel(v) for v in value]
    return value


# What an expression reads, for lint ---------------------------------------------------------


def _references(tree: Tree) -> tuple[set[Path], set[Path], set[str]]:
    references: set[Path] = set()
    guarded: set[Path] = set()
    variables: set[str] = set()
    _walk(tree, frozenset(), references, guarded, variables)
    return references, guarded, variables


def _walk(
    node: Tree,
    locals_: frozenset[str],
    references: set[Path],
    guarded: set[Path],
    variables: set[str],
) -> None:
    if node.data == "member_dot_arg":
        target, method, arguments = node.children[0], node.children[1], node.children[2:]
        _walk_child(target, locals_, references, guarded, variables)
        name = str(method)
        inner = locals_
        exprs = _exprlist(arguments)
        if name in _BINDING_MACROS and exprs:
            bound = _ident_of(exprs[0])
            if bound:
                inner = locals_ | {bound}
                exprs = exprs[1:]
        for expr in exprs:
            _walk(expr, inner, references, guarded, variables)
        return
    if node.data == "ident_arg" and str(node.children[0]) == "has":
        for expr in _exprlist(node.children[1:]):
            path = _path_of(_unwrap(expr), locals_)
            if path:
                guarded.add(path)
                references.add(path)
                variables.add(path[0])
            else:
                _walk(expr, locals_, references, guarded, variables)
        return
    path = _path_of(node, locals_) if node.data in ("member", "member_dot", "primary") else None
    if path:
        references.add(path)
        variables.add(path[0])
        return
    for child in node.children:
        _walk_child(child, locals_, references, guarded, variables)


def _walk_child(
    child: Tree | Token,
    locals_: frozenset[str],
    references: set[Path],
    guarded: set[Path],
    variables: set[str],
) -> None:
    if isinstance(child, Tree):
        _walk(child, locals_, references, guarded, variables)


def _exprlist(children: list[Any]) -> list[Tree]:
    exprs: list[Tree] = []
    for child in children:
        if isinstance(child, Tree) and child.data == "exprlist":
            exprs.extend(c for c in child.children if isinstance(c, Tree))
        elif isinstance(child, Tree):
            exprs.append(child)
    return exprs


def _unwrap(node: Tree) -> Tree:
    """Descend through single-child wrapper rules (expr → conditionalor → ... → member)."""
    while (
        isinstance(node, Tree)
        and node.data not in ("member_dot", "primary", "member_dot_arg", "member_index")
        and len(node.children) == 1
        and isinstance(node.children[0], Tree)
    ):
        node = node.children[0]
    return node


def _ident_of(expr: Tree) -> str | None:
    node = _unwrap(expr)
    if node.data == "primary" and node.children:
        child = node.children[0]
        if isinstance(child, Tree) and child.data == "ident":
            return str(child.children[0])
    return None


def _path_of(node: Tree, locals_: frozenset[str]) -> Path | None:
    """``args.a.b`` → ("args", "a", "b"); ``None`` when the node is not a plain field chain."""
    node = _unwrap(node)
    names: list[str] = []
    while node.data == "member_dot":
        names.append(str(node.children[1]))
        node = _unwrap(node.children[0])
    if node.data != "primary" or not node.children:
        return None
    head = node.children[0]
    if not (isinstance(head, Tree) and head.data == "ident"):
        return None
    root = str(head.children[0])
    if root in locals_:
        return None
    return (root, *reversed(names))
