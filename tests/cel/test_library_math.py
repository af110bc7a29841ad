"""cel-go's math extension (callgate_rules.cel.library.math): results keep the argument's
type, numbers compare across int/uint/double by value, overflow and bad operands are errors."""

from __future__ import annotations

import math
from typing import Any

import pytest

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library import FUNCTIONS
from callgate_rules.cel.values import UINT64_MAX, UInt

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def call(name: str, *arguments: Any) -> Any:
    return FUNCTIONS[name].implementation(*arguments)


@pytest.mark.parametrize(("name", "arguments", "expected", "expected_type"), [
    ("math.greatest", (-5,), -5, int),
    ("math.greatest", (1, 1.0), 1, int),
    ("math.greatest", (-7, 5), 5, int),
    ("math.greatest", (INT64_MAX, 1), INT64_MAX, int),
    ("math.greatest", (5.4, 10, UInt(3), -5.0, INT64_MAX), INT64_MAX, int),
    ("math.greatest", ([5.4, 10, UInt(3), -5.0, 3.5],), 10, int),
    ("math.greatest", (1, 1.797693e308), 1.797693e308, float),
    ("math.greatest", (UInt(5), -7), 5, UInt),
    ("math.greatest", (5.4, 10, UInt(3), -5.0, UInt(UINT64_MAX)), UINT64_MAX, UInt),
    ("math.least", (INT64_MIN, 1), INT64_MIN, int),
    ("math.least", ([5.4, 10, UInt(3), -5.0, 3.5],), -5.0, float),
    ("math.least", (UInt(1), 1.0), 1, UInt),
    ("math.ceil", (-1.2,), -1.0, float),
    ("math.ceil", (1.2,), 2.0, float),
    ("math.floor", (-1.2,), -2.0, float),
    ("math.round", (-1.5,), -2.0, float),
    ("math.round", (1.5,), 2.0, float),
    ("math.round", (2.5,), 3.0, float),  # away from zero, not to even
    ("math.round", (-1.4,), -1.0, float),
    ("math.round", (0.49999999999999994,), 0.0, float),
    ("math.round", (4503599627370497.0,), 4503599627370497.0, float),
    ("math.trunc", (-1.2,), -1.0, float),
    ("math.abs", (UInt(1),), 1, UInt),
    ("math.abs", (-11,), 11, int),
    ("math.abs", (-11.5,), 11.5, float),
    ("math.sign", (UInt(100),), 1, UInt),
    ("math.sign", (UInt(0),), 0, UInt),
    ("math.sign", (-11,), -1, int),
    ("math.sign", (-32.0,), -1.0, float),
    ("math.sign", (0.0,), 0.0, float),
    ("math.sqrt", (16,), 4.0, float),
    ("math.sqrt", (UInt(2),), math.sqrt(2), float),
    ("math.bitAnd", (1, 3), 1, int),
    ("math.bitAnd", (1, -1), 1, int),
    ("math.bitAnd", (UInt(1), UInt(3)), 1, UInt),
    ("math.bitOr", (4, -2), -2, int),
    ("math.bitXor", (4, -2), -6, int),
    ("math.bitNot", (1,), -2, int),
    ("math.bitNot", (UInt(1),), UINT64_MAX - 1, UInt),
    ("math.bitNot", (UInt(0),), UINT64_MAX, UInt),
    ("math.bitShiftLeft", (1, 2), 4, int),
    ("math.bitShiftLeft", (1, 63), INT64_MIN, int),  # wraps as Go's int64 does
    ("math.bitShiftLeft", (1, 200), 0, int),
    ("math.bitShiftLeft", (-1, 200), 0, int),
    ("math.bitShiftLeft", (UInt(1), 2), 4, UInt),
    ("math.bitShiftRight", (1024, 2), 256, int),
    ("math.bitShiftRight", (-1024, 3), 2305843009213693824, int),  # logical, as cel-go's
    ("math.bitShiftRight", (-1024, 64), 0, int),
    ("math.bitShiftRight", (UInt(1024), 200), 0, UInt),
])
def test_results_and_their_types(name: str, arguments: tuple[Any, ...], expected: Any,
                                 expected_type: type) -> None:
    result = call(name, *arguments)
    assert result == expected
    assert type(result) is expected_type


def test_nan_passes_through_rounding_and_sign() -> None:
    for name in ("math.round", "math.trunc", "math.ceil", "math.floor", "math.sign"):
        assert math.isnan(call(name, math.nan))
    assert call("math.isNaN", math.nan) and not call("math.isNaN", math.inf)
    assert call("math.isInf", -math.inf) and not call("math.isInf", math.nan)
    assert call("math.isFinite", 1.0 / 1.5) and not call("math.isFinite", math.nan)


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("math.abs", (INT64_MIN,), "integer overflow"),
    ("math.ceil", (1,), "no such overload"),
    ("math.round", (1,), "no such overload"),
    ("math.sign", (True,), "no such overload"),
    ("math.isNaN", (True,), "no such overload"),
    ("math.bitAnd", (UInt(2), ""), "no such overload"),
    ("math.bitOr", (1.2, 1), "no such overload"),
    ("math.bitXor", ([], [1]), "no such overload"),
    ("math.bitAnd", (1, UInt(1)), "no such overload"),  # no mixing int and uint
    ("math.bitNot", ("",), "no such overload"),
    ("math.bitShiftLeft", (UInt(1), -1), "math.bitShiftLeft() negative offset: -1"),
    ("math.bitShiftRight", (1, -1), "math.bitShiftRight() negative offset: -1"),
    ("math.bitShiftLeft", (4.3, 1), "no such overload"),
    ("math.greatest", ([],), "math.greatest(list) argument must not be empty"),
    ("math.least", (1, "a"), "no such overload"),
    ("math.greatest", (True, 1), "no such overload"),
])
def test_errors(name: str, arguments: tuple[Any, ...], message: str) -> None:
    with pytest.raises(CelEvaluationError) as raised:
        call(name, *arguments)
    assert str(raised.value).startswith(message)


def test_greatest_is_variadic() -> None:
    assert FUNCTIONS["math.greatest"].variadic and FUNCTIONS["math.least"].variadic
    assert call("math.greatest", *range(1000)) == 999
