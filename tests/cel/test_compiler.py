"""The CEL → Python compiler (callgate_rules.cel.compiler), one semantic point at a time.

Each test evaluates through ``compile_expression`` (the one backend: there is no fallback);
where the point is agreement with cel-python, it compares with cel-python, the test-only
oracle, directly.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import pytest

from callgate_rules.cel.compiler import codegen, lowering, python_source, runtime
from callgate_rules.cel.compiler.regex import compile_pattern, to_python_syntax
from callgate_rules.cel.errors import CelCompileError, CelEvaluationError, CelSyntaxError
from callgate_rules.cel.expression import compile_expression, parse
from callgate_rules.cel.library import FUNCTIONS
from callgate_rules.cel.values import NONE, CelType, Optional, UInt
from tests.cel.cel_python_oracle import cel_python_evaluator
from tests.cel.conformance_harness import same_value

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
DATA: dict[str, Any] = {
    "m": {"a": 1, "b": "x", "nested": {"c": True}, "list": [1, 2, 3]},
    "l": [1, 2, 3],
    "names": ["ann", "bob"],
    "i": 7,
    "zero": 0,
    "d": 1.5,
    "s": "héllo",
    "t": True,
    "f": False,
    "n": None,
    "now": NOW,
}


def evaluate(source: str, variables: Mapping[str, Any] | None = None) -> Any:
    expression = compile_expression(source)
    return expression(DATA if variables is None else variables)


def error_of(source: str, variables: Mapping[str, Any] | None = None) -> str:
    with pytest.raises(CelEvaluationError) as raised:
        evaluate(source, variables)
    return str(raised.value)


def outcome(evaluator: Any, variables: Mapping[str, Any]) -> tuple[str, Any]:
    try:
        return "value", evaluator(variables)
    except CelEvaluationError:
        return "error", None


def assert_agrees_with_cel_python(source: str, variables: Mapping[str, Any] = DATA) -> None:
    compiled = compile_expression(source)
    ours = outcome(compiled, variables)
    theirs = outcome(cel_python_evaluator(source), variables)
    assert ours[0] == theirs[0], f"{source!r}: compiled {ours}, cel-python {theirs}"
    if ours[0] == "value":
        assert same_value(theirs[1], ours[1]), f"{source!r}: {ours[1]!r} != {theirs[1]!r}"


# Backend selection ---------------------------------------------------------------------------


def test_a_typical_rule_compiles_and_decides() -> None:
    rule = (
        "ticket.tenant == actor.tenant && !ticket.deleted && "
        "args.assigneeId in team.members && timestamp(args.dueAt) > now"
    )
    variables = {
        "ticket": {"tenant": "acme", "deleted": False},
        "actor": {"tenant": "acme"},
        "args": {"assigneeId": "u2", "dueAt": "2024-07-01T00:00:00Z"},
        "team": {"members": ["u1", "u2"]},
        "now": NOW,
    }
    assert evaluate(rule, variables) is True
    assert evaluate(rule, {**variables, "actor": {"tenant": "other"}}) is False


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("1u + 2u", UInt(3)),  # unsigned integers
        ("uint(1) == 1", True),
        ("18446744073709551615u / 2u", UInt(2**63 - 1)),
        ("type(1) == int && type(1u) == uint && type(type) == type", True),  # type values
        ("int", CelType("int")),
        ("type(timestamp('2024-01-01T00:00:00Z')) == google.protobuf.Timestamp", True),
        ("[1].exists(i, v, v > 0 && i == 0)", True),  # two-variable macros
        ("{'a': 1}.all(k, v, k == 'a' && v == 1)", True),
        ("[1, 2].transformList(i, v, i * v)", [0, 2]),
        ("{'a': 1}.transformMap(k, v, v > 0, k + k)", {"a": "aa"}),
        ("{'a': 1}.transformMapEntry(k, v, {v: k})", {1: "a"}),
        ("cel.bind(x, 2, x * x)", 4),
        ("[3, 1, 2].sortBy(x, -x)", [3, 2, 1]),
        (".i", 7),  # root-scope names
        ("[0].exists(i, .i == 7)", True),
        ("m.?a", Optional(1, True)),  # optionals
        ("m.?zz", NONE),
        ("m.?nested.c", Optional(True, True)),
        ("l[?5]", NONE),
        ("[?m.?zz, ?m.?a]", [1]),
        ("{?'k': m.?zz, 'j': 1}", {"j": 1}),
        ("m.?a.optMap(x, x + 1)", Optional(2, True)),
        ("m.`a`", 1),  # backtick field names
        ("'\\x41\\u00e9\\U0001F600'", "Aé\U0001F600"),
        ("b'\\xff' == bytes('\\u00ff')", False),
    ],
)
def test_core_constructs_compile(source: str, expected: Any) -> None:
    assert same_value(expected, evaluate(source)), evaluate(source)


@pytest.mark.parametrize(("source", "message", "column"), [
    ("'a b'.splt(' ')", "unknown function 'splt' (did you mean split?)", 7),
    ("sizee(l)", "unknown function 'sizee' (did you mean size?)", 1),
    ("math.gretest(1, 2)", "unknown function 'math.gretest' (did you mean math.greatest?)",
     6),
    ("size()", "size(...) takes 1 argument, not 0", 1),
    ("'a'.startsWith()", "x.startsWith(...) takes 1 argument, not 0", 5),
    ("pkg.Msg{f: 1}", "needs protobuf message types", 1),
    ("[1, 2].reduce(r, x, 0, r + x)", "unknown function 'reduce'", 8),
])
def test_what_cannot_compile_is_a_compile_error_at_its_place(
    source: str, message: str, column: int,
) -> None:
    if "math." in source and "math.greatest" not in FUNCTIONS:
        pytest.skip("the math library is not registered")
    with pytest.raises(CelCompileError) as raised:
        compile_expression(source)
    assert message in str(raised.value)
    assert (raised.value.line, raised.value.column) == (1, column)


@pytest.mark.parametrize("source,expected", [
    ("'AbC@Ex.ORG'.lowerAscii()", "abc@ex.org"),
    ("'straße ÄÖ'.upperAscii()", "STRAßE ÄÖ"),  # only ASCII letters change
])
def test_callgate_string_extensions(source: str, expected: str) -> None:
    assert compile_expression(source)({}) == expected


# && || ?: --------------------------------------------------------------------------------------

ERROR = "m.missing == 1"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (f"false && {ERROR}", False),
        (f"{ERROR} && false", False),
        (f"true || {ERROR}", True),
        (f"{ERROR} || true", True),
        (f"true && {ERROR} && false", False),
        (f"false || {ERROR} || true", True),
        (f"true ? 1 : {ERROR}", 1),
        (f"false ? {ERROR} : 2", 2),
        ("1 && false", False),  # a non-bool is absorbed like an error
    ],
)
def test_logic_absorbs_errors_commutatively(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(
    "source",
    [f"true && {ERROR}", f"{ERROR} && true", f"false || {ERROR}", f"{ERROR} ? 1 : 2",
     f"{ERROR} || {ERROR}", "1 && true", "false || 'yes'", "'no' ? 1 : 2", "!1"],
)
def test_logic_reports_errors_nothing_absorbs(source: str) -> None:
    error_of(source)


def test_logic_error_message_names_the_failure() -> None:
    assert "no such key: 'missing'" in error_of(f"true && {ERROR}")
    assert "no such overload" in error_of("true && 1")


def test_logic_chains_short_circuit_without_evaluating_the_rest() -> None:
    # The second operand would raise if evaluated; a decided chain must not need it.
    assert evaluate("false && m.missing.deeper", DATA) is False
    assert evaluate("l.size() > 2 || 1 / zero == 1") is True


# Integer arithmetic -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("7 / 2", 3),
        ("-7 / 2", -3),  # truncation toward zero, not floor
        ("7 / -2", -3),
        ("-7 % 3", -1),  # the sign follows the dividend
        ("7 % -3", 1),
        ("-9223372036854775808 % -1", 0),
        ("i * 3 - 1", 20),
        ("-i", -7),
        ("9223372036854775807 - 1 + 1", INT64_MAX),
        ("-9223372036854775808", INT64_MIN),
    ],
)
def test_integer_arithmetic(source: str, expected: int) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("9223372036854775807 + i", "overflow"),
        ("-9223372036854775808 - i", "overflow"),
        ("4611686018427387904 * 2", "overflow"),
        ("-9223372036854775808 / -1", "overflow"),
        ("-(-9223372036854775807 - 1)", "overflow"),
        ("i / zero", "division by zero"),
        ("i % zero", "modulus by zero"),
    ],
)
def test_integer_errors(source: str, message: str) -> None:
    assert message in error_of(source)


def test_out_of_range_literal_is_a_syntax_error() -> None:
    with pytest.raises(CelSyntaxError, match="int64 range"):
        compile_expression("false && 9223372036854775808 == 1")


@pytest.mark.parametrize("source", ["1 + 1.0", "1.0 + 1", "true + 1", "i * d", "'a' + 1",
                                    "[1] + 1", "1.0 % 2.0", "-true", "-'a'"])
def test_no_implicit_numeric_or_bool_mixing(source: str) -> None:
    assert "no such overload" in error_of(source)


def test_double_arithmetic_is_ieee() -> None:
    assert evaluate("d * 2.0 + 0.5") == 3.5
    assert evaluate("1.0 / 0.0") == math.inf
    assert evaluate("-1.0 / 0.0") == -math.inf
    assert math.isnan(evaluate("0.0 / 0.0"))
    assert evaluate("0.0 / 0.0 == 0.0 / 0.0") is False


def test_concatenation() -> None:
    assert evaluate("'ab' + 'cd'") == "abcd"
    assert evaluate("b'ab' + b'c'") == b"abc"
    assert evaluate("l + [4]") == [1, 2, 3, 4]
    assert DATA["l"] == [1, 2, 3]


# Equality and ordering ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "1 == 1.0", "1.0 == 1", "1 != 1.0", "1 < 1.5", "1.5 < 2", "2.5 >= 2", "0.5 > 1",
        "i == d", "d < i", "i <= d",
        "'a' == 1", "'a' == true", "null == 'a'", "null == 1", "null == 1.5", "null == null",
        "[1] == null", "{'a': 1} == null", "[1] == 1", "'a' < 1", "null < 1", "[1] < [2]",
        "[1, 'a'] == [2, 1]", "[1, 'a'] == [1, 1]", "[1, [2]] == [1, [2]]", "[1] == [1.0]",
        "{'a': 1, 'b': 2} == {'b': 2, 'a': 1}", "{'a': 1} == {'a': 1.0}",
        "{'a': 1, 'b': 'x'} == {'a': 2, 'b': 1}", "now == now", "now < now + duration('1s')",
        "s == 'héllo'", "b'a' < b'b'", "false < true", "duration('1h') > duration('59m')",
    ],
)
def test_equality_and_ordering_agree_with_cel_python(source: str) -> None:
    assert_agrees_with_cel_python(source)


@pytest.mark.parametrize("source", ["true < 2", "1.5 < true"])
def test_bool_is_not_a_number(source: str) -> None:
    # cel-python answers "true < 2" as Python would; CEL has no such overload.
    assert "no such overload" in error_of(source)


@pytest.mark.parametrize("source", ["true == 1", "1 == true", "[true] == [1]", "1.0 == false"])
def test_bool_never_equals_a_number(source: str) -> None:
    # Heterogeneous equality: values of different types are unequal, and bool is no number.
    assert evaluate(source) is False
    assert_agrees_with_cel_python(source)


def test_inequality_is_the_negation_of_equality() -> None:
    assert evaluate("l != null") is True
    assert evaluate("s != 'x'") is True
    assert evaluate("i != 'x'") is True  # a number and a string are simply unequal


# Maps, lists, fields ------------------------------------------------------------------------


def test_field_access_and_missing_keys() -> None:
    assert evaluate("m.a") == 1
    assert evaluate("m['b']") == "x"
    assert evaluate("m.nested.c") is True
    assert error_of("m.zz") == "no such key: 'zz'"
    assert error_of("m['zz']") == "no such key: 'zz'"
    assert "no such overload" in error_of("m.a.b")  # selecting from an int
    assert "no such overload" in error_of("l.a")


def test_undeclared_variable() -> None:
    assert error_of("nobody.name == 'x'") == "undeclared reference to 'nobody'"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("has(m.a)", True),
        ("has(m.zz)", False),
        ("has(m.nested.c)", True),
        ("has(m.nested.zz)", False),
        ("has(m.zz.c)", False),  # like cel-python: a missing parent is not an error
        ("has(m.a.b)", False),  # nor is a parent that is not a map
        ("has(nobody.a)", False),
        ("has({'a': {'b': 1}}.a.b)", True),
        ("has([m][0].a)", True),
        ("l.all(x, !has(x.a))", True),
    ],
)
def test_has(source: str, expected: bool) -> None:
    assert evaluate(source) is expected
    assert_agrees_with_cel_python(source)


def test_list_indexing() -> None:
    assert evaluate("l[0] + l[2]") == 4
    assert evaluate("[[1, 2]][0][1]") == 2
    assert "out of range" in error_of("l[3]")
    assert "out of range" in error_of("l[-1]")  # no Python negative indexing
    assert evaluate("l[1.0]") == evaluate("l[1u]") == 2  # numbers index by value
    for source in ("l[1.5]", "l['a']", "l[true]", "s[0]"):
        assert "no such overload" in error_of(source)


def test_map_indexing_keeps_key_kinds_apart() -> None:
    assert evaluate("{1: 'a', 'b': 2}[1]") == "a"
    assert evaluate("{true: 'yes'}[true]") == "yes"
    assert "no such key" in error_of("{1: 'a'}[true]")
    assert "no such key" in error_of("{true: 'a'}[1]")
    assert evaluate("{1: 'a'}[1.0]") == evaluate("{1: 'a'}[1u]") == "a"  # by value


def test_map_literals() -> None:
    assert evaluate("{'a': i, 'b': [1]}") == {"a": 7, "b": [1]}
    assert "duplicate" in error_of("{'a': 1, 'a': 2}")
    assert "duplicate" in error_of("{1: 'a', true: 'b'}")  # Python would merge the keys
    assert "unsupported map key" in error_of("{1.5: 'a'}")


def test_literal_results_are_fresh_each_time() -> None:
    expression = compile_expression("[1, 2]")
    first = expression({})
    first.append(3)
    assert expression({}) == [1, 2]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("2 in l", True),
        ("5 in l", False),
        ("'bob' in names", True),
        ("'eve' in names", False),
        ("'a' in m", True),
        ("'zz' in m", False),
        ("'a' in [1, 'a']", True),  # a match wins over an incomparable element
        ("s in ['héllo', 'x']", True),
        ("'b' in {'a': 1, 1: 2} || true", True),
        ("'a' in [1, 2]", False),  # heterogeneous equality: unequal, not an error
        ("1 in [1.0]", True),
        ("1.0 in {1: 'a'}", True),
        ("'b' in {'a': 1, 1: 2}", False),
    ],
)
def test_in(source: str, expected: bool) -> None:
    assert evaluate(source) is expected
    assert_agrees_with_cel_python(source)


@pytest.mark.parametrize("source", ["1 in 'abc'", "'a' in 'abc'", "1 in i"])
def test_in_without_a_comparable_match_is_an_error(source: str) -> None:
    error_of(source)


# Macros --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("l.all(x, x > 0)", True),
        ("l.all(x, x > 1)", False),
        ("l.exists(x, x == 3)", True),
        ("l.exists(x, x == 4)", False),
        ("l.exists_one(x, x > 2)", True),
        ("l.exists_one(x, x > 1)", False),
        ("l.map(x, x * 2)", [2, 4, 6]),
        ("l.map(x, x > 1, x * 10)", [20, 30]),
        ("l.filter(x, x % 2 == 1)", [1, 3]),
        ("m.filter(k, k.size() == 1)", ["a", "b"]),
        ("m.exists(k, k == 'nested')", True),
        ("{'a': 1, 'b': 2}.map(k, k + '!')", ["a!", "b!"]),
        ("[].all(x, false)", True),
        ("[].exists(x, true)", False),
        ("[[1, 2], [3]].all(x, x.all(x, x > 0))", True),  # the inner x shadows the outer
        ("l.exists(i, i == 3) && i == 7", True),  # a macro variable shadows only inside
        ("l.map(x, l.filter(y, y < x))", [[], [1], [1, 2]]),
        ("[0, 1].exists(x, 1 / x > 0)", True),  # the error on 0 is absorbed by a true
        ("[1, 0].all(x, 1 / x > 1)", False),  # ... and by a false
    ],
)
def test_macros(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "[1, 0].all(x, 1 / x > 0)",
        "[0, 1].exists(x, 1 / x > 1)",
        "[0].exists_one(x, 1 / x > 0)",
        "[0].map(x, 1 / x)",
        "[0].filter(x, 1 / x > 0)",
        "l.filter(x, x)",  # predicates must be bools: no truthiness
        "l.exists_one(x, x)",
        "l.all(x, x)",
        "i.all(x, true)",
        "'abc'.exists(c, c == 'a')",
    ],
)
def test_macro_errors(source: str) -> None:
    error_of(source)


def test_errors_inside_macros_are_absorbed_like_any_other() -> None:
    # cel-python lets these escape the enclosing || and &&; CEL absorbs them.
    assert evaluate("true || [0].map(x, 1 / x) == []") is True
    assert evaluate("false && [0].exists_one(x, 1 / x > 0)") is False


# Functions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("size(s)", 5),  # code points, not bytes
        ("s.size()", 5),
        ("size(b'h\\xc3\\xa9')", 3),
        ("size(l)", 3),
        ("m.size()", 4),
        ("size(n)", 0),  # as in cel-python
        ("size('😀')", 1),
    ],
)
def test_size(source: str, expected: int) -> None:
    assert evaluate(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("s.contains('ll')", True),
        ("s.startsWith('hé')", True),
        ("s.endsWith('lo')", True),
        ("s.endsWith('x')", False),
        ("'abc'.matches('^a.c$')", True),
        ("'abc'.matches('b')", True),  # unanchored search
        ("'abc\\n'.matches('c$')", False),  # RE2's $ is the end of the text
        ("'٣'.matches('\\\\d')", False),  # RE2's \d is ASCII
        ("'a b'.matches('a\\\\sb')", True),
        ("matches('abc', 'B')", False),
        ("s.matches(names[0])", False),  # a pattern only known at run time
    ],
)
def test_string_functions(source: str, expected: bool) -> None:
    assert evaluate(source) is expected
    assert_agrees_with_cel_python(source)


def test_literal_patterns_compile_once() -> None:
    source = python_source(parse("s.matches('^h.*o$')"), FUNCTIONS)
    assert source is not None
    assert "_matches_compiled(" in source


def test_string_function_errors() -> None:
    assert "no such overload" in error_of("s.contains(1)")
    assert "no such overload" in error_of("l.contains(1)")  # cel-python allows this one
    assert "no such overload" in error_of("i.startsWith('a')")
    assert "invalid regular expression" in error_of("s.matches('(')")
    assert evaluate("false && s.matches('(')") is False  # a bad literal pattern is lazy


@pytest.mark.parametrize(
    ("pattern", "python"),
    [
        ("^a+$", "^a+\\Z"),
        ("a\\sb", "a[\\t\\n\\f\\r ]b"),
        ("[\\s\\d]", "[\\t\\n\\f\\r \\d]"),
        ("[]a]", "[\\]a]"),
        ("(?:ab)|c", "(?:ab)|c"),
        ("a\\.b", "a\\.b"),
        ("(?i)abc", None),  # flags: matched by RE2
        ("\\pL", None),
        ("[[:alpha:]]", None),
        ("a{,2}", None),
        ("(a)\\1", None),
    ],
)
def test_regex_translation(pattern: str, python: str | None) -> None:
    assert to_python_syntax(pattern) == python


def test_patterns_outside_the_python_subset_still_match_with_re2() -> None:
    assert compile_pattern("(?i)^ABC$").search("abc") is True
    assert compile_pattern("\\pL+").search("é") is True


# Conversions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("int('-42')", -42),
        ("int(1.9)", 1),
        ("int(-1.9)", -1),
        ("int(i)", 7),
        ("int(timestamp('2009-02-13T23:31:30Z'))", 1234567890),
        ("double(i)", 7.0),
        ("double('2.5e3')", 2500.0),
        ("string(i)", "7"),
        ("string(1.5)", "1.5"),
        ("string(b'abc')", "abc"),
        ("string(true)", "true"),  # CEL's spelling; cel-python says "True"
        ("string(duration('90s'))", "90s"),
        ("string(timestamp('2024-01-01T10:00:00+05:30'))", "2024-01-01T04:30:00Z"),
        ("bool('true')", True),
        ("bool('f')", False),
        ("bytes('é')", "é".encode()),
        ("dyn(m).a", 1),
    ],
)
def test_conversions(source: str, expected: Any) -> None:
    assert same_value(expected, evaluate(source))


@pytest.mark.parametrize(
    "source",
    ["int('x')", "int(' 12')", "int('1e3')", "int(1e99)", "int(0.0 / 0.0)", "int(true)",
     "int(null)", "double('x')", "double(null)", "bool('yes')", "bool(1)", "string(null)",
     "string(b'\\xff')", "string([1])", "bytes(1)", "duration(1)"],
)
def test_conversion_errors(source: str) -> None:
    error_of(source)


# Timestamps and durations ---------------------------------------------------------------------


def test_timestamps() -> None:
    assert evaluate("timestamp('2024-06-01T12:00:00Z') == now") is True
    assert evaluate("timestamp('2024-06-01T14:00:00+02:00') == now") is True
    assert evaluate("timestamp('2024-06-01T12:00:00.5Z') > now") is True
    assert evaluate("now + duration('1h') > now") is True
    assert evaluate("now - duration('1h30m')") == NOW - timedelta(minutes=90)
    assert evaluate("now - timestamp('2024-06-01T00:00:00Z')") == timedelta(hours=12)
    assert evaluate("duration('1h30m') == duration('90m')") is True
    assert evaluate("duration('1.5s') + duration('500ms')") == timedelta(seconds=2)


def test_timestamps_are_rfc3339_texts() -> None:
    for source in ("timestamp('2024-01-01')", "timestamp('2024-01-01T00:00:00')",
                   "timestamp('2024-02-30T00:00:00Z')", "timestamp('nonsense')",
                   "timestamp('2024-01-01 00:00:00Z')", "timestamp('10000-01-01T00:00:00Z')"):
        assert "timestamp" in error_of(source)
    assert evaluate("timestamp('0001-01-01T00:00:00Z') < timestamp('9999-12-31T23:59:59Z')")
    assert evaluate("string(timestamp('2024-01-01T10:00:00.120+05:30'))") == \
        "2024-01-01T04:30:00.12Z"
    assert evaluate("string(duration('1h1ms')) + string(duration('-1.5s'))") == \
        "3600.001s-1.5s"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("now.getFullYear()", 2024),
        ("now.getMonth()", 5),  # zero-based
        ("now.getDate()", 1),  # one-based
        ("now.getDayOfMonth()", 0),
        ("now.getDayOfYear()", 152),
        ("now.getDayOfWeek()", 6),  # Saturday; Sunday is 0
        ("now.getHours()", 12),
        ("now.getHours('+05:30')", 17),
        ("now.getMinutes('Asia/Kolkata')", 30),
        ("now.getSeconds()", 0),
        ("timestamp('2024-01-01T00:00:00.250Z').getMilliseconds()", 250),
        ("duration('90m').getHours()", 1),
        ("duration('90m').getMinutes()", 90),
        ("duration('1.5s').getMilliseconds()", 1500),
    ],
)
def test_timestamp_and_duration_accessors(source: str, expected: int) -> None:
    assert evaluate(source) == expected
    assert_agrees_with_cel_python(source)


@pytest.mark.parametrize(
    "source",
    ["timestamp('9999-12-31T23:59:59Z') + duration('1s')",
     "duration('200000000000s') + duration('200000000000s')",
     "duration('200000000000s') - duration('-200000000000s')",
     "now.getHours('Not/AZone')", "i.getHours()", "duration('1h').getFullYear()",
     "now + now", "duration('x')"],
)
def test_timestamp_errors(source: str) -> None:
    error_of(source)


# Compilation ---------------------------------------------------------------------------------


def test_constants_are_folded() -> None:
    source = python_source(parse("1 + 2 * 3 == 7 && duration('1h') < duration('2h')"),
                           FUNCTIONS)
    assert source is not None
    assert "return True" in source
    assert "_add" not in source


def test_failing_constants_are_left_to_run_time() -> None:
    # Folding must not turn an unreachable error into a compile-time failure.
    assert evaluate("true || 1 / 0 == 1") is True
    assert "division by zero" in error_of("1 / 0 == 1")


def test_every_failure_is_a_cel_evaluation_error() -> None:
    # Inlined fast paths raise Python exceptions; none may escape as such.
    for source in ("l['a']", "m.a.b.c", "s.x", "now.x", "n.x", "l[9]", "b'a'.x"):
        error_of(source)


def test_border_values_beyond_the_plain_types() -> None:
    class Colour(StrEnum):
        RED = "red"

    variables = {
        "colour": Colour.RED,
        "pair": ("a", "b"),
        "frozen": MappingProxyType({"k": 1}),
        "local": datetime(2024, 6, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))),
        "now": NOW,
    }
    assert evaluate("colour == 'red'", variables) is True
    assert evaluate("'b' in pair && size(pair) == 2", variables) is True
    assert evaluate("frozen.k == 1 && has(frozen.k)", variables) is True
    assert evaluate("local == now", variables) is True
    assert "unsupported value" in error_of("x == 1", {"x": object()})


def test_compiled_expressions_are_reusable() -> None:
    expression = compile_expression("args.n * 2")
    assert [expression({"args": {"n": n}}) for n in range(3)] == [0, 2, 4]


def test_generated_code_calls_each_runtime_function_directly() -> None:
    """Every function the lowering can call is bound in generated code's globals as the
    function its runtime module defines: no wrapper or dispatch between them."""
    called = {function for _, _, function in lowering.CORE_GLOBALS.values()} - {"dyn"}
    called |= {function for _, _, function in lowering.CORE_METHODS.values()}
    called |= {*lowering._ARITHMETIC.values(), "negate", "index", "matches_compiled"}
    assert called <= set(runtime.FUNCTIONS), called - set(runtime.FUNCTIONS)
    for name, function in runtime.FUNCTIONS.items():
        assert codegen._RUNTIME_NAMESPACE[f"_{name}"] is function
        defining_module = sys.modules[function.__module__]
        assert defining_module.__name__.startswith("callgate_rules.cel.compiler.runtime.")
        assert function in vars(defining_module).values(), name


@pytest.mark.parametrize(("source", "expected"), [
    ("m.?a.orValue(1 / 0)", 1),  # the alternative is not evaluated: no division by zero
    ("m.?zz.orValue(5)", 5),
    ("m.?a.or(optional.of(1 / 0)).value()", 1),
    ("m.?zz.or(m.?a).value()", 1),
    ("m.?zz.or(m.?nested).c.value()", True),  # a selection through or()'s optional
])
def test_or_and_or_value_evaluate_the_alternative_only_when_needed(
    source: str, expected: Any,
) -> None:
    assert evaluate(source) == expected


def test_or_value_on_a_non_optional_is_no_overload() -> None:
    assert "no such overload" in error_of("i.orValue(1)")
