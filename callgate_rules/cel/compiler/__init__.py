"""A compiler from CEL to Python: the one way callgate evaluates CEL.

``compile_program`` takes the tree ``callgate_rules.cel.parser`` made and returns a plain
function ``evaluate(variables) -> value`` (and the code to inline it elsewhere): generated
Python source compiled once (see ``codegen``), with no per-node dispatch, constants folded,
literal regular expressions compiled once. There is no interpreter behind it: an expression
that cannot be compiled (an unknown function, a wrong argument count, a message literal) is a
``CelCompileError`` with its line:col, raised when the expression is loaded.

Semantics
---------
The reference is the CEL specification and cel-go, checked against the cel-spec
conformance files (``tests/cel/test_conformance.py``), including every error: a missing
key, an out-of-range index, int64 and uint64 overflow, division or modulo by zero,
``no such overload`` for operands of the wrong kinds.

- Numbers: ``int``, ``uint`` (``cel.values.UInt``) and ``double`` compare with each other
  by value (``1 == 1.0``, ``1 < 1u``; the current spec's heterogeneous equality), but
  arithmetic never mixes them (``1 + 1u`` and ``1.0 + 1`` are errors); ints are checked to
  64 bits, uints to 0..2**64-1; double division is IEEE 754 (``-1.0/0.0`` is ``-inf``).
- Bools are not numbers (``true == 1`` is false, ``true < 2`` an error); logic needs bools
  (``1 && true`` is an error); ``&&``, ``||`` and ``?:`` absorb an error on the side that
  does not decide, in macros too.
- Strings are indexed by code point; ``'a' in 'abc'`` and ``'abc'[0]`` are errors.
- Types are values: ``type(1) == int``, ``type(type) == type``, ``dyn(x)`` is ``x``.
- Maps: literal keys are strings, ints, uints or bools, never repeated; ``has(a.b.c)`` is
  false (not an error) when ``a.b`` is missing or not a map, as cel-python has it.
- Timestamps are RFC 3339 texts from year 1 to 9999, to the microsecond (Python's
  ``datetime`` has no nanoseconds: a text's digits past the sixth are dropped); durations
  are Go duration texts within ±292 years (int64 nanoseconds); both print as cel-go
  prints them.
- Optionals (cel-go's optionals library): ``a.?b`` and ``a[?k]`` are ``optional.of`` the
  value or ``optional.none()``, a selection after one stays optional, ``[?x]`` and
  ``{?k: v}`` include only present values.
- Functions beyond the spec's core come from ``callgate_rules.cel.library`` (handed to the
  compiler as ``functions``) and are called, not inlined.

Variables are looked up by plain name: an activation key with a dot in it (``{"a.b": 1}``
read as ``a.b``) is not resolved the way cel-go's qualified-name lookup does; callgate binds
plain identifiers.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any, cast

from callgate_rules.cache import compiled
from callgate_rules.cel import syntax
from callgate_rules.cel.compiler import runtime
from callgate_rules.cel.compiler.runtime import NAMESPACE as _RUNTIME_NAMESPACE
from callgate_rules.cel.errors import CelCompileError

if TYPE_CHECKING:  # compiling imports them; running what the load cache kept does not
    from callgate_rules.cel.compiler.codegen import Program
    from callgate_rules.cel.compiler.lowering import Functions

__all__ = ["FAILURES", "Compiled", "Inline", "compile_program", "python_source",
           "reading_locals", "running"]

Evaluator = Callable[[Mapping[str, Any]], Any]
FAILURES = runtime.FAILURES  # what inlined code raises for a CEL error
_NAME = re.compile(r"\b_\w+")  # every global of generated code starts with "_"


@dataclass(frozen=True)
class Inline:
    """An expression's code for inlining in other generated code (see ``Program.body``):
    the lines ``return`` its value, or raise one of ``FAILURES``; ``namespace`` holds every
    global they read: runtime functions, shared by every program, and constants and helper
    functions, named uniquely in the process."""

    body: tuple[str, ...]
    namespace: Mapping[str, Any]


@dataclass(frozen=True)
class Compiled:
    """An expression compiled: its function, and its code to inline if it allows that;
    ``code`` and ``constants`` make it again without generating (``running``): the code
    object of the generated source and the globals it needs beyond the runtime's."""

    evaluate: Evaluator
    inline: Inline | None
    code: CodeType | None = field(default=None, repr=False, compare=False)
    constants: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def compile_program(tree: syntax.Node, functions: Functions, tag: str = "") -> Compiled:
    """The Python function evaluating the parsed CEL expression ``tree`` (run-time failures
    raise ``CelEvaluationError``), with the code to inline it where it allows that; raises
    ``CelCompileError`` for an expression that cannot be compiled. ``tag``: see
    ``codegen.generate`` (the load cache names programs by their content)."""
    from callgate_rules.cel.compiler.codegen import generate
    from callgate_rules.cel.compiler.lowering import lower

    program = generate(lower(tree, functions), tag)
    try:
        with warnings.catch_warnings():
            # "[1]['a']" draws a SyntaxWarning from CPython; in CEL it is a run-time error.
            warnings.simplefilter("ignore", SyntaxWarning)
            code = compiled(program.source, "<cel>")  # compile(), from the load cache
    except (SyntaxError, RecursionError, MemoryError, ValueError) as error:
        raise CelCompileError(f"CEL error: the expression is too large to compile ({error})",
                              1, 1) from None
    constants = {name: value for name, value in program.namespace.items()
                 if name not in _RUNTIME_NAMESPACE}
    return running(code, constants, program.body)


def running(code: CodeType, constants: Mapping[str, Any],
            body: Sequence[str] | None) -> Compiled:
    """The compiled expression from its parts: ``code`` run with the runtime's globals and
    ``constants``; ``body`` its lines to inline (``Program.body``)."""
    namespace = {**_RUNTIME_NAMESPACE, **constants}
    exec(code, namespace)
    inline = None
    if body is not None:
        # just the globals the lines name (a helper function keeps the program's own)
        named = set(_NAME.findall("\n".join(body)))
        inline = Inline(tuple(body), {name: value for name, value
                                      in namespace.items() if name in named})
    return Compiled(cast(Evaluator, namespace["evaluate"]), inline, code, dict(constants))


def reading_locals(body: Sequence[str], names: Mapping[str, str]) -> list[str]:
    """``body`` (an ``Inline``'s lines) with every read of a variable named in ``names``
    made a read of the Python local ``names[variable]``, for code that holds those values in
    locals already (a tool's plan): a local costs a fraction of a look-up in ``variables``.
    The generated code reads a variable as ``variables['x']``, or ``variables.get('x',
    _ABSENT)`` for ``has()``; the tokens are matched, never the text inside a literal."""
    lines = list(body)
    read_line = io.StringIO("\n".join(lines)).readline
    try:
        tokens = [token for token in tokenize.generate_tokens(read_line)
                  if token.type not in _LAYOUT]
    except (tokenize.TokenError, SyntaxError):  # not lines the compiler wrote: kept as they are
        return lines
    spans: list[tuple[int, int, int, str]] = []  # (line, start, end, local), in order
    for at, token in enumerate(tokens):
        if token.type != tokenize.NAME or token.string != "variables":
            continue
        shape = [each.string for each in tokens[at + 1:at + 7]]
        read = (shape[:3] == [".", "get", "("] and shape[4:6] == [",", "_ABSENT"]
                and len(tokens) > at + 7 and tokens[at + 7].string == ")")
        if not (read or (shape[:1] == ["["] and shape[2:3] == ["]"])):
            continue
        literal = shape[3] if read else shape[1]
        local = names.get(ast.literal_eval(literal)) if literal[:1] in "'\"" else None
        if local is not None:
            closing = tokens[at + (7 if read else 3)]
            spans.append((token.start[0] - 1, token.start[1], closing.end[1], local))
    for line, start, end, local in reversed(spans):  # from the right: earlier columns hold
        lines[line] = lines[line][:start] + local + lines[line][end:]
    return lines


_LAYOUT = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                     tokenize.COMMENT, tokenize.ENDMARKER})


def python_source(tree: syntax.Node, functions: Functions) -> str:
    """The generated Python source for ``tree`` (for debugging and tests)."""
    return _program(tree, functions).source


def _program(tree: syntax.Node, functions: Functions) -> Program:
    from callgate_rules.cel.compiler.codegen import generate
    from callgate_rules.cel.compiler.lowering import lower

    return generate(lower(tree, functions))
