"""Differential tests: random CEL expressions over random data, compiled vs cel-python.

Expressions come from a typed grammar over a fixed set of variables. Two properties:

- With data of the declared types (some keys missing, zeros, values near the int64 limits),
  the compiled path and cel-python agree exactly: both fail, or both give equal values.
- With data of random types, cel-python may answer where CEL has no overload (``true + 1``,
  ``1 && true``, ``'abc'[0]``: see ``callgate_rules.cel.compiler``); the compiled path then
  fails instead. It must never give a different value, and it may only succeed where
  cel-python fails for the documented reasons: errors inside ``map``/``filter``/
  ``exists_one`` that an enclosing operator absorbs, and ``!=`` on lists and maps.

The grammar leaves out what the package documents as deliberate value differences from
cel-python (``string()`` of a bool, double division by zero).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.cel.compiler import Inline
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.expression import compile_expression
from callgate_rules.pipeline import plan
from tests.cel.cel_python_oracle import cel_python_evaluator
from tests.cel.conformance_harness import same_value

Strategy = st.SearchStrategy[str]
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
ALPHABET = "ab1"

# Expressions -------------------------------------------------------------------------------


def parenthesised(template: str, *parts: Strategy) -> Strategy:
    return st.tuples(*parts).map(lambda values: "(" + template.format(*values) + ")")


int_literals = st.one_of(
    st.integers(-20, 20),
    st.sampled_from([2**62, 2**63 - 1, -(2**63) + 1, 3037000500]),
).map(str)
double_literals = st.sampled_from(["0.5", "1.5", "-2.25", "1e300", "-0.0", "3.0"])
string_literals = st.text(alphabet=ALPHABET, max_size=3).map(lambda text: f'"{text}"')
small_indexes = st.integers(0, 3).map(str)


@cache
def int_expressions(depth: int, element: str | None = None) -> Strategy:
    """Int-typed expressions; ``element`` names a macro variable bound to an int."""
    leaves = [int_literals, st.sampled_from(["i", "j", "m.a", "m.zz", "size(s)", "size(l)",
                                             "size(m)", "l.size()", "s.size()"])]
    if element is not None:
        leaves.append(st.just(element))
    if depth <= 0:
        return st.one_of(*leaves)
    smaller = int_expressions(depth - 1, element)
    return st.one_of(
        *leaves,
        *(parenthesised("{} " + operator + " {}", smaller, smaller)
          for operator in ("+", "-", "*", "/", "%")),
        parenthesised("-{}", smaller),
        parenthesised("{} ? {} : {}", bool_expressions(depth - 1, element), smaller, smaller),
        st.tuples(int_list_expressions(depth - 1), small_indexes).map(
            lambda parts: f"{parts[0]}[{parts[1]}]"
        ),
        parenthesised("int({})", string_expressions(depth - 1)),
        parenthesised("int({})", double_expressions(depth - 1)),
    )


@cache
def double_expressions(depth: int) -> Strategy:
    leaves = st.one_of(double_literals, st.just("d"))
    if depth <= 0:
        return leaves
    smaller = double_expressions(depth - 1)
    return st.one_of(
        leaves,
        *(parenthesised("{} " + operator + " {}", smaller, smaller) for operator in "+-*"),
        parenthesised("{} / 4.0", smaller),  # IEEE division by zero differs on purpose
        parenthesised("-{}", smaller),
        parenthesised("double({})", int_expressions(depth - 1)),
    )


@cache
def string_expressions(depth: int) -> Strategy:
    leaves = st.one_of(string_literals, st.sampled_from(["s", "t", "m.b", "m.d.e", "m['b']"]))
    if depth <= 0:
        return leaves
    smaller = string_expressions(depth - 1)
    return st.one_of(
        leaves,
        parenthesised("{} + {}", smaller, smaller),
        parenthesised("{} ? {} : {}", bool_expressions(depth - 1), smaller, smaller),
        parenthesised("string({})", int_expressions(depth - 1)),
        st.tuples(st.just("names"), small_indexes).map(lambda parts: f"names[{parts[1]}]"),
    )


@cache
def int_list_expressions(depth: int) -> Strategy:
    leaves = st.sampled_from(["l", "m.c", "[]", "[1, 2, 3]", "[i, j]"])
    if depth <= 0:
        return leaves
    smaller = int_list_expressions(depth - 1)
    return st.one_of(
        leaves,
        parenthesised("{} + {}", smaller, smaller),
        # Macro bodies stay total: cel-python lets their errors escape absorption.
        st.tuples(smaller, st.sampled_from(["x * 2", "x + 1", "-x", "x % 3"])).map(
            lambda parts: f"{parts[0]}.map(x, {parts[1]})"
        ),
        st.tuples(smaller, st.sampled_from(["x > 1", "x == 2", "x % 2 == 0"])).map(
            lambda parts: f"{parts[0]}.filter(x, {parts[1]})"
        ),
    )


@cache
def bool_expressions(depth: int, element: str | None = None) -> Strategy:
    """Bool-typed expressions; ``element`` names a macro variable bound to an int."""
    leaves = st.one_of(
        st.sampled_from(["true", "false", "b", "has(m.a)", "has(m.zz)", "has(m.d.e)",
                         "has(m.zz.e)"]),
        st.sampled_from(["ts < now", "ts + duration('1h') > now", "dur > duration('30m')",
                         "ts.getHours() >= 12", "ts.getDayOfWeek('+05:30') == 1",
                         "now - ts < duration('24h')"]).map(lambda text: f"({text})"),
    )
    if depth <= 0:
        return leaves
    ints = int_expressions(depth - 1, element)
    strings = string_expressions(depth - 1)
    doubles = double_expressions(depth - 1)
    smaller = bool_expressions(depth - 1, element)
    comparison = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
    return st.one_of(
        leaves,
        parenthesised("{} && {}", smaller, smaller),
        parenthesised("{} || {}", smaller, smaller),
        parenthesised("!{}", smaller),
        parenthesised("{} ? {} : {}", smaller, smaller, smaller),
        st.tuples(ints, comparison, ints).map(lambda parts: "({} {} {})".format(*parts)),
        st.tuples(strings, comparison, strings).map(lambda parts: "({} {} {})".format(*parts)),
        st.tuples(doubles, comparison, doubles).map(lambda parts: "({} {} {})".format(*parts)),
        # A double orders against an int in cel-python. (Its == between them depends on
        # whether the double was computed, which no other implementation could mirror.)
        st.tuples(doubles, st.sampled_from(["<", "<=", ">", ">="]), ints).map(
            lambda parts: "({} {} {})".format(*parts)
        ),
        parenthesised("{} == {}", smaller, smaller),
        parenthesised("{} == {}", int_list_expressions(depth - 1), int_list_expressions(0)),
        parenthesised("{} in {}", ints, int_list_expressions(depth - 1)),
        parenthesised("{} in names", strings),
        parenthesised("{} in m", strings),
        parenthesised("{}.startsWith({})", strings, strings),
        parenthesised("{}.endsWith({})", strings, strings),
        # cel-python's concatenation returns a plain str, which lacks its contains().
        parenthesised("{}.contains({})", string_expressions(0), strings),
        st.tuples(strings, st.sampled_from(["^a", "b$", "a|1", "^[ab]+1?$", "\\\\d"])).map(
            lambda parts: f"{parts[0]}.matches('{parts[1]}')"
        ),
        # Comparisons across types that both backends answer the same way (not a bool on
        # the left of an int: cel-python compares those as numbers).
        st.tuples(st.one_of(ints, strings, st.just("null"), int_list_expressions(0)),
                  st.one_of(strings, st.just("null"), int_list_expressions(0), ints)).map(
            lambda parts: "({} == {})".format(*parts)
        ),
        st.tuples(smaller, st.one_of(strings, st.just("null"), int_list_expressions(0))).map(
            lambda parts: "({} == {})".format(*parts)
        ),
        st.tuples(int_list_expressions(depth - 1), bool_expressions(depth - 1, "x")).map(
            lambda parts: f"{parts[0]}.all(x, {parts[1]})"
        ),
        st.tuples(int_list_expressions(depth - 1), bool_expressions(depth - 1, "x")).map(
            lambda parts: f"{parts[0]}.exists(x, {parts[1]})"
        ),
        st.tuples(int_list_expressions(depth - 1), st.sampled_from(["x > 1", "x == 2"])).map(
            lambda parts: f"{parts[0]}.exists_one(x, {parts[1]})"
        ),
        st.just("m.exists(k, k == 'a')"),
        st.just("names.all(n, n.size() > 0)"),
    )


expressions = st.one_of(
    bool_expressions(3),
    int_expressions(2),
    string_expressions(2),
    double_expressions(2),
    int_list_expressions(2),
)

# Data --------------------------------------------------------------------------------------

ints = st.one_of(st.integers(-10, 10), st.sampled_from([0, 2**63 - 1, -(2**63), 3037000500]))
small_ints = st.integers(-50, 50)  # list elements: macro bodies must not overflow
doubles = st.one_of(st.sampled_from([0.0, -0.5, 2.5]), st.floats(-1e6, 1e6))
strings = st.text(alphabet=ALPHABET, max_size=3)
timestamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
durations = st.timedeltas(min_value=timedelta(hours=-48), max_value=timedelta(hours=48))


def sometimes_missing(
    entries: dict[str, st.SearchStrategy[Any]],
) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=entries)


typed_data = st.fixed_dictionaries(
    {
        "i": ints, "j": ints, "d": doubles, "s": strings, "t": strings, "b": st.booleans(),
        "l": st.lists(small_ints, max_size=4), "names": st.lists(strings, max_size=3),
        "ts": timestamps, "dur": durations, "now": st.just(NOW),
        "m": sometimes_missing({
            "a": ints, "b": strings, "c": st.lists(small_ints, max_size=3),
            "d": sometimes_missing({"e": strings}),
        }),
    }
)

json_scalars = st.one_of(st.none(), st.booleans(), ints, doubles, strings)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), inner, max_size=3),
    ),
    max_leaves=4,
)
untyped_data = st.fixed_dictionaries(
    {"now": st.just(NOW)},
    optional={name: json_values for name in ("i", "j", "d", "s", "t", "b", "l", "names", "m")},
)

# Comparison --------------------------------------------------------------------------------


# How cel-python crashes on a few ill-typed inputs instead of failing (not CEL errors).
CRASHES = (AssertionError, AttributeError, IndexError, RuntimeError)


def outcome(evaluate: Callable[[Mapping[str, Any]], Any], data: Mapping[str, Any]) -> Any:
    """The value, or the exception: cel-python's own failures count as errors too."""
    try:
        return evaluate(data)
    except CelEvaluationError as error:
        return error
    except CRASHES as error:
        return error


def run_both(source: str, data: Mapping[str, Any]) -> tuple[Any, Any]:
    compiled = compile_expression(source)
    try:
        ours = compiled(data)
    except CelEvaluationError as error:
        ours = error
    return ours, outcome(cel_python_evaluator(source), data)


SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(source=expressions, data=typed_data)
def test_compiled_agrees_with_cel_python_on_typed_data(source: str, data: dict[str, Any]) -> None:
    ours, theirs = run_both(source, data)
    if _int_of_the_lowest_double(ours, theirs):
        return
    if (isinstance(theirs, CRASHES) and not isinstance(ours, BaseException)
            and any(operator in source for operator in ("&&", "||", "?"))):
        return  # cel-python crashed in a branch CEL never needs (``false && <error>``)
    if isinstance(theirs, BaseException) or isinstance(ours, BaseException):
        assert isinstance(ours, BaseException) and isinstance(theirs, BaseException), (
            f"{source!r} on {data!r}: compiled {ours!r}, cel-python {theirs!r}"
        )
    elif not _a_cel_python_bug(source, ours, theirs):
        assert same_value(theirs, ours), f"{source!r} on {data!r}: {ours!r} != {theirs!r}"


def _int_of_the_lowest_double(ours: Any, theirs: Any) -> bool:
    """``int()`` of the double -2**63: the specification's range is open there (conformance
    test double_int_min_range expects an error, as cel-go gives); cel-python converts it."""
    return (isinstance(ours, CelEvaluationError) and "int() range error" in str(ours)
            and not isinstance(theirs, BaseException) and theirs == -(2**63))


def _a_cel_python_bug(source: str, ours: Any, theirs: Any) -> bool:
    """Two of cel-python's answers that the specification (and cel-go) contradict:
    ``string(false)`` is ``"false"``, not Python's ``"False"``; and a key made by
    concatenation (``("" + "a") in m``) is found in a map like any equal string (cel-python's
    concatenation makes a plain ``str``, which its map type does not match)."""
    if ours in ("true", "false") and theirs == ours.capitalize() and "string(" in source:
        return True
    return ours is True and theirs is False and " in m" in source and "+" in source


def _may_succeed_where_cel_python_fails(source: str) -> bool:
    return any(marker in source for marker in (".map(", ".filter(", ".exists_one(", "!="))


@SETTINGS
@given(source=expressions, data=untyped_data)
def test_compiled_never_contradicts_cel_python(source: str, data: dict[str, Any]) -> None:
    ours, theirs = run_both(source, data)
    if isinstance(ours, BaseException):
        return  # stricter than cel-python is allowed (see the module docstring)
    if isinstance(theirs, BaseException):
        assert _may_succeed_where_cel_python_fails(source), (
            f"{source!r} on {data!r}: compiled {ours!r}, cel-python {theirs!r}"
        )
        return
    if not _a_cel_python_bug(source, ours, theirs):
        assert same_value(theirs, ours), f"{source!r} on {data!r}: {ours!r} != {theirs!r}"


# Inlined code (a tool plan's) ---------------------------------------------------------


def inlined(source: str, held: Sequence[str] = ()) -> Callable[[Mapping[str, Any]], Any] | None:
    """``source`` as the express lane runs it: its compiled code inlined in a function of
    the lane's shape, any failure an error; ``None`` when the compiler gives no inline code.
    ``held``: variables the function holds in locals first, as a plan holds what it put
    into ``variables``, which the inlined code then reads (``reading_locals``)."""
    expression = compile_expression(source)
    if expression.inline is None:
        return None
    writer = plan._Writer()
    writer.locals = {name: f"_local_{name}" for name in held}
    lines = ["def run(variables):",
             *(f"    _local_{name} = variables[{name!r}]" for name in held), "    try:",
             *writer.evaluation("_whole", expression, "        "),
             "    except _FAILURES as failure:", "        return _Failed(failure)",
             "    return value"]
    writer.namespace["_Failed"] = _Failed
    exec("\n".join(lines), writer.namespace)
    return cast(Callable[[Mapping[str, Any]], Any], writer.namespace["run"])


class _Failed:
    def __init__(self, failure: BaseException) -> None:
        self.failure = failure


def assert_agrees_with_the_function(source: str, data: Mapping[str, Any],
                                    run: Callable[[Mapping[str, Any]], Any]) -> None:
    """Value for value and error for error: ``run`` (an inlined spelling of ``source``)
    against the compiled function."""
    try:
        expected: Any = compile_expression(source).evaluate(data)
    except CelEvaluationError:
        expected = _Failed
    got = run(data)
    if expected is _Failed:
        assert isinstance(got, _Failed), f"{source!r} on {data!r}: inlined gave {got!r}"
    else:
        assert not isinstance(got, _Failed), f"{source!r} on {data!r}: {got.failure!r}"
        assert same_value(expected, got), f"{source!r} on {data!r}: {got!r} != {expected!r}"


@SETTINGS
@given(source=expressions, data=st.one_of(typed_data, untyped_data))
def test_inlined_code_agrees_with_the_function(source: str, data: dict[str, Any]) -> None:
    """The lane hands an erring call over to the general step, which evaluates the function
    and words the error."""
    run = inlined(source)
    if run is None:  # a top-level macro: the lane calls the function
        return
    assert_agrees_with_the_function(source, data, run)


def test_logic_chains_and_has_are_inlined_as_loops() -> None:
    for source in ("i > 0 && has(m.a) || s == 'a'", "has(m.d.e)", "!(i > 1 || j < 2)"):
        assert inlined(source) is not None, source
    assert compile_expression("l.all(x, x > 0)").inline is None  # a top-level macro: a call


def test_code_with_a_loop_is_called_not_inlined() -> None:
    """A return inside a loop cannot become a break (it would leave only the loop)."""
    expression = compile_expression("i > 0")
    looping = dataclasses.replace(expression, inline=Inline(
        ("for _x in variables['l']:", "    return _x", "return 0"), {}))
    assert plan._Writer().evaluation("_e", looping, "") == ["value = _e(variables)"]
