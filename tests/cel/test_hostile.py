"""Hostile expressions through the whole pipeline (parse, lower, generate, CPython's compile):
at the limits they compile and run, past them they are a syntax error with a place, and
nothing ever raises RecursionError or runs for long."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.cel.errors import CelEvaluationError, CelSyntaxError
from callgate_rules.cel.expression import compile_expression
from callgate_rules.cel.parser import MAX_DEPTH, MAX_SOURCE_LENGTH

DEPTH = MAX_DEPTH - 1
VARIABLES: dict[str, Any] = {"x": 1, "a": {"b": {}}, "l": [1]}
# (source at the deepest nesting allowed, its value)
SHAPES: dict[str, tuple[str, Any]] = {
    "parentheses": ("(" * DEPTH + "x" + ")" * DEPTH, 1),
    "negations": ("-" * DEPTH + "x", -1),
    "nots": ("!" * DEPTH + "true", False),
    "sums": ("x" + " + x" * DEPTH, DEPTH + 1),
    "comparisons": ("x == " * (DEPTH - 1) + "x", None),
    "calls": ("int(" * (DEPTH - 1) + "x" + ")" * (DEPTH - 1), 1),
    "lists": ("[" * DEPTH + "]" * DEPTH, None),
    "maps": ("{'k': " * (DEPTH - 1) + "1" + "}" * (DEPTH - 1), None),
    "conditionals": ("false ? 0 : " * DEPTH + "x", 1),
    "macros": ("[" + "[" * 30 + "x" + "]" * 30 + "]" + ".map(v, v)" * 20, None),
    "selections": ("a" + ".?b" * 60 + ".hasValue()", False),
}


def call_with_frames(frames: int, function: Callable[[], Any]) -> Any:
    """``function()`` called ``frames`` Python frames deep, as a host application might."""
    if frames == 0:
        return function()
    return call_with_frames(frames - 1, function)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_deepest_allowed_expression_compiles_and_runs_under_a_deep_caller(
    shape: str,
) -> None:
    source, expected = SHAPES[shape]
    started = time.perf_counter()
    compiled = call_with_frames(200, lambda: compile_expression(source))
    value = call_with_frames(200, lambda: compiled(VARIABLES))
    if expected is not None:
        assert value == expected
    assert time.perf_counter() - started < 5.0


@pytest.mark.parametrize("source", [
    "(" * (MAX_DEPTH + 1) + "x" + ")" * (MAX_DEPTH + 1),
    "x" + " + x" * (MAX_DEPTH + 1),
    "int(" * (MAX_DEPTH + 1) + "x" + ")" * (MAX_DEPTH + 1),
    "[" * 100_000,
    "x" + ".map(v, v)" * 5_000,
])
def test_deeper_is_a_syntax_error(source: str) -> None:
    with pytest.raises(CelSyntaxError, match="deeper than|characters long"):
        call_with_frames(200, lambda: compile_expression(source[:MAX_SOURCE_LENGTH]))


@pytest.mark.parametrize("source", [
    " || ".join(f"x == {i}" for i in range(6_000)),  # balanced: shallow however long
    "[" + ", ".join(str(i) for i in range(15_000)) + "]",
    "{" + ", ".join(f"'k{i}': {i}" for i in range(6_000)) + "}",
    "'" + "a" * (MAX_SOURCE_LENGTH - 2) + "'",
])
def test_long_flat_expressions_compile_in_bounded_time(source: str) -> None:
    assert len(source) <= MAX_SOURCE_LENGTH
    started = time.perf_counter()
    compiled = compile_expression(source)
    compiled(VARIABLES)
    assert time.perf_counter() - started < 20.0  # a loaded 2-core machine; about 2 s idle


def test_too_long_is_refused_before_any_work() -> None:
    started = time.perf_counter()
    with pytest.raises(CelSyntaxError, match="more than the 100000 allowed"):
        compile_expression("x" * (MAX_SOURCE_LENGTH + 1))
    assert time.perf_counter() - started < 0.5


TOKENS = ["x", "l", "a", "1", "2u", "1.5", "'s'", "b'b'", "null", "true", "+", "-", "*", "/",
          "%", "(", ")", "[", "]", "[?", "{", "}", ":", "?", ",", ".", ".?", "b", "v", "k",
          "map", "all", "exists", "existsOne", "filter", "size", "has", "int", "uint",
          "string", "type", "dyn", "cel.bind", "transformList", "sortBy", "optional.of",
          "orValue", "&&", "||", "!", "==", "!=", "<", ">=", "in", "`b`", ".a"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=25))
def test_any_token_soup_compiles_or_is_refused_and_never_crashes(tokens: list[str]) -> None:
    """Parsing and compiling raise nothing but ``CelSyntaxError`` (``CelCompileError``
    included); what compiles evaluates to a value or a ``CelEvaluationError``."""
    source = " ".join(tokens)
    try:
        compiled = compile_expression(source)
    except CelSyntaxError:
        return
    try:
        compiled(VARIABLES)
    except CelEvaluationError:
        pass
