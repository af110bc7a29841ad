"""cel-go's math extension (``ext.Math``): ``math.greatest``, ``math.least``, ``math.abs``,
``math.ceil``, ``math.floor``, ``math.round``, ``math.trunc``, ``math.sign``, ``math.sqrt``,
``math.isNaN``, ``math.isInf``, ``math.isFinite`` and the bit operations.

Semantics are cel-go's (ext/math.go and ``math_ext.textproto``): ``greatest`` and ``least``
compare ints, uints and doubles with one another by value and return the winning argument
as it is (its type kept); rounding functions take doubles only; ``abs`` of the smallest
int64 overflows; shifts by 64 or more give 0, a negative shift is an error, and shifting an
int right is a logical (unsigned) shift, as Go's ``uint64(x) >> n``.
"""

from __future__ import annotations

import math as python_math
from collections.abc import Callable
from typing import Any

from callgate_rules.cel.compiler.runtime.compare import less
from callgate_rules.cel.compiler.runtime.kinds import INT64_MIN, kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library.signatures import Function, Overload, global_
from callgate_rules.cel.values import UINT64_MAX, UInt

LIBRARY = "math"
_NUMBERS = frozenset({"int", "uint", "double"})
_BITS = 64


def _extreme(name: str, better: Callable[[Any, Any], bool]) -> Callable[..., Any]:
    def extreme(*arguments: Any) -> Any:
        candidates: Any = arguments
        if len(arguments) == 1 and kind(arguments[0]) == "list":
            candidates = arguments[0]
            if not candidates:
                raise CelEvaluationError(f"{name}(list) argument must not be empty")
        if not candidates:
            raise no_overload(name)
        for candidate in candidates:
            if kind(candidate) not in _NUMBERS:
                raise no_overload(name, *arguments)
        chosen = candidates[0]
        for candidate in candidates[1:]:
            if better(candidate, chosen):
                chosen = candidate
        return chosen

    extreme.__name__ = name
    return extreme


greatest = _extreme("math.greatest", lambda a, b: less(b, a))
least = _extreme("math.least", less)


def _double(name: str, value: Any) -> float:
    if kind(value) != "double":
        raise no_overload(name, value)
    return float(value)


def ceil(value: Any) -> float:
    number = _double("math.ceil", value)
    return number if not python_math.isfinite(number) else float(python_math.ceil(number))


def floor(value: Any) -> float:
    number = _double("math.floor", value)
    return number if not python_math.isfinite(number) else float(python_math.floor(number))


def round_half_away(value: Any) -> float:
    """``math.round``: halves round away from zero, as Go's math.Round."""
    number = _double("math.round", value)
    if not python_math.isfinite(number):
        return number
    whole = float(python_math.trunc(number))
    # number - whole is exact (both within one unit of each other), so no rounding slips in
    # (0.49999999999999994 + 0.5 would round up to 1.0).
    if abs(number - whole) >= 0.5:
        whole += python_math.copysign(1.0, number)
    return python_math.copysign(whole, number)


def trunc(value: Any) -> float:
    number = _double("math.trunc", value)
    return number if not python_math.isfinite(number) else float(python_math.trunc(number))


def absolute(value: Any) -> Any:
    value_kind = kind(value)
    if value_kind == "int":
        if value == INT64_MIN:
            raise CelEvaluationError("integer overflow: math.abs of the smallest int")
        return abs(int(value))
    if value_kind == "uint":
        return value
    if value_kind == "double":
        return abs(float(value))
    raise no_overload("math.abs", value)


def sign(value: Any) -> Any:
    value_kind = kind(value)
    if value_kind == "int":
        return (value > 0) - (value < 0)
    if value_kind == "uint":
        return UInt(1 if value else 0)
    if value_kind == "double":
        if python_math.isnan(value):
            return value
        return float((value > 0) - (value < 0))
    raise no_overload("math.sign", value)


def square_root(value: Any) -> float:
    if kind(value) not in _NUMBERS:
        raise no_overload("math.sqrt", value)
    number = float(value)
    return python_math.sqrt(number) if number >= 0 else python_math.nan


def is_nan(value: Any) -> bool:
    return python_math.isnan(_double("math.isNaN", value))


def is_inf(value: Any) -> bool:
    return python_math.isinf(_double("math.isInf", value))


def is_finite(value: Any) -> bool:
    return python_math.isfinite(_double("math.isFinite", value))


def _signed(bits: int) -> int:
    """A 64-bit pattern as an int64 (two's complement)."""
    bits &= UINT64_MAX
    return bits - (1 << _BITS) if bits >> (_BITS - 1) else bits


def _bitwise(name: str, operate: Callable[[int, int], int]) -> Callable[[Any, Any], Any]:
    def bitwise(left: Any, right: Any) -> Any:
        pair = (kind(left), kind(right))
        if pair == ("int", "int"):
            return _signed(operate(int(left), int(right)))
        if pair == ("uint", "uint"):
            return UInt(operate(int(left), int(right)) & UINT64_MAX)
        raise no_overload(name, left, right)

    bitwise.__name__ = name
    return bitwise


bit_and = _bitwise("math.bitAnd", lambda a, b: a & b)
bit_or = _bitwise("math.bitOr", lambda a, b: a | b)
bit_xor = _bitwise("math.bitXor", lambda a, b: a ^ b)


def bit_not(value: Any) -> Any:
    value_kind = kind(value)
    if value_kind == "int":
        return ~int(value)
    if value_kind == "uint":
        return UInt(UINT64_MAX - int(value))
    raise no_overload("math.bitNot", value)


def _shift(name: str, value: Any, offset: Any) -> tuple[str, int, int]:
    value_kind = kind(value)
    if value_kind not in ("int", "uint") or kind(offset) != "int":
        raise no_overload(name, value, offset)
    if offset < 0:
        raise CelEvaluationError(f"{name}() negative offset: {int(offset)}")
    return value_kind, int(value) & UINT64_MAX, int(offset)


def bit_shift_left(value: Any, offset: Any) -> Any:
    value_kind, bits, places = _shift("math.bitShiftLeft", value, offset)
    shifted = (bits << places) & UINT64_MAX if places < _BITS else 0
    return UInt(shifted) if value_kind == "uint" else _signed(shifted)


def bit_shift_right(value: Any, offset: Any) -> Any:
    value_kind, bits, places = _shift("math.bitShiftRight", value, offset)
    shifted = bits >> places if places < _BITS else 0
    return UInt(shifted) if value_kind == "uint" else _signed(shifted)


def _each(name: str, prefix: str, types: tuple[str, ...], result: str | None = None
          ) -> tuple[Overload, ...]:
    ids = {"int": "int", "uint": "uint", "double": "double"}
    return tuple(global_(f"{prefix}_{ids[t]}", t, result or t) for t in types)


_ALL = ("int", "uint", "double")
_INTEGERS = ("int", "uint")


def _extremes(prefix: str) -> tuple[Overload, ...]:
    single = tuple(global_(f"{prefix}_{t}", t, t) for t in _ALL)
    pairs = tuple(global_(f"{prefix}_{a}_{b}", a, b, "dyn" if a != b else a)
                  for a in _ALL for b in _ALL)
    lists = tuple(global_(f"{prefix}_list_{t}", f"list({t})", t) for t in _ALL)
    return (*single, *pairs, global_(f"{prefix}_list_dyn", "list(dyn)", "dyn"), *lists,
            global_(f"{prefix}_dyn_dyn", "dyn", "dyn", "dyn"))


def _bit_pairs(prefix: str) -> tuple[Overload, ...]:
    return tuple(global_(f"{prefix}_{t}_{t}", t, t, t) for t in _INTEGERS)


FUNCTIONS: tuple[Function, ...] = (
    Function("math.greatest", LIBRARY, _extremes("math_@max"), greatest,
             "the greatest of numbers (or of a list of numbers), compared by value",
             variadic=True),
    Function("math.least", LIBRARY, _extremes("math_@min"), least,
             "the least of numbers (or of a list of numbers), compared by value",
             variadic=True),
    Function("math.ceil", LIBRARY, (global_("math_ceil_double", "double", "double"),), ceil,
             "the least integral double not below"),
    Function("math.floor", LIBRARY, (global_("math_floor_double", "double", "double"),), floor,
             "the greatest integral double not above"),
    Function("math.round", LIBRARY, (global_("math_round_double", "double", "double"),),
             round_half_away, "the nearest integral double, halves away from zero"),
    Function("math.trunc", LIBRARY, (global_("math_trunc_double", "double", "double"),), trunc,
             "the integral part, toward zero"),
    Function("math.abs", LIBRARY, _each("math.abs", "math_abs", _ALL), absolute,
             "the absolute value (overflow for the smallest int)"),
    Function("math.sign", LIBRARY, _each("math.sign", "math_sign", _ALL), sign,
             "-1, 0 or 1 in the argument's type"),
    Function("math.sqrt", LIBRARY, _each("math.sqrt", "math_sqrt", _ALL, "double"),
             square_root, "the square root as a double (NaN below zero)"),
    Function("math.isNaN", LIBRARY, (global_("math_isNaN_double", "double", "bool"),), is_nan,
             "whether a double is NaN"),
    Function("math.isInf", LIBRARY, (global_("math_isInf_double", "double", "bool"),), is_inf,
             "whether a double is infinite"),
    Function("math.isFinite", LIBRARY, (global_("math_isFinite_double", "double", "bool"),),
             is_finite, "whether a double is neither infinite nor NaN"),
    Function("math.bitAnd", LIBRARY, _bit_pairs("math_bitAnd"), bit_and, "bitwise and"),
    Function("math.bitOr", LIBRARY, _bit_pairs("math_bitOr"), bit_or, "bitwise or"),
    Function("math.bitXor", LIBRARY, _bit_pairs("math_bitXor"), bit_xor, "bitwise xor"),
    Function("math.bitNot", LIBRARY, _each("math.bitNot", "math_bitNot", _INTEGERS), bit_not,
             "bitwise complement"),
    Function("math.bitShiftLeft", LIBRARY, tuple(
        global_(f"math_bitShiftLeft_{t}_int", t, "int", t) for t in _INTEGERS),
        bit_shift_left, "shift left (0 from 64 places on)"),
    Function("math.bitShiftRight", LIBRARY, tuple(
        global_(f"math_bitShiftRight_{t}_int", t, "int", t) for t in _INTEGERS),
        bit_shift_right, "logical shift right (0 from 64 places on)"),
)
