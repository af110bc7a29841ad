"""The CEL type checker on syntax trees: each finding at the node's line and column.

Trees are built by hand (``cel.syntax`` is the contract between the parser and the
checker), and the functions come from a small library of real ``Overload`` signatures, so
each test states exactly which signatures the verdict follows from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate_rules.cel import parser
from callgate_rules.cel import syntax as s
from callgate_rules.cel import types as t
from callgate_rules.cel.checker import CheckFinding, Environment, check, render
from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.library import Function, Overload


def at(column: int, line: int = 1) -> s.Position:
    return s.Position(line=line, column=column)


def function(name: str, *overloads: Overload, variadic: bool = False) -> Function:
    def refuse(*arguments: Any) -> Any:
        raise AssertionError("the checker never runs a function")

    return Function(name, "test", overloads, refuse, f"{name} for the tests", variadic)


LIBRARY = {
    "split": function("split", Overload("string_split_string", True, ("string", "string"),
                                        "list(string)")),
    "size": function("size", Overload("size_string", False, ("string",), "int"),
                     Overload("size_list", False, ("list(A)",), "int"),
                     Overload("string_size", True, ("string",), "int")),
    "_+_": function("_+_", Overload("add_int64", False, ("int", "int"), "int"),
                    Overload("add_double", False, ("double", "double"), "double"),
                    Overload("add_list", False, ("list(A)", "list(A)"), "list(A)")),
    "math.greatest": function("math.greatest",
                              Overload("math_greatest_int", False, ("int", "int"), "int"),
                              variadic=True),
    "first": function("first", Overload("list_first", True, ("list(A)",), "optional_type(A)")),
    "orValue": function("orValue", Overload("optional_or_value", True,
                                            ("optional_type(A)", "A"), "A")),
}

ARGUMENTS = {
    "type": "object",
    "required": ["name", "currency", "amount", "count", "items", "tags", "anything"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "amount": {"type": "number"},
        "currency": {"type": "string", "enum": ["EUR", "USD"]},
        "note": {"type": ["string", "null"]},
        "items": {"type": "array", "items": {
            "type": "object", "required": ["qty"], "properties": {"qty": {"type": "integer"}}}},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
        "anything": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    },
}
ACTOR = {"type": "object", "properties": {"role": {"type": "string"}}}  # open


def environment(**variables: t.Type) -> Environment:
    return Environment({"args": t.from_schema(ARGUMENTS), "actor": t.from_schema(ACTOR),
                        "now": t.TIMESTAMP, **variables}, LIBRARY)


def args(field: str, column: int = 1) -> s.Select:
    return s.Select(s.Ident("args", at(column)), field, at=at(column + 4))


def codes(findings: tuple[CheckFinding, ...]) -> list[tuple[str, str, int, int]]:
    return [(f.severity, f.code, f.line, f.column) for f in findings]


# Overloads ---------------------------------------------------------------------------------------

def split_of(field: str) -> s.Call:
    """``args.<field>.split(" ")`` written from column 1."""
    return s.Call("split", (s.Literal(" ", at(7 + len(field) + 6)),), args(field),
                  at(6 + len(field) + 1))


def test_split_on_an_integer_is_an_error_that_names_the_receiver_type() -> None:
    result = check(split_of("count"), environment())
    assert codes(result.findings) == [("error", "no-overload", 1, 12)]
    assert result.findings[0].message == (
        'split is a string method: args.count.split(" ") needs args.count to be a string; '
        "it is an integer here")


def test_split_on_a_string_is_fine_and_gives_a_list_of_strings() -> None:
    result = check(split_of("name"), environment())
    assert result.findings == ()
    assert result.type == t.list_of(t.STRING)


def test_an_unknown_method_names_the_nearest_function() -> None:
    tree = s.Call("splt", (s.Literal(" "),), args("name"), at(11))
    [finding] = check(tree, environment()).findings
    assert (finding.code, finding.column, finding.suggestion) == ("unknown-function", 11, "split")
    assert "unknown method 'splt'; did you mean split?" in finding.message


def test_an_unknown_namespaced_function_is_named_with_its_namespace() -> None:
    tree = s.Call("greatst", (s.Literal(1), s.Literal(2)), s.Ident("math", at(1)), at(6))
    [finding] = check(tree, environment()).findings
    assert (finding.code, finding.suggestion) == ("unknown-function", "math.greatest")


def test_a_namespaced_variadic_function_takes_any_number_of_arguments() -> None:
    tree = s.Call("greatest", (s.Literal(1), s.Literal(2), s.Literal(3)), s.Ident("math"))
    result = check(tree, environment())
    assert (result.type, result.findings) == (t.INT, ())


def test_wrong_arity_lists_the_signatures() -> None:
    tree = s.Call("size", (args("name"), args("name")), at=at(1))
    [finding] = check(tree, environment()).findings
    assert finding.code == "wrong-arity"
    assert "size takes 1 argument, not 2" in finding.message
    assert "size(list(A)) -> int" in finding.message


def test_mixing_int_and_double_in_arithmetic_is_an_error_with_advice() -> None:
    tree = s.Call("_+_", (args("amount"), s.Literal(1, at(15))), at=at(13))
    [finding] = check(tree, environment()).findings
    assert codes((finding,)) == [("error", "no-overload", 1, 13)]
    assert "no overload of + takes (double, int)" in finding.message
    assert "write 1.0" in finding.message


def test_type_parameters_bind_through_optionals() -> None:
    first = s.Call("first", (), s.ListLiteral((s.Literal("a"),)))
    tree = s.Call("orValue", (s.Literal("b"),), first)
    assert check(tree, environment()).type == t.STRING


def test_an_error_is_reported_once_not_by_every_enclosing_call() -> None:
    inner = s.Call("split", (s.Literal(" "),), args("count"), at(12))
    tree = s.Call("size", (inner,), at=at(1))
    assert codes(check(tree, environment()).findings) == [("error", "no-overload", 1, 12)]


# Fields ------------------------------------------------------------------------------------------

def test_an_undeclared_field_of_a_closed_object_names_the_declared_ones() -> None:
    [finding] = check(args("nmae"), environment()).findings
    assert codes((finding,)) == [("error", "unknown-field", 1, 5)]
    assert finding.suggestion == "name"
    assert "args.nmae is not declared (did you mean name?); declared fields: amount, " \
           "anything, count, currency, items, name, note, tags" == finding.message


def test_an_undeclared_field_of_an_open_object_says_the_schema_is_open() -> None:
    tree = s.Select(s.Ident("actor"), "rol", at=at(6))
    [finding] = check(tree, environment()).findings
    assert (finding.severity, finding.code) == ("error", "unknown-field")
    assert "does not set additionalProperties: false" in finding.message


def test_a_variable_without_a_schema_is_dyn_and_never_an_error() -> None:
    tree = s.Call("split", (s.Literal(" "),), s.Select(s.Select(s.Ident("result"), "a"), "b"))
    assert check(tree, environment(result=t.DYN)).findings == ()


def test_additional_properties_as_a_schema_types_the_values() -> None:
    tree = s.Call("split", (s.Literal(" "),), s.Select(args("tags"), "anyKey"))
    assert check(tree, environment()).type == t.list_of(t.STRING)


def test_a_union_of_types_is_dyn() -> None:
    tree = s.Call("split", (s.Literal(" "),), args("anything"))
    assert check(tree, environment()).findings == ()


def test_selecting_a_field_of_a_string_is_an_error() -> None:
    tree = s.Select(args("name"), "first", at=at(10))
    [finding] = check(tree, environment()).findings
    assert finding.code == "unknown-field" and "args.name is a string" in finding.message


def test_an_index_with_a_literal_key_is_a_field_read() -> None:
    tree = s.Index(s.Ident("args"), s.Literal("nmae"), at=at(5))
    assert codes(check(tree, environment()).findings) == [("error", "unknown-field", 1, 5)]


# Macros ------------------------------------------------------------------------------------------

def test_a_comprehension_variable_has_the_element_type() -> None:
    body = s.Select(s.Ident("i", at(20)), "qtx", at=at(21))
    tree = s.Macro("all", (s.Ident("i"), body), args("items"), at(11))
    [finding] = check(tree, environment()).findings
    assert codes((finding,)) == [("error", "unknown-field", 1, 21)]
    assert "i.qtx is not declared (did you mean qty?)" in finding.message


def test_map_gives_a_list_of_what_its_expression_gives() -> None:
    body = s.Select(s.Ident("i"), "qty")
    tree = s.Macro("map", (s.Ident("i"), body), args("items"))
    assert check(tree, environment()).type == t.list_of(t.INT)


def test_two_variable_comprehensions_bind_index_and_value() -> None:
    body = s.Call("_==_", (s.Ident("k"), s.Select(s.Ident("v"), "qty")))
    tree = s.Macro("all", (s.Ident("k"), s.Ident("v"), body), args("items"))
    assert check(tree, environment()).findings == ()


def test_cel_bind_gives_the_name_its_initial_value_type() -> None:
    tree = s.Macro("cel.bind", (s.Ident("n"), args("name"),
                                s.Call("split", (s.Literal(","),), s.Ident("n"))))
    assert check(tree, environment()).type == t.list_of(t.STRING)


def test_a_comprehension_over_a_string_is_an_error() -> None:
    tree = s.Macro("exists", (s.Ident("c"), s.Literal(True)), args("name"), at(11))
    assert codes(check(tree, environment()).findings) == [("error", "no-overload", 1, 11)]


# Comparisons -------------------------------------------------------------------------------------

def test_comparing_a_string_with_an_int_can_never_be_true() -> None:
    tree = s.Call("_==_", (args("name"), s.Literal(3)), at=at(11))
    [finding] = check(tree, environment()).findings
    assert codes((finding,)) == [("warning", "impossible-comparison", 1, 11)]
    assert finding.message == ("args.name == 3 can never be true: args.name is a string and 3 "
                               "is an integer")


def test_not_equal_across_types_is_always_true() -> None:
    tree = s.Call("_!=_", (args("name"), s.Literal(3)))
    [finding] = check(tree, environment()).findings
    assert "is always true" in finding.message


def test_numbers_of_any_kind_compare() -> None:
    for function_name in ("_==_", "_<_", "_>=_"):
        tree = s.Call(function_name, (args("amount"), s.Literal(5)))
        assert check(tree, environment()).findings == (), function_name


def test_ordering_a_string_against_a_number_is_an_error() -> None:
    tree = s.Call("_<_", (args("name"), s.Literal(5)), at=at(11))
    assert codes(check(tree, environment()).findings) == [("error", "no-overload", 1, 11)]


def test_a_value_outside_the_enum_is_never_equal() -> None:
    tree = s.Call("_==_", (args("currency"), s.Literal("JPY")), at=at(15))
    [finding] = check(tree, environment()).findings
    assert "\"JPY\" is not one of the values its schema allows (\"EUR\", \"USD\")" in (
        finding.message)


def test_a_value_inside_the_enum_is_fine() -> None:
    tree = s.Call("_==_", (args("currency"), s.Literal("EUR")))
    assert check(tree, environment()).findings == ()


def test_in_a_list_of_values_none_of_them_in_the_enum() -> None:
    listed = s.ListLiteral((s.Literal("JPY"), s.Literal("CHF")))
    tree = s.Call("@in", (args("currency"), listed))
    [finding] = check(tree, environment()).findings
    assert finding.code == "impossible-comparison"


def test_null_against_a_required_non_nullable_field() -> None:
    tree = s.Call("_==_", (args("name"), s.Literal(None)), at=at(11))
    [finding] = check(tree, environment()).findings
    assert "the field is required and its schema does not allow null" in finding.message


def test_null_against_a_nullable_field_is_fine() -> None:
    tree = s.Call("_&&_", (s.Macro("has", (args("note"),)),
                           s.Call("_==_", (args("note"), s.Literal(None)))))
    assert check(tree, environment()).findings == ()


# has() guards --------------------------------------------------------------------------------

def note_read(column: int = 1) -> s.Call:
    """``args.note != ""``."""
    return s.Call("_!=_", (args("note", column), s.Literal("")))


def has_note() -> s.Macro:
    return s.Macro("has", (args("note"),))


def test_an_optional_field_read_without_has_is_a_warning_at_the_field() -> None:
    [finding] = check(note_read(column=3), environment()).findings
    assert codes((finding,)) == [("warning", "unguarded-optional-field", 1, 7)]
    assert finding.message.endswith("Write has(args.note) && ...")


def test_has_on_either_side_of_and_guards_the_field() -> None:
    """CEL's && is false as soon as one side is: an error on the other side is absorbed."""
    for tree in (s.Call("_&&_", (has_note(), note_read())),
                 s.Call("_&&_", (note_read(), has_note())),
                 s.Call("_&&_", (s.Call("_&&_", (has_note(), s.Literal(True))), note_read()))):
        assert check(tree, environment()).findings == (), render(tree)


def test_not_has_in_an_or_guards_the_field() -> None:
    tree = s.Call("_||_", (s.Call("!_", (has_note(),)), note_read()))
    assert check(tree, environment()).findings == ()


def test_has_in_an_or_guards_nothing() -> None:
    tree = s.Call("_||_", (has_note(), note_read()))
    assert [f.code for f in check(tree, environment()).findings] == [
        "unguarded-optional-field"]


def test_a_conditional_guards_its_branches_by_its_condition() -> None:
    guarded = s.Call("_?_:_", (has_note(), note_read(), s.Literal(False)))
    negated = s.Call("_?_:_", (s.Call("!_", (has_note(),)), s.Literal(False), note_read()))
    wrong = s.Call("_?_:_", (has_note(), s.Literal(False), note_read()))
    assert check(guarded, environment()).findings == ()
    assert check(negated, environment()).findings == ()
    assert len(check(wrong, environment()).findings) == 1


def test_has_guards_exactly_its_field_and_reads_its_parent() -> None:
    meta = t.from_schema({"type": "object", "properties": {"meta": {
        "type": "object", "properties": {"tag": {"type": "string"}}}}})
    tag = s.Select(s.Select(s.Ident("m"), "meta", at=at(3)), "tag", at=at(8))
    tree = s.Call("_&&_", (s.Macro("has", (tag,)), s.Call("_==_", (tag, s.Literal("x")))))
    findings = check(tree, environment(m=meta)).findings
    assert [(f.code, f.message.split(" ")[0]) for f in findings] == [
        ("unguarded-optional-field", "m.meta")]  # once, at its first read


def test_null_against_a_looked_up_record_is_fine() -> None:
    record = t.from_schema({"type": "object", "properties": {"id": {"type": "string"}}})
    tree = s.Call("_==_", (s.Ident("ticket"), s.Literal(None)))
    assert check(tree, environment(ticket=record)).findings == ()


def test_and_of_a_string_is_not_a_condition() -> None:
    tree = s.Call("_&&_", (args("name", 1), s.Literal(True)))
    assert codes(check(tree, environment()).findings) == [("error", "not-a-condition", 1, 5)]


# Types -------------------------------------------------------------------------------------------

def test_type_strings_parse_and_print_back() -> None:
    for text in ("int", "list(string)", "map(string, list(A))", "optional_type(V)", "dyn"):
        assert str(t.parse(text)).replace(" ", "") == text.replace(" ", "")


def test_unify_binds_type_parameters_and_substitutes_them() -> None:
    bindings: dict[str, t.Type] = {}
    assert t.unify(t.parse("map(K, V)"), t.map_of(t.STRING, t.INT), bindings)
    assert t.substitute(t.parse("list(V)"), bindings) == t.list_of(t.INT)


def test_an_object_is_a_map_from_strings() -> None:
    record = t.from_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert t.unify(t.parse("map(string, V)"), record, {})
    assert not t.unify(t.parse("list(A)"), record, {})


JSON_SCHEMAS = st.recursive(
    st.sampled_from([{"type": name} for name in ("string", "integer", "number", "boolean",
                                                 "null")] + [{}, {"enum": [1, "a"]}]),
    lambda inner: st.one_of(
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda props: {"type": "object", "properties": props},
                  st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner)),
    max_leaves=8)


@given(JSON_SCHEMAS)
def test_every_schema_reads_as_a_type_that_unifies_with_dyn(schema: dict[str, Any]) -> None:
    type_ = t.from_schema(schema)
    assert t.unify(t.DYN, type_, {}) and t.unify(type_, t.DYN, {})
    assert t.may_equal(type_, type_)


def test_render_writes_cel_back() -> None:
    tree = s.Call("_&&_", (s.Call("_==_", (args("name"), s.Literal("a\"b"))),
                           s.Macro("has", (args("note"),))))
    assert render(tree) == 'args.name == "a\\"b" && has(args.note)'


# No false error: the conformance corpus ----------------------------------------------------------

CONFORMANCE = Path("/work/shared/conformance/cel-spec")
def _binding_type(value: Any) -> t.Type:
    if isinstance(value, list):
        return t.list_of(t.DYN)
    if isinstance(value, dict):
        return t.map_of(t.DYN, t.DYN)
    return t.of_value(value)


def test_no_false_error_and_no_false_warning_on_the_conformance_corpus() -> None:
    """Every conformance expression that evaluates without error type-checks without an
    error, with the real library and its variables typed by their values; none that
    evaluates to true is called a comparison that can never be true."""
    if not CONFORMANCE.is_dir():
        pytest.skip(f"the cel-spec conformance files are not at {CONFORMANCE}")
    from tests.cel.conformance_harness import load_cases

    checked, wrong = 0, []
    for case in load_cases(CONFORMANCE):
        if case.skip or case.expect_error or case.unchecked:
            continue
        try:
            tree = parser.parse(case.expr)
        except CelSyntaxError:
            continue  # the parser's own tests judge these
        checked += 1
        variables = {name: _binding_type(value) for name, value in case.bindings.items()}
        result = check(tree, Environment(variables))
        false_warning = case.expected is True and any(
            f.code == "impossible-comparison" for f in result.findings)
        if result.errors or false_warning:
            wrong.append((case.case_id, case.expr, result.findings[0].message))
    assert checked > 1000
    assert wrong == []


@pytest.mark.parametrize(("text", "value"), [
    ("timestamp(5) == timestamp('1970-01-01T00:00:05Z')", True),
    ("string(ip('192.168.0.1'))", "192.168.0.1"),
    ("string(ip('2001:db8::1'))", "2001:db8::1"),
    ("string(cidr('10.0.0.0/8'))", "10.0.0.0/8"),
    ("string(url('https://example.com/a%20b?q=1'))", "https://example.com/a%20b?q=1"),
    ("type(url('https://example.com')) == kubernetes.URL", True),
    ("type(ip('10.0.0.1')) == net.IP && type(cidr('10.0.0.0/8')) == net.CIDR", True),
])
def test_the_checker_accepts_what_the_runtime_does(text: str, value: Any) -> None:
    """The conversions the runtime accepts are signatures too, so lint does not call them
    no-overload; and the network and URL type names resolve."""
    from callgate_rules.cel.expression import compile_expression

    result = check(parser.parse(text), Environment({}))
    assert result.findings == ()
    assert result.type.kind == ("bool" if isinstance(value, bool) else "string")
    assert compile_expression(text)({}) == value


def test_selecting_on_an_optional_continues_the_optional_chain() -> None:
    for text in ("optional.of({'c': 'x'}).c.orValue('d')", "optional.of(['x'])[0].orValue('d')",
                 "{'a': {'b': 1}}.?a.b.orValue(0) == 1"):
        result = check(parser.parse(text), Environment({}))
        assert result.errors == (), text


# Hostile trees -----------------------------------------------------------------------------------

def test_a_tree_deeper_than_the_stack_is_no_crash() -> None:
    """The parser bounds depth; a tree built past it is checked as dyn, never a crash."""
    tree: s.Node = args("name")
    for _ in range(20_000):
        tree = s.Call("_+_", (tree, s.Literal("x")))
    assert check(tree, environment()).type == t.DYN


LEAVES = st.sampled_from([s.Literal(1), s.Literal(1.5), s.Literal("a"), s.Literal(None),
                          s.Literal(True), s.Ident("args"), s.Ident("now"), s.Ident("i"),
                          args("name"), args("note"), args("items"), args("tags")])
NAMES = st.sampled_from(["_+_", "_==_", "_<_", "_&&_", "_||_", "!_", "_?_:_", "@in", "size",
                         "split", "first", "orValue", "math.greatest", "nosuch", "-_"])


def _trees(inner: st.SearchStrategy[s.Node]) -> st.SearchStrategy[s.Node]:
    return st.one_of(
        st.builds(lambda f, a: s.Call(f, tuple(a)), NAMES, st.lists(inner, max_size=3)),
        st.builds(lambda f, target, a: s.Call(f, tuple(a), target), NAMES, inner,
                  st.lists(inner, max_size=2)),
        st.builds(lambda o, f: s.Select(o, f), inner, st.sampled_from(["qty", "x", "name"])),
        st.builds(lambda o, i: s.Index(o, i), inner, inner),
        st.builds(lambda name, target, body: s.Macro(name, (s.Ident("i"), body), target),
                  st.sampled_from(["all", "exists", "map", "filter", "sortBy"]), inner, inner),
        st.builds(lambda e: s.ListLiteral(tuple(e)), st.lists(inner, max_size=3)),
        st.builds(lambda k, v: s.MapLiteral((s.MapEntry(k, v),)), inner, inner),
        st.builds(lambda a: s.Macro("has", (a,)), st.builds(s.Select, inner,
                                                           st.sampled_from(["note", "x"]))))


@given(st.recursive(LEAVES, _trees, max_leaves=12))
def test_any_tree_checks_without_an_exception(tree: s.Node) -> None:
    result = check(tree, environment())
    assert isinstance(result.type, t.Type)
    assert all(f.severity in ("error", "warning") and f.line >= 1 for f in result.findings)
