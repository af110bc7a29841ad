"""cel-go's regex, encoders and optionals extensions (callgate_rules.cel.library.regex,
encoders, optionals): RE2 semantics in linear time, base64 with optional padding, optionals'
values and errors, and the short-circuiting forms of ``or``/``orValue``."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.expression import compile_expression
from callgate_rules.cel.library import FUNCTIONS, optionals
from callgate_rules.cel.values import NONE, Optional, UInt


def call(name: str, *arguments: Any) -> Any:
    return FUNCTIONS[name].implementation(*arguments)


@pytest.mark.parametrize(("name", "arguments", "expected"), [
    ("regex.replace", ("hello world hello", "hello", "hi"), "hi world hi"),
    ("regex.replace", ("banana", "a", "x", 0), "banana"),
    ("regex.replace", ("banana", "a", "x", 1), "bxnana"),
    ("regex.replace", ("banana", "a", "x", 2), "bxnxna"),
    ("regex.replace", ("banana", "a", "x", -12), "bxnxnx"),
    ("regex.replace", ("foo bar", "(fo)o (ba)r", r"\2 \1"), "ba fo"),
    ("regex.replace", ("a.b", r"\.", r"\\"), "a\\b"),
    ("regex.replace", ("abc", "x*", "-"), "-a-b-c-"),  # Go: no empty match after a match
    ("regex.replace", ("ab", "(x)?b", r"[\1]"), "a[]"),  # a group that did not take part
    ("regex.extract", ("hello world", "hello(.*)"), Optional(" world", True)),
    ("regex.extract", ("item-A, item-B", r"item-(\w+)"), Optional("A", True)),
    ("regex.extract", ("HELLO", "hello"), NONE),
    ("regex.extract", ("ab", "a(x)?"), NONE),  # the one group matched nothing
    ("regex.extract", ("©αT", "α."), Optional("αT", True)),
    ("regex.extractAll", ("id:123, id:456", r"id:\d+"), ["id:123", "id:456"]),
    ("regex.extractAll", ("id:123, id:456", "assa"), []),
    ("regex.extractAll", ("id:123, id:456", r"id:(\d+)"), ["123", "456"]),
    ("regex.extractAll", ("a1 b c3", r"[a-c](\d)?"), ["1", "3"]),
    ("regex.extractAll", ("baaac", "a*"), ["", "aaa", ""]),
    ("base64.encode", (b"hello",), "aGVsbG8="),
    ("base64.encode", (b"",), ""),
    ("base64.decode", ("aGVsbG8=",), b"hello"),
    ("base64.decode", ("aGVsbG8",), b"hello"),
    ("optional.of", (None,), Optional(None, True)),
    ("optional.none", (), NONE),
    ("optional.ofNonZeroValue", (42,), Optional(42, True)),
    ("optional.ofNonZeroValue", (NONE,), Optional(NONE, True)),
    ("hasValue", (Optional(None, True),), True),
    ("hasValue", (NONE,), False),
    ("value", (Optional(42, True),), 42),
    ("orValue", (NONE, 42), 42),
    ("orValue", (Optional(1, True), 42), 1),
    ("or", (NONE, Optional(2, True)), Optional(2, True)),
    ("or", (Optional(1, True), NONE), Optional(1, True)),
    ("or", (NONE, NONE), NONE),
    ("optional.unwrap", ([Optional(1, True), NONE, Optional(None, True)],), [1, None]),
])
def test_documented_results(name: str, arguments: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *arguments) == expected


@pytest.mark.parametrize("zero", [
    0, UInt(0), 0.0, "", b"", False, None, [], {}, timedelta(0),
    datetime(1970, 1, 1, tzinfo=UTC),
])
def test_zero_values_make_no_optional(zero: Any) -> None:
    assert call("optional.ofNonZeroValue", zero) == NONE


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("regex.extract", ("a", "(a)(b)"), "regular expression has more than one capturing group"),
    ("regex.extractAll", ("a", "(a)(b)"), "regular expression has more than one capturing"),
    ("regex.replace", ("test", "(.)", r"\2"),
     "replacement string references group 2 but regex has only 1 group(s)"),
    ("regex.replace", ("id=1", r"id=(\d)", r"v: \x"), "invalid replacement string"),
    ("regex.replace", ("a", "a", "\\"), "invalid replacement string"),
    ("regex.replace", ("foo bar", "(", "x"), "given regex is invalid"),
    ("regex.extract", ("aa", r"(a)\1"), "given regex is invalid"),  # no backreferences
    ("regex.replace", ("a", "a", "b", 2**40), "integer overflow"),
    ("regex.extract", (1, "a"), "no such overload"),
    ("base64.decode", ("a!b=",), "base64.decode: illegal base64 data"),
    ("base64.decode", ("é",), "base64.decode: illegal base64 data"),
    ("base64.encode", ("text",), "no such overload"),
    ("value", (NONE,), "optional.none() dereference"),
    ("hasValue", (1,), "no such overload"),
    ("or", (NONE, 1), "no such overload"),
    ("orValue", ("x", 1), "no such overload"),
])
def test_errors(name: str, arguments: tuple[Any, ...], message: str) -> None:
    with pytest.raises(CelEvaluationError) as raised:
        call(name, *arguments)
    assert str(raised.value).startswith(message)


def test_or_and_or_value_evaluate_their_argument_only_when_needed() -> None:
    def failing() -> Any:
        raise CelEvaluationError("evaluated")

    assert optionals.or_else(Optional(1, True), failing) == Optional(1, True)
    assert optionals.or_value_else(Optional(1, True), failing) == 1
    assert optionals.or_value_else(NONE, lambda: 7) == 7
    with pytest.raises(CelEvaluationError, match="evaluated"):
        optionals.or_else(NONE, failing)


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    text = "a" * 20_000 + "!"
    started = time.perf_counter()
    assert call("regex.extract", text, "^(a+)+$") == NONE
    assert call("regex.replace", text, "(a|aa)+$", "x") == text
    assert time.perf_counter() - started < 1.0  # a backtracking engine takes years


def test_lone_surrogates_are_read_as_replacement_characters() -> None:
    assert call("regex.extractAll", "a\ud800b", ".") == ["a", "\ufffd", "b"]


@pytest.mark.parametrize("source", [
    "optional.of(1).orValue(1 / 0) == 1",
    "optional.of(1).or(optional.of(1 / 0)).value() == 1",
])
def test_the_compiler_evaluates_the_alternative_only_when_needed(source: str) -> None:
    assert compile_expression(source)({}) is True
