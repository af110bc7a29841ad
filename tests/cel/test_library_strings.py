"""cel-go's strings extension (callgate_rules.cel.library.strings and formatting): the
documented examples, the conformance file's cases and the error cases, called through the
library's table as the compiler calls them."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library import FUNCTIONS
from callgate_rules.cel.values import CelType, UInt


def call(name: str, *arguments: Any) -> Any:
    return FUNCTIONS[name].implementation(*arguments)


@pytest.mark.parametrize(("name", "arguments", "expected"), [
    ("charAt", ("hello", 4), "o"),
    ("charAt", ("hello", 5), ""),
    ("charAt", ("¿cómo?", 2), "ó"),  # code points, not bytes
    ("indexOf", ("hello mellow", ""), 0),
    ("indexOf", ("hello mellow", "ello"), 1),
    ("indexOf", ("hello mellow", "jello"), -1),
    ("indexOf", ("hello mellow", "", 2), 2),
    ("indexOf", ("hello mellow", "ello", 2), 7),
    ("indexOf", ("ta©o©αT", "©", 3), 4),
    ("indexOf", ("a", "abc"), -1),
    ("lastIndexOf", ("hello mellow", ""), 12),
    ("lastIndexOf", ("hello mellow", "ello"), 7),
    ("lastIndexOf", ("hello mellow", "jello"), -1),
    ("lastIndexOf", ("hello mellow", "ello", 6), 1),
    ("lastIndexOf", ("ta©o©αT", "©", 3), 2),
    ("lastIndexOf", ("bananananana", "nana", 7), 6),
    ("lowerAscii", ("TacoCÆt Xii",), "tacocÆt xii"),
    ("upperAscii", ("TacoCÆt Xii",), "TACOCÆT XII"),
    ("replace", ("hello hello", "he", "we"), "wello wello"),
    ("replace", ("hello hello", "he", "we", -1), "wello wello"),
    ("replace", ("hello hello", "he", "we", 1), "wello hello"),
    ("replace", ("hello hello", "he", "we", 0), "hello hello"),
    ("replace", ("hello hello", "", "_"), "_h_e_l_l_o_ _h_e_l_l_o_"),
    ("replace", ("hello hello", "h", ""), "ello ello"),
    ("split", ("hello hello hello", " "), ["hello", "hello", "hello"]),
    ("split", ("hello hello hello", " ", 0), []),
    ("split", ("hello hello hello", " ", 1), ["hello hello hello"]),
    ("split", ("hello hello hello", " ", 2), ["hello", "hello hello"]),
    ("split", ("hello hello hello", " ", -1), ["hello", "hello", "hello"]),
    ("split", ("©αT", ""), ["©", "α", "T"]),
    ("split", ("©αT", "", 2), ["©", "αT"]),
    ("split", ("", ","), [""]),
    ("substring", ("tacocat", 4), "cat"),
    ("substring", ("tacocat", 7), ""),
    ("substring", ("tacocat", 0, 4), "taco"),
    ("substring", ("ta©o©αT", 2, 6), "©o©α"),
    ("trim", ("  \ttrim\n    ",), "trim"),
    ("trim", ("\u2005\u3000 x \u00a0\u2028",), "x"),
    ("trim", ("\u200bx\u200b",), "\u200bx\u200b"),  # zero-width space is not white space
    ("trim", ("\x1cx\x1c",), "\x1cx\x1c"),  # Go keeps the ASCII separators Python strips
    ("join", (["hello", "mellow"],), "hellomellow"),
    ("join", (["hello", "mellow"], " "), "hello mellow"),
    ("join", ([], "/"), ""),
    ("strings.quote", ('single-quote with "double quote"',), '"single-quote with \\"double quote\\""'),
    ("strings.quote", ("two escape sequences \a\n",), '"two escape sequences \\a\\n"'),
    ("strings.quote", ("\b\f\r\t\v\\",), '"\\b\\f\\r\\t\\v\\\\"'),
    ("strings.quote", ("lone \ud800 surrogate",), '"lone \ufffd surrogate"'),
    ("reverse", ("gums",), "smug"),
    ("reverse", ("John Smith",), "htimS nhoJ"),
    ("reverse", ("©αT",), "Tα©"),
])
def test_documented_results(name: str, arguments: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *arguments) == expected


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("charAt", ("tacocat", 30), "index out of range: 30"),
    ("charAt", ("tacocat", -1), "index out of range: -1"),
    ("indexOf", ("tacocat", "a", 30), "index out of range: 30"),
    ("indexOf", ("tacocat", "a", -1), "index out of range: -1"),
    ("lastIndexOf", ("tacocat", "a", -1), "index out of range: -1"),
    ("lastIndexOf", ("tacocat", "a", 30), "index out of range: 30"),
    ("substring", ("tacocat", -1), "index out of range: -1"),
    ("substring", ("tacocat", 8), "index out of range: 8"),
    ("substring", ("tacocat", 2, 1), "invalid substring range. start: 2, end: 1"),
    ("substring", ("tacocat", 0, 8), "index out of range: 8"),
    ("join", (["a", 1],), "join: invalid input: 1"),
    ("split", ("a b", 1), "no such overload"),
    ("charAt", ("abc", 1.0), "no such overload"),
    ("trim", (b"abc",), "no such overload"),
    ("replace", ("abc", "a", "b", "1"), "no such overload"),
])
def test_errors(name: str, arguments: tuple[Any, ...], message: str) -> None:
    with pytest.raises(CelEvaluationError, match="^" + message.replace(".", r"\.")):
        call(name, *arguments)


@pytest.mark.parametrize(("template", "arguments", "expected"), [
    ("no substitution", [], "no substitution"),
    ("%%%s%%", ["text"], "%text%"),
    ("%d %d %d, %s %s %s", [1, 2, 3, "A", "B", "C"], "1 2 3, A B C"),
    ("%.3f", [1.2345], "1.234"),
    ("this is 5 in binary: %b", [5], "this is 5 in binary: 101"),
    ("%b", [UInt(64)], "1000000"),
    ("%b", [True], "1"),
    ("%o", [11], "13"),
    ("%x is 20 in hexadecimal", [30], "1e is 20 in hexadecimal"),
    ("%X", [UInt(6000)], "1770"),
    ("%x", ["Hello world!"], "48656c6c6f20776f726c6421"),
    ("%X", [b"byte string"], "6279746520737472696E67"),
    ("%.6e", [1052.032911275], "1.052033e+03"),
    ("%f", [2], "2.000000"),
    ("%e", [UInt(3)], "3.000000e+00"),
    ("%e %d %f", [math.nan, math.inf, -math.inf], "NaN Infinity -Infinity"),
    ("%s", [None], "null"),
    ("%s", [b"xyz"], "xyz"),
    ("%s", [CelType("string")], "string"),
    ("%s", [timedelta(hours=1, minutes=45, seconds=47)], "6347s"),
    ("%s", [[None, [9, 8], "abc"]], "[null, [9, 8], abc]"),
    ("%s", [{"key1": b"xyz", "key5": None, "key4": True}], "{key1: xyz, key4: true, key5: null}"),
    ("%s", [{"strKey": "x", 6: "y", True: 42}], "{6: y, strKey: x, true: 42}"),
    ("%s, %s", [True, False], "true, false"),
    ("%.0f %.0f %.0f", [1.5, 2.5, 3.4999], "2 2 3"),
    ("%.3f", [-123.4999], "-123.500"),
    ("%.5f", [-1.2], "-1.20000"),
    ("%d", [-10], "-10"),
    ("%x", [-10], "-a"),
])
def test_format(template: str, arguments: list[Any], expected: str) -> None:
    assert call("format", template, arguments) == expected


def test_format_timestamp_as_rfc3339() -> None:
    moment = datetime(2023, 2, 3, 23, 31, 20, tzinfo=UTC)
    assert call("format", "%s", [moment]) == "2023-02-03T23:31:20Z"


@pytest.mark.parametrize(("template", "arguments", "message"), [
    ("%a", [1], 'could not parse formatting clause: unrecognized formatting clause "a"'),
    ("%E", [0.5], 'could not parse formatting clause: unrecognized formatting clause "E"'),
    ("%d %d %d", [0, 1], "index 2 out of range"),
    ("string is %b", ["abc"], "error during formatting: only integers and bools can be "
                              "formatted as binary, was given string"),
    ("%d", [timedelta(minutes=30)], "error during formatting: decimal clause can only be used "
                                    "on integers, was given google.protobuf.Duration"),
    ("%d", [1.5], "error during formatting: decimal clause can only be used on integers, "
                  "was given double"),
    ("%o", ["a string"], "error during formatting: octal clause can only be used on integers, "
                         "was given string"),
    ("%x", [0.5], "error during formatting: only integers, byte buffers, and strings can be "
                  "formatted as hex, was given double"),
    ("%e", [None], "error during formatting: scientific clause can only be used on doubles, "
                   "was given null_type"),
    ("%f", [None], "error during formatting: fixed-point clause can only be used on doubles, "
                   "was given null_type"),
    ("%", [], "could not parse formatting clause: unexpected end of format string"),
    ("%.f", [1.0], "could not parse formatting clause: unable to convert precision"),
    ("%.99999999f", [1.0], "could not parse formatting clause: precision 99999999 is over"),
])
def test_format_errors(template: str, arguments: list[Any], message: str) -> None:
    with pytest.raises(CelEvaluationError) as raised:
        call("format", template, arguments)
    assert str(raised.value).startswith(message)


def test_format_needs_a_list() -> None:
    with pytest.raises(CelEvaluationError, match="no such overload"):
        call("format", "%s", "not a list")


def test_hostile_sizes_stay_linear() -> None:
    text = "ab" * 50_000
    assert call("indexOf", text, "ba" * 10 + "x") == -1
    assert len(call("split", text, "")) == 100_000
    assert call("lastIndexOf", text, "") == 100_000
