"""What every CEL operator needs: the CEL kind of a value, the ranges CEL allows, the errors.

``kind`` names a border value's CEL type (``int``, ``string``, ``map``, ...); operators use
it on their general path, after the fast path for two operands of one exact type. The
range checks hold ints to 64 bits and durations to cel-go's ±292 years; the error
makers are what compiled code raises and how a Python exception from an inlined fast path
becomes the ``CelEvaluationError`` callers see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NoReturn

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.values import CIDR, IP, UINT64_MAX, URL, CelType, Optional, UInt

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# cel-go's duration range: what int64 nanoseconds hold, about ±292 years.
DURATION_MAX = timedelta(microseconds=(2**63 - 1) // 1000)
DURATION_MAX_SECONDS = int(DURATION_MAX.total_seconds())

# Python exceptions that a compiled expression may raise on its inlined fast paths (a missing
# key, subscripting a non-map, an out-of-range timestamp). Wherever CEL absorbs or reports an
# error, these count as CEL errors just like CelEvaluationError.
FAILURES: tuple[type[Exception], ...] = (
    CelEvaluationError,
    LookupError,
    TypeError,
    ValueError,
    ArithmeticError,
    AttributeError,
)

# Kinds ---------------------------------------------------------------------------------------

_KIND_OF_TYPE: dict[type, str] = {
    bool: "bool",
    int: "int",
    float: "double",
    str: "string",
    bytes: "bytes",
    type(None): "null",
    list: "list",
    tuple: "list",
    dict: "map",
    datetime: "timestamp",
    timedelta: "duration",
    UInt: "uint",
    CelType: "type",
    Optional: "optional_type",
    URL: "kubernetes.URL",
    IP: "net.IP",
    CIDR: "net.CIDR",
}


def kind(value: Any) -> str:
    """The CEL type name of a border value (``int``, ``string``, ``map``, ...)."""
    found = _KIND_OF_TYPE.get(type(value))
    if found is not None:
        return found
    # Subclasses (a str enum, a pendulum DateTime, a MappingProxyType) are rare: classify
    # them by ancestry, bool before int because bool is an int to Python.
    for python_type, name in (
        (bool, "bool"),
        (int, "int"),
        (float, "double"),
        (str, "string"),
        (bytes, "bytes"),
        (datetime, "timestamp"),
        (timedelta, "duration"),
        (Mapping, "map"),
        (list, "list"),
        (tuple, "list"),
    ):
        if isinstance(value, python_type):
            return name
    raise CelEvaluationError(f"unsupported value of Python type {type(value).__name__}")


def kind_or_python_type(value: Any) -> str:
    """``kind(value)``, or the Python type's name where CEL has none (for messages)."""
    try:
        return kind(value)
    except CelEvaluationError:
        return type(value).__name__


AGGREGATE_KINDS = frozenset({"list", "map"})


class _Absent:
    """Marks "no such key" where ``None`` is a legitimate value."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()


# Ranges --------------------------------------------------------------------------------------


def checked_int(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise CelEvaluationError("integer overflow")


def checked_uint(value: int) -> UInt:
    if 0 <= value <= UINT64_MAX:
        return UInt(value)
    raise CelEvaluationError("unsigned integer overflow")


def checked_duration(value: timedelta) -> timedelta:
    if -DURATION_MAX <= value <= DURATION_MAX:
        return value
    raise CelEvaluationError("duration out of range")


def checked_timestamp(compute: Callable[[], datetime]) -> datetime:
    try:
        return compute()
    except OverflowError:
        raise CelEvaluationError("timestamp out of range") from None


# Errors --------------------------------------------------------------------------------------


def no_overload(operator: str, *operands: Any) -> CelEvaluationError:
    """The error for an operator or function CEL does not define on these operands' kinds."""
    kinds = ", ".join(kind_or_python_type(operand) for operand in operands)
    return CelEvaluationError(f"no such overload: {operator} applied to ({kinds})")


def fail(message: str) -> NoReturn:
    """Raise a CEL error; compiled code calls this where the error is known at compile time."""
    raise CelEvaluationError(message)


def not_bool(operator: str, value: Any) -> NoReturn:
    """``!``, ``&&``, ``||`` and ``?:`` were handed something that is not a bool."""
    if isinstance(value, BaseException):
        raise value
    raise no_overload(operator, value)


def logic_failure(operator: str, outcomes: Sequence[Any]) -> BaseException:
    """The error an ``&&``/``||`` chain reports when no operand decided it: the first
    operand that failed, or was not a bool."""
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            return outcome
        if type(outcome) is not bool:
            return no_overload(operator, outcome)
    return CelEvaluationError(f"{operator} had no deciding operand")  # unreachable by design


def translate(
    error: BaseException, variables: Mapping[str, Any], names: frozenset[str]
) -> CelEvaluationError:
    """A Python exception from compiled code → the CelEvaluationError callers see."""
    if isinstance(error, CelEvaluationError):
        return error
    if isinstance(error, KeyError) and error.args:
        key = error.args[0]
        if key in names and key not in variables:
            return CelEvaluationError(f"undeclared reference to {key!r}")
        return CelEvaluationError(f"no such key: {key!r}")
    if isinstance(error, IndexError):
        return CelEvaluationError("index out of range")
    if isinstance(error, ZeroDivisionError):
        return CelEvaluationError("division by zero")
    if isinstance(error, OverflowError):
        return CelEvaluationError(f"overflow: {error}")
    if isinstance(error, TypeError | AttributeError):
        return CelEvaluationError(f"no such overload ({error})")
    return CelEvaluationError(str(error) or type(error).__name__)
