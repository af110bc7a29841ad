"""Type conversions: ``int()``, ``double()``, ``string()``, ``bool()``, ``bytes()``, each only
where the CEL specification defines it (``timestamp()`` and ``duration()`` are in
``timestamps``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from celpy import celtypes

from callgate_rules.cel.compiler.runtime.kinds import checked_int, kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
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
    if value_kind == "int":
        return int(value)
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


def to_double(value: Any) -> float:
    value_kind = kind(value)
    if value_kind == "double":
        return float(value)
    if value_kind == "int":
        return float(value)
    if value_kind == "string":
        if not _DOUBLE_TEXT.fullmatch(value):
            raise CelEvaluationError(f"cannot convert {value!r} to double")
        return float(value)
    raise no_overload("double", value)


def to_string(value: Any) -> str:
    """``string(x)``; numbers, timestamps and durations are formatted as cel-python does."""
    value_kind = kind(value)
    if value_kind == "string":
        return str(value)
    if value_kind in ("int", "double"):
        return str(value)
    if value_kind == "bool":
        return "true" if value else "false"
    if value_kind == "bytes":
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise CelEvaluationError("invalid UTF-8 in bytes") from None
    if value_kind == "timestamp":
        return str(celtypes.TimestampType(value))
    if value_kind == "duration":
        return f"{int(value.total_seconds())}s"
    raise no_overload("string", value)


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
