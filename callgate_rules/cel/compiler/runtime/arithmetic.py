"""CEL ``+``, ``-``, ``*``, ``/``, ``%`` and unary ``-``: ints checked to 64 bits, uints to
0..2**64-1, doubles as IEEE 754, durations and timestamps within CEL's range, strings,
bytes and lists joined.
"""

from __future__ import annotations

import math
from typing import Any

from callgate_rules.cel.compiler.runtime.kinds import (
    checked_duration,
    checked_int,
    checked_timestamp,
    checked_uint,
    kind,
    no_overload,
)
from callgate_rules.cel.errors import CelEvaluationError


def add(left: Any, right: Any) -> Any:
    left_type = type(left)
    if left_type is type(right):
        if left_type is int:
            return checked_int(left + right)
        if left_type is float or left_type is str or left_type is bytes or left_type is list:
            return left + right
    pair = (kind(left), kind(right))
    if pair in (("double", "double"), ("string", "string"), ("bytes", "bytes")):
        return left + right
    if pair == ("int", "int"):
        return checked_int(int(left) + int(right))
    if pair == ("uint", "uint"):
        return checked_uint(int(left) + int(right))
    if pair == ("list", "list"):
        return [*left, *right]
    if pair == ("duration", "duration"):
        return checked_duration(left + right)
    if pair == ("timestamp", "duration"):
        return checked_timestamp(lambda: left + right)
    if pair == ("duration", "timestamp"):
        return checked_timestamp(lambda: right + left)
    raise no_overload("_+_", left, right)


def subtract(left: Any, right: Any) -> Any:
    left_type = type(left)
    if left_type is type(right):
        if left_type is int:
            return checked_int(left - right)
        if left_type is float:
            return left - right
    pair = (kind(left), kind(right))
    if pair == ("int", "int"):
        return checked_int(int(left) - int(right))
    if pair == ("uint", "uint"):
        return checked_uint(int(left) - int(right))
    if pair == ("double", "double"):
        return left - right
    if pair == ("duration", "duration"):
        return checked_duration(left - right)
    if pair == ("timestamp", "duration"):
        return checked_timestamp(lambda: left - right)
    if pair == ("timestamp", "timestamp"):
        return checked_duration(left - right)
    raise no_overload("_-_", left, right)


def multiply(left: Any, right: Any) -> Any:
    left_type = type(left)
    if left_type is type(right):
        if left_type is int:
            return checked_int(left * right)
        if left_type is float:
            return left * right
    pair = (kind(left), kind(right))
    if pair == ("int", "int"):
        return checked_int(int(left) * int(right))
    if pair == ("uint", "uint"):
        return checked_uint(int(left) * int(right))
    if pair == ("double", "double"):
        return left * right
    raise no_overload("_*_", left, right)


def divide(left: Any, right: Any) -> Any:
    """Integer division truncates toward zero; double division follows IEEE 754."""
    pair = (kind(left), kind(right))
    if pair == ("int", "int"):
        if right == 0:
            raise CelEvaluationError("division by zero")
        quotient = abs(left) // abs(right)
        return checked_int(-quotient if (left < 0) != (right < 0) else quotient)
    if pair == ("uint", "uint"):
        if right == 0:
            raise CelEvaluationError("division by zero")
        return checked_uint(int(left) // int(right))
    if pair == ("double", "double"):
        if right == 0.0:
            if left == 0.0 or math.isnan(left):
                return math.nan
            return math.copysign(math.inf, left) * math.copysign(1.0, right)
        return left / right
    raise no_overload("_/_", left, right)


def modulo(left: Any, right: Any) -> Any:
    """Integer remainder with the sign of the dividend; there is no double modulo."""
    pair = (kind(left), kind(right))
    if pair == ("int", "int") or pair == ("uint", "uint"):
        if right == 0:
            raise CelEvaluationError("modulus by zero")
        remainder = abs(int(left)) % abs(int(right))
        if pair[0] == "uint":
            return checked_uint(remainder)
        return -remainder if left < 0 else remainder
    raise no_overload("_%_", left, right)


def negate(operand: Any) -> Any:
    operand_kind = kind(operand)
    if operand_kind == "int":
        return checked_int(-operand)
    if operand_kind == "double":
        return -operand
    raise no_overload("-_", operand)
