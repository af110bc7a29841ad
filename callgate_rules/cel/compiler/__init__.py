"""A compiler from CEL to Python, for the hot path of rule evaluation.

``compile_tree`` takes the lark tree cel-python's parser produced and returns a plain
function ``evaluate(variables) -> value``, or ``None`` when the expression uses something not
covered here, in which case ``callgate_rules.cel.expression`` runs it on cel-python's
interpreter. The function is generated Python source compiled once (see ``codegen``): no
per-node dispatch, constants folded, literal regular expressions compiled once.

Semantics
---------
The reference is cel-python 0.5.0, the fallback, so that an expression means the same
whichever backend runs it. Where cel-python and the CEL specification agree, so does this
compiler, including every error: a missing key, an out-of-range index, int64 overflow,
division or modulo by zero, ``no such overload`` for operands of the wrong types.

Where cel-python lets a Python operator leak through on operand types CEL has no overload
for, the compiler raises the specification's error instead of inventing a value:

- ``1.0 + 1``, ``true + 1``, ``true == 1``, ``true < 2``, ``1.5 < true``: arithmetic never
  mixes int and double, and bools are not numbers (cel-python refuses ``1 + 1.0`` and
  ``1 == true`` but not these mirror images);
- ``(0.5 + 0.5) == 1``: an error like ``d == 1`` (cel-python's double arithmetic yields a
  plain Python float, which then compares with ints);
- ``'a' % x``, ``true * 'a'``, ``duration * 2``, ``-duration``, ``'abc'[0]``, ``list[true]``,
  ``list[-1]``, ``'a' in 'abc'``, ``[1].contains(1)``: no such overloads in CEL;
- ``1 && true`` and ``[1].all(x, x)``: logic needs bools (cel-python returns the ``1``);
- ``filter``/``exists_one`` predicates and ``?:`` tests must be bools (no truthiness), and
  macros iterate lists and maps only (not strings);
- map literal keys are strings, ints or bools (``{1.5: 'a'}`` and ``{null: 1}`` are errors);
- ``int(true)``, ``int(null)``, ``double(null)``, ``bool(1)``, ``int(' 12')``,
  ``int('0x10')``, ``duration(1)``: conversions the specification does not define;
- duration results outside ±10,000 years, and ``int()`` of a double at the int64 limits.

Where cel-python's answer is a deliberate choice rather than a leak, the compiler follows it:
``has(a.b.c)`` is false (not an error) when ``a.b`` is missing or not a map; ``size(null)`` is
0; timestamps parse as cel-python parses them and print as it prints them. Numbers are
equal only to numbers of their own type (``1 == 1.0`` is an error; the current specification
would say true) and order only against their own type, except that a double orders against
an int (``1.5 < 2`` is true, ``2 < 1.5`` an error), exactly as cel-python answers.

Where cel-python is plainly wrong or lacks a feature, the compiler follows the specification:
double division is IEEE 754 (``-1.0/0.0`` is ``-inf``, ``0.0/0.0`` is NaN; cel-python says
``inf`` for both); ``string(true)`` is ``"true"`` (cel-python: ``"True"``); an error inside
``map``/``filter``/``exists_one`` is absorbed by an enclosing ``&&``/``||``/``?:`` like any
other (cel-python lets it escape); ``[1] != null`` is true, the negation of ``[1] == null``
(cel-python fails the former and answers the latter); the three-argument
``map(x, filter, transform)`` works (cel-python always fails it);
``('a' + 'b').contains('a')`` works (cel-python's concatenation loses the string type that
carries ``contains``).

Left to cel-python (``compile_tree`` returns ``None``): unsigned integers, ``type()`` and
type names as values, protobuf messages and packages, ``.name`` root-scope names, the
two-variable and ``reduce``/``min`` macros, functions cel-python lacks (``lowerAscii``),
and calls with unexpected argument counts. Variables are looked up by plain name: an
activation key with a dot in it (``{"a.b": 1}`` read as ``a.b``) is not resolved the way
cel-python's qualified-name lookup does; callgate binds plain identifiers.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from lark import Token, Tree

from callgate_rules.cel.compiler import runtime
from callgate_rules.cel.compiler.codegen import Program, generate
from callgate_rules.cel.compiler.lowering import Unsupported, lower

__all__ = ["FAILURES", "Compiled", "Inline", "compile_program", "compile_tree",
           "python_source"]

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
    """An expression compiled: its function, and its code to inline if it allows that."""

    evaluate: Evaluator
    inline: Inline | None


def compile_tree(tree: Tree[Token]) -> Evaluator | None:
    """A Python function evaluating the parsed CEL expression ``tree``, or ``None`` when the
    expression needs cel-python. Run-time failures raise ``CelEvaluationError``."""
    compiled = compile_program(tree)
    return compiled.evaluate if compiled is not None else None


def compile_program(tree: Tree[Token]) -> Compiled | None:
    """``compile_tree``, with the code to inline the expression where it allows that."""
    program = _program(tree)
    if program is None:
        return None
    try:
        with warnings.catch_warnings():
            # "[1]['a']" draws a SyntaxWarning from CPython; in CEL it is a run-time error.
            warnings.simplefilter("ignore", SyntaxWarning)
            code = compile(program.source, "<cel>", "exec")
    except (SyntaxError, RecursionError):
        return None  # nesting beyond what CPython compiles: cel-python copes
    exec(code, program.namespace)
    inline = None
    if program.body is not None:
        # just the globals the lines name (a helper function keeps the program's own)
        named = set(_NAME.findall("\n".join(program.body)))
        inline = Inline(tuple(program.body), {name: value for name, value
                                              in program.namespace.items() if name in named})
    return Compiled(cast(Evaluator, program.namespace["evaluate"]), inline)


def python_source(tree: Tree[Token]) -> str | None:
    """The generated Python source for ``tree`` (for debugging), or ``None`` if unsupported."""
    program = _program(tree)
    return program.source if program is not None else None


def _program(tree: Tree[Token]) -> Program | None:
    try:
        return generate(lower(tree))
    except (Unsupported, RecursionError):
        return None
