"""Type conversions: ``int()``, ``double()``, ``string()``, ``bool()``, ``bytes()``, each only
where the CEL specification defines it (``timestamp()`` and ``duration()`` are in
``timestamps``).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from callgate_rules.cel.compiler.runtime.kinds import (
    checked_int,
    checked_uint,
    kind,
    no_overload,
)
from callgate_rules.cel.compiler.runtime.timestamps import duration_text, timestamp_text
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.values import UINT64_MAX, CelType, UInt

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_UINT_TEXT = re.compile(r"[0-9]+")
# ``[0-9]+(?:\.[0-9]*)?``, not ``[0-9]+\.?[0-9]*``: the same texts, but the latter splits a
# run of digits between its two repetitions in every way, quadratic time on "1"*8000+"x".
_DOUBLE_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)",
    re.IGNORECASE,
)
_TRUE_TEXTS = frozenset({"1", "t", "true", "TRUE", "True"})
_FALSE_TEXTS = frozenset({"0", "f", "false", "FALSE", "False"})


def to_int(value: Any) -> int:
    value_kind = kind(value)
    if value_kind == "int" or value_kind == "uint":
        return checked_int(int(value))
    if value_kind == "double":
        # The spec's range is open at both ends: -2**63 as a double is already suspect.
        if math.isnan(value) or not (-(2.0**63) < value < 2.0**63):
            raise CelEvaluationError("int() range error")
        return int(math.trunc(value))
    if value_kind == "string":
        if not _INT_TEXT.fullmatch(value):
            raise CelEvaluationError(f"cannot convert {value!r} to int")
        return checked_int(int(value))
    if value_kind == "timestamp":
        return checked_int(int(value.timestamp()))
    raise no_overload("int", value)


def to_uint(value: Any) -> UInt:
    value_kind = kind(value)
    if value_kind == "uint":
        return value  # type: ignore[no-any-return]
    if value_kind == "int":
        return checked_uint(int(value))
    if value_kind == "double":
        if math.isnan(value) or not (-1.0 < value < 2.0**64):
            raise CelEvaluationError("uint() range error")
        return UInt(math.trunc(value))
    if value_kind == "string":
        if not _UINT_TEXT.fullmatch(value) or int(value) > UINT64_MAX:
            raise CelEvaluationError(f"cannot convert {value!r} to uint")
        return UInt(int(value))
    raise no_overload("uint", value)


def to_double(value: Any) -> float:
    value_kind = kind(value)
    if value_kind == "double":
        return float(value)
    if value_kind == "int" or value_kind == "uint":
        return float(value)
    if value_kind == "string":
        if not _DOUBLE_TEXT.fullmatch(value):
            raise CelEvaluationError(f"cannot convert {value!r} to double")
        return float(value)
    raise no_overload("double", value)


def to_string(value: Any) -> str:
    """``string(x)``; numbers, timestamps and durations are formatted as cel-go does."""
    value_kind = kind(value)
    if value_kind == "string":
        return str(value)
    if value_kind == "int" or value_kind == "uint":
        return str(int(value))
    if value_kind == "double":
        return _double_text(float(value))
    if value_kind == "bool":
        return "true" if value else "false"
    if value_kind == "bytes":
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise CelEvaluationError("invalid UTF-8 in bytes") from None
    if value_kind == "timestamp":
        return timestamp_text(value)
    if value_kind == "duration":
        return duration_text(value)
    if value_kind == "type":
        return str(value.name)
    if value_kind in ("net.IP", "net.CIDR"):  # cel-go's network extension
        return str(value)
    if value_kind == "kubernetes.URL":  # the text the URL was made from
        return str(value.text)
    raise no_overload("string", value)


def _double_text(value: float) -> str:
    """Go's ``strconv.FormatFloat(x, 'g', -1, 64)``, which cel-go's ``string(double)`` uses:
    the fewest digits that read back as ``x``, in exponent form when the decimal exponent is
    below -4 or at least 6 (``1.5``, ``123456``, ``1e+06``, ``1.23456789e+08``, ``1e-05``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if 1e-4 <= abs(value) < 1e6:  # the common case: Python's repr has Go's digits there
        return repr(value).removesuffix(".0")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    # repr gives the shortest round-tripping digits; Decimal splits them from the exponent.
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent  # digits before the decimal point
    prefix = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        power = point - 1
        return f"{prefix}{digits[0]}{fraction}e{'+' if power >= 0 else '-'}{abs(power):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return prefix + digits + "0" * (point - len(digits))
    return f"{prefix}{digits[:point]}.{digits[point:]}"


_TYPE_OF_KIND: dict[str, CelType] = {
    name: CelType(type_name) for name, type_name in (
        ("int", "int"), ("uint", "uint"), ("double", "double"), ("bool", "bool"),
        ("string", "string"), ("bytes", "bytes"), ("null", "null_type"), ("list", "list"),
        ("map", "map"), ("timestamp", "google.protobuf.Timestamp"),
        ("duration", "google.protobuf.Duration"), ("type", "type"),
        ("optional_type", "optional_type"), ("kubernetes.URL", "kubernetes.URL"),
        ("net.IP", "net.IP"), ("net.CIDR", "net.CIDR"))
}


def type_of(value: Any) -> CelType:
    """``type(x)``: the type of ``x`` as a value (``type(1) == int``)."""
    return _TYPE_OF_KIND[kind(value)]


def to_bool(value: Any) -> bool:
    value_kind = kind(value)
    if value_kind == "bool":
        return bool(value)
    if value_kind == "string":
        if value in _TRUE_TEXTS:
            return True
        if value in _FALSE_TEXTS:
            return False
        raise CelEvaluationError(f"cannot convert {value!r} to bool")
    raise no_overload("bool", value)


def to_bytes(value: Any) -> bytes:
    value_kind = kind(value)
    if value_kind == "bytes":
        return bytes(value)
    if value_kind == "string":
        return str(value).encode("utf-8")
    raise no_overload("bytes", value)
