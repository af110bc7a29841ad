"""callgate's CEL parser: the grammar, literals, macros, errors with their place, hostile input."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.cel import syntax
from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.parser import MAX_DEPTH, MAX_SOURCE_LENGTH, parse
from callgate_rules.cel.values import UInt
from tests.cel.conformance_harness import default_directory, parse_text_format


def call(function: str, *args: syntax.Node, target: syntax.Node | None = None) -> syntax.Call:
    return syntax.Call(function, args, target)


def ident(name: str) -> syntax.Ident:
    return syntax.Ident(name)


def lit(value: object) -> syntax.Literal:
    return syntax.Literal(value)


def test_precedence_and_associativity() -> None:
    assert parse("1 + 2 * 3") == call("_+_", lit(1), call("_*_", lit(2), lit(3)))
    assert parse("1 - 2 - 3") == call("_-_", call("_-_", lit(1), lit(2)), lit(3))
    assert parse("a || b && c") == call("_||_", ident("a"), call("_&&_", ident("b"), ident("c")))
    assert parse("a < b == c") == call("_==_", call("_<_", ident("a"), ident("b")), ident("c"))
    assert parse("x in [1] && !y") == call(
        "_&&_", call("@in", ident("x"), syntax.ListLiteral((lit(1),))), call("!_", ident("y")))
    assert parse("a ? b : c ? d : e") == call(
        "_?_:_", ident("a"), ident("b"), call("_?_:_", ident("c"), ident("d"), ident("e")))


def test_logical_chains_are_balanced() -> None:
    tree = parse(" && ".join(f"v{i}" for i in range(8)))
    assert isinstance(tree, syntax.Call) and tree.function == "_&&_"
    left, right = tree.args
    assert isinstance(left, syntax.Call) and isinstance(right, syntax.Call)
    assert left.args[1] == call("_&&_", ident("v2"), ident("v3"))


@pytest.mark.parametrize(("source", "value"), [
    ("0", 0), ("0x1F", 31), ("-9223372036854775808", -(2**63)), ("18446744073709551615u",
                                                                  UInt(2**64 - 1)),
    ("0xFFu", UInt(255)), ("1.5", 1.5), (".5e1", 5.0), ("1e3", 1000.0), ("-2.5", -2.5),
    ("true", True), ("null", None),
])
def test_number_and_keyword_literals(source: str, value: object) -> None:
    tree = parse(source)
    assert isinstance(tree, syntax.Literal)
    assert tree.value == value and type(tree.value) is type(value)


@pytest.mark.parametrize(("source", "value"), [
    (r"'\a\b\f\n\r\t\v\\\'\"\`\?'", "\a\b\f\n\r\t\v\\'\"`?"),
    (r"'\101\x41\X41\u0041\U00000041'", "AAAAA"),
    (r"'\xFF'", "\u00ff"),
    (r"b'\xFF\377'", b"\xff\xff"),
    (r"b'\u00ff'", "\u00ff".encode()),
    ("b'ÿ'", "ÿ".encode()),
    (r"r'\n\x'", "\\n\\x"),
    (r"R'''a\'''", "a\\"),
    ("'''two\nlines'''", "two\nlines"),
    ('"""a"b"""', 'a"b'),
    (r"br'\n'", b"\\n"),
    ("''", ""),
])
def test_string_and_bytes_literals(source: str, value: object) -> None:
    tree = parse(source)
    assert isinstance(tree, syntax.Literal)
    assert tree.value == value and type(tree.value) is type(value)


def test_members_optionals_and_quoted_fields() -> None:
    assert parse("a.`b-c`.d") == syntax.Select(syntax.Select(ident("a"), "b-c"), "d")
    assert parse("a.?b") == syntax.Select(ident("a"), "b", optional=True)
    assert parse("a[?0]") == syntax.Index(ident("a"), lit(0), optional=True)
    assert parse("[?a, b]") == syntax.ListLiteral((ident("a"), ident("b")), frozenset({0}))
    assert parse("{?'k': v, 'j': 1,}") == syntax.MapLiteral((
        syntax.MapEntry(lit("k"), ident("v"), optional=True),
        syntax.MapEntry(lit("j"), lit(1))))
    assert parse(".a.b") == syntax.Select(ident(".a"), "b")
    assert parse("a.b.size()") == call("size", target=syntax.Select(ident("a"), "b"))
    assert parse("pkg.Msg{f: 1}") == syntax.StructLiteral(
        "pkg.Msg", (syntax.MapEntry(lit("f"), lit(1)),))


def test_macros_are_recognised_by_name_and_argument_count() -> None:
    assert parse("has(a.b)") == syntax.Macro("has", (syntax.Select(ident("a"), "b"),))
    assert parse("l.all(x, x > 0)") == syntax.Macro(
        "all", (ident("x"), call("_>_", ident("x"), lit(0))), ident("l"))
    assert parse("m.all(k, v, v)") == syntax.Macro("all", (ident("k"), ident("v"),
                                                           ident("v")), ident("m"))
    assert parse("cel.bind(x, 1, x)") == syntax.Macro("cel.bind", (ident("x"), lit(1),
                                                                   ident("x")))
    for source, name in [("l.exists_one(x, x)", "exists_one"), ("l.existsOne(x, x)",
                         "existsOne"), ("l.map(x, x, x)", "map"), ("l.filter(x, x)", "filter"),
                         ("l.transformList(i, v, v)", "transformList"),
                         ("m.transformMap(k, v, k, v)", "transformMap"),
                         ("m.transformMapEntry(k, v, {k: v})", "transformMapEntry"),
                         ("l.sortBy(x, -x)", "sortBy")]:
        tree = parse(source)
        assert isinstance(tree, syntax.Macro) and tree.name == name, source
    # another argument count is an ordinary call (and an unknown function later)
    assert parse("l.map(x)") == call("map", ident("x"), target=ident("l"))
    assert parse("math.greatest(1, 2)") == call("greatest", lit(1), lit(2),
                                                target=ident("math"))


@pytest.mark.parametrize(("source", "line", "column", "fragment"), [
    ("1 +", 1, 3, "found the end of the expression, expected an operand"),
    ("a.b.\n  (c)", 2, 3, "found `(`, expected a field name"),
    ("'abc", 1, 1, "not closed"),
    (r"'\q'", 1, 2, "invalid escape `\\q`"),
    (r"'\uD800'", 1, 2, "surrogate"),
    ("if", 1, 1, "reserved word"),
    ("a.all(x.y, true)", 1, 3, "must be a simple name"),
    ("has(a)", 1, 1, "has() takes a field selection"),
    ("9223372036854775808", 1, 1, "int64 range"),
    ("18446744073709551616u", 1, 1, "out of range"),
    ("(1", 1, 2, "expected `)`"),
    ("1 2", 1, 3, "expected an operator or the end"),
    ("", 1, 1, "empty"),
    ("a # b", 1, 3, "unexpected character '#'"),
    ("`a`", 1, 1, "only allowed as a field name"),
    ("m.all(k, k, true)", 1, 3, "different names"),
])
def test_errors_say_what_was_found_and_expected_and_where(
    source: str, line: int, column: int, fragment: str,
) -> None:
    with pytest.raises(CelSyntaxError) as caught:
        parse(source)
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)
    assert fragment in str(caught.value)


def test_positions_of_operators_and_calls() -> None:
    tree = parse("a +\n  f(b)")
    assert isinstance(tree, syntax.Call)
    assert (tree.at.line, tree.at.column) == (1, 3)
    callee = tree.args[1]
    assert (callee.at.line, callee.at.column) == (2, 3)


@pytest.mark.parametrize("source", [
    "(" * 100_000,
    "(" * 5_000 + "1" + ")" * 5_000,
    "-" * 50_000 + "1",
    "!" * 50_000 + "true",
    "1" + " + 1" * 20_000,
    "a" + ".b" * 40_000,
    "a" + "[0]" * 30_000,
    "[" * 30_000 + "]" * 30_000,
    "{" * 30_000,
    "f(" * 30_000,
    "x ? " * 20_000 + "1",
    "'" + "a" * (MAX_SOURCE_LENGTH + 1),
])
def test_hostile_inputs_end_in_a_syntax_error_quickly(source: str) -> None:
    started = time.perf_counter()
    with pytest.raises(CelSyntaxError):
        parse(source[:MAX_SOURCE_LENGTH + 10])
    assert time.perf_counter() - started < 5.0


def test_long_flat_inputs_parse_in_linear_time() -> None:
    started = time.perf_counter()
    tree = parse("[" + ", ".join(["1"] * 30_000) + "]")
    assert isinstance(tree, syntax.ListLiteral) and len(tree.elements) == 30_000
    chain = parse(" || ".join(f"v{i}" for i in range(10_000)))  # balanced: shallow
    assert isinstance(chain, syntax.Call)
    # about a second idle; quadratic time would take minutes (a loaded 2-core machine)
    assert time.perf_counter() - started < 15.0


def test_nesting_up_to_the_limit_parses() -> None:
    depth = MAX_DEPTH - 1
    tree = parse("(" * depth + "1" + ")" * depth)
    assert tree == lit(1)
    parse("-" * (MAX_DEPTH - 1) + "x")
    with pytest.raises(CelSyntaxError, match="deeper than"):
        parse("-" * (MAX_DEPTH + 1) + "x")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab1.()[]{}?:!-+*<=>&|'\"\\ ,`rbu_x", max_size=60))
def test_arbitrary_text_parses_or_raises_a_syntax_error(source: str) -> None:
    try:
        parse(source)
    except CelSyntaxError as error:
        assert error.line >= 1 and error.column >= 1


def test_the_whole_conformance_corpus_parses() -> None:
    directory = default_directory()
    if not directory.is_dir():
        pytest.skip(f"CEL conformance data not found at {directory}")
    count = 0
    for path in sorted(directory.glob("*.textproto")):
        document = parse_text_format(path.read_text(encoding="utf-8"))
        for section in document.messages("section"):
            for test in section.messages("test"):
                parse(test.text("expr"))
                count += 1
    assert count > 2000
