"""cel-go's lists and sets extensions (callgate_rules.cel.library.lists, sets): CEL
equality and ordering across numeric types, optionals from first/last, errors as cel-go's."""

from __future__ import annotations

import math
import time
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.cel.compiler import runtime
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library import FUNCTIONS
from callgate_rules.cel.library.equality import key
from callgate_rules.cel.values import NONE, Optional, UInt


def call(name: str, *arguments: Any) -> Any:
    return FUNCTIONS[name].implementation(*arguments)


@pytest.mark.parametrize(("name", "arguments", "expected"), [
    ("slice", ([1, 2, 3, 4], 1, 3), [2, 3]),
    ("slice", ([1, 2, 3, 4], 4, 4), []),
    ("flatten", ([1, [2, 3], [4]],), [1, 2, 3, 4]),
    ("flatten", ([1, [2, [3, 4]]],), [1, 2, [3, 4]]),
    ("flatten", ([1, [2, [3, [4]]]], 2), [1, 2, 3, [4]]),
    ("flatten", ([1, [2]], 0), [1, [2]]),
    ("flatten", ([],), []),
    ("sort", ([3, 2, 1],), [1, 2, 3]),
    ("sort", (["b", "c", "a"],), ["a", "b", "c"]),
    ("sort", ([3, 1.5, UInt(2)],), [1.5, UInt(2), 3]),  # numbers by value
    ("sort", ([timedelta(2), timedelta(1)],), [timedelta(1), timedelta(2)]),
    ("distinct", ([1, 2, 2, 3, 3, 3],), [1, 2, 3]),
    ("distinct", (["b", "b", "c", "a", "c"],), ["b", "c", "a"]),
    ("distinct", ([1, "b", 2, "b"],), [1, "b", 2]),
    ("distinct", ([1, 1.0, UInt(1), 2],), [1, 2]),  # 1 == 1.0 == 1u
    ("distinct", ([[1], [1.0], [2]],), [[1], [2]]),
    ("distinct", ([True, 1],), [True, 1]),  # bool is not a number in CEL
    ("reverse", ([5, 1, 2, 3],), [3, 2, 1, 5]),
    ("reverse", ("abc",), "cba"),
    ("lists.range", (4,), [0, 1, 2, 3]),
    ("lists.range", (0,), []),
    ("lists.range", (-3,), []),
    ("first", ([1, 2, 3],), Optional(1, True)),
    ("first", ([],), NONE),
    ("last", ([1, 2, 3],), Optional(3, True)),
    ("last", ([],), NONE),
    ("sets.contains", ([], []), True),
    ("sets.contains", ([1, 2, 3, 4], [2, 3]), True),
    ("sets.contains", ([1, 2, 3], [3, 4]), False),
    ("sets.contains", ([1, 2], [1.0, UInt(2)]), True),
    ("sets.contains", ([[1], [2, 3]], [[2, 3.0]]), True),
    ("sets.equivalent", ([1, 2, 3], [3, 2, 1]), True),
    ("sets.equivalent", ([1, 1, 2], [2, 1]), True),
    ("sets.equivalent", ([1, 2], [1, 2, 3]), False),
    ("sets.intersects", ([1], [1.0, 2]), True),
    ("sets.intersects", ([1], []), False),
    ("sets.intersects", (["a"], [1]), False),
])
def test_documented_results(name: str, arguments: tuple[Any, ...], expected: Any) -> None:
    assert call(name, *arguments) == expected


def test_distinct_keeps_every_nan() -> None:
    result = call("distinct", [math.nan, math.nan, 1.0])
    assert len(result) == 3 and math.isnan(result[0]) and math.isnan(result[1])


def test_sort_is_stable_among_equal_numbers() -> None:
    result = call("sort", [2, 1.0, UInt(1), 1])
    assert [type(item) for item in result] == [float, UInt, int, int]


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("slice", ([1, 2, 3, 4], -1, 3), "cannot slice(-1, 3), negative indexes not supported"),
    ("slice", ([1, 2, 3, 4], 2, 1),
     "cannot slice(2, 1), start index must be less than or equal to end index"),
    ("slice", ([1, 2, 3, 4], 0, 10), "cannot slice(0, 10), list is length 4"),
    ("flatten", ([1, [2]], -1), "level must be non-negative"),
    ("sort", ([1, "a"],), "sort: list elements must be comparable: "),
    ("sort", ([[1], [2]],), "sort: list elements must be comparable"),
    ("lists.range", (2**40,), "lists.range(1099511627776) is over callgate's limit"),
    ("first", ("abc",), "no such overload"),
    ("sets.contains", ([1], 1), "no such overload"),
    ("slice", ([1], 0, 1.0), "no such overload"),
])
def test_errors(name: str, arguments: tuple[Any, ...], message: str) -> None:
    with pytest.raises(CelEvaluationError) as raised:
        call(name, *arguments)
    assert str(raised.value).startswith(message)


def test_distinct_of_many_scalars_is_fast() -> None:
    values = list(range(50_000)) * 2
    assert call("distinct", values) == list(range(50_000))


def test_distinct_and_sets_of_many_lists_take_linear_time() -> None:
    lists = [[number, [number]] for number in range(10_000)]
    started = time.perf_counter()
    assert call("distinct", lists + lists) == lists
    assert call("sets.equivalent", lists, list(reversed(lists)))
    assert call("sets.contains", lists, lists[:5000])
    assert not call("sets.intersects", lists, [[-1, [-1]]])
    # 10,000 lists compared pair by pair take minutes; linear is about 0.3 s idle, and a loaded
    # 2-core machine has been seen to take over 2 s
    assert time.perf_counter() - started < 20.0


_SCALARS = st.one_of(
    st.integers(min_value=-3, max_value=3), st.integers(min_value=0, max_value=3).map(UInt),
    st.sampled_from([0.0, -0.0, 1.0, 1.5, math.nan]), st.booleans(), st.none(),
    st.sampled_from(["", "a", b"", b"a"]),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(st.sampled_from(["k", "l"]), st.integers(0, 2)), inner,
                    max_size=2)), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(left=_VALUES, right=_VALUES)
def test_the_hash_key_is_cel_equality(left: Any, right: Any) -> None:
    try:
        equal = runtime.equals(left, right)
    except CelEvaluationError:
        return  # CEL has no answer (a list against a number): nothing to agree with
    left_key, right_key = key(left), key(right)
    if left_key is None or right_key is None:
        assert not equal
    else:
        assert (left_key == right_key) is equal
