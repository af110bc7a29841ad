"""CEL operators and functions over plain Python values, as called by compiled expressions.

Every function here takes and returns the values of callgate's CEL border (``bool``, ``int``,
``float``, ``str``, ``bytes``, ``None``, lists, mappings, aware ``datetime``, ``timedelta``)
and raises :class:`CelEvaluationError` when CEL has no answer. Each starts with a fast path
for the common same-type case; the slower, general path classifies operands by CEL kind.

The generated code inlines the cheapest cases itself (see ``codegen``) and calls these for
everything else; constant folding calls them at compile time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Any, NoReturn

from celpy import celtypes

from callgate_rules.cel.compiler.regex import CompiledPattern, compile_pattern
from callgate_rules.cel.expression import CelEvaluationError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# cel-python's duration range (celtypes.DurationType.MaxSeconds): about ±10,000 years.
DURATION_MAX_SECONDS = 315_576_000_000

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

# ---------------------------------------------------------------------------------------------
# Kinds and errors
# ---------------------------------------------------------------------------------------------

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


def no_overload(operator: str, *operands: Any) -> CelEvaluationError:
    kinds = ", ".join(_kind_or_python_type(operand) for operand in operands)
    return CelEvaluationError(f"no such overload: {operator} applied to ({kinds})")


def _kind_or_python_type(value: Any) -> str:
    try:
        return kind(value)
    except CelEvaluationError:
        return type(value).__name__


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


# ---------------------------------------------------------------------------------------------
# Equality and ordering
# ---------------------------------------------------------------------------------------------

# Types whose Python ``==`` / ``<`` is CEL's when both operands have exactly that type.
SCALAR_TYPES = frozenset({str, int, float, bool, bytes, type(None), datetime, timedelta})
ORDERED_TYPES = frozenset({str, int, float, bool, bytes, datetime, timedelta})

_NUMERIC_KINDS = frozenset({"int", "double"})
_AGGREGATE_KINDS = frozenset({"list", "map"})
_ORDERED_KINDS = frozenset({"int", "double", "string", "bytes", "bool", "timestamp", "duration"})


def equals(left: Any, right: Any) -> bool:
    """CEL ``==`` as cel-python answers it for operands of different types: numbers equal
    only numbers of their own type (``1 == 1.0`` and ``1 == true`` have no overload), lists
    and maps compare element-wise and equal ``null`` never, and the remaining kinds (bool,
    string, bytes, null, timestamp, duration) are simply unequal to one another."""
    left_type = type(left)
    if left_type is type(right) and left_type in SCALAR_TYPES:
        return bool(left == right)
    left_kind, right_kind = kind(left), kind(right)
    if left_kind == right_kind:
        if left_kind == "list":
            return _lists_equal(left, right)
        if left_kind == "map":
            return _maps_equal(left, right)
        return bool(left == right)
    if left_kind in _NUMERIC_KINDS or right_kind in _NUMERIC_KINDS:
        raise no_overload("_==_", left, right)
    if left_kind in _AGGREGATE_KINDS or right_kind in _AGGREGATE_KINDS:
        if left_kind == "null" or right_kind == "null":
            return False
        raise no_overload("_==_", left, right)
    return False


def not_equals(left: Any, right: Any) -> bool:
    return not equals(left, right)


def _lists_equal(left: Sequence[Any], right: Sequence[Any]) -> bool:
    # An unequal pair decides "false" even past a pair that cannot be compared.
    if len(left) != len(right):
        return False
    error: CelEvaluationError | None = None
    for left_item, right_item in zip(left, right, strict=True):
        try:
            if not equals(left_item, right_item):
                return False
        except CelEvaluationError as failure:
            error = error or failure
    if error is not None:
        raise error
    return True


def _maps_equal(left: Mapping[Any, Any], right: Mapping[Any, Any]) -> bool:
    if len(left) != len(right):
        return False
    pairs = []
    for key in left:
        found = _find_key(right, key)
        if found is _ABSENT:
            return False
        pairs.append((left[key], right[found]))
    return _lists_equal([pair[0] for pair in pairs], [pair[1] for pair in pairs])


class _Absent:
    """Marks "no such key" where ``None`` is a legitimate value."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()
_ABSENT = ABSENT


def _find_key(mapping: Mapping[Any, Any], key: Any) -> Any:
    """The key of ``mapping`` that equals ``key`` with the same CEL kind, or ``ABSENT``.

    Python's dict would let ``1`` find ``True`` (and ``1.0``); CEL keys never cross kinds.
    Strings only ever equal strings in Python, so they take the hash lookup directly."""
    if type(key) is str:
        return key if key in mapping else _ABSENT
    key_kind = kind(key)
    for candidate in mapping:
        if candidate == key and _kind_or_python_type(candidate) == key_kind:
            return candidate
    return _ABSENT


def _ordering(operator: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def ordered(left: Any, right: Any) -> bool:
        left_type = type(left)
        if left_type is type(right) and left_type in ORDERED_TYPES:
            return compare(left, right)
        left_kind, right_kind = kind(left), kind(right)
        if left_kind == right_kind and left_kind in _ORDERED_KINDS:
            return compare(left, right)
        if left_kind == "double" and right_kind == "int":
            # cel-python orders a double against an int (exactly, as Python does) but not
            # an int against a double; both backends must answer alike.
            return compare(left, right)
        raise no_overload(operator, left, right)

    ordered.__name__ = operator
    return ordered


less = _ordering("_<_", lambda a, b: bool(a < b))
less_equal = _ordering("_<=_", lambda a, b: bool(a <= b))
greater = _ordering("_>_", lambda a, b: bool(a > b))
greater_equal = _ordering("_>=_", lambda a, b: bool(a >= b))


def is_in(item: Any, container: Any) -> bool:
    """CEL ``in``: list membership or map key membership, by CEL equality. A match decides
    "true" even past elements that cannot be compared; without a match, such an element
    makes the result an error (as in cel-python)."""
    container_type = type(container)
    if container_type is not list and container_type is not dict:
        if kind(container) not in _AGGREGATE_KINDS:
            raise no_overload("@in", item, container)
    if type(item) is str:
        # Python's "in" finds an equal string exactly; without one, only elements a string
        # cannot be compared with (numbers, lists, maps) make the answer an error.
        if item in container:
            return True
        if all(type(element) is str for element in container):
            return False
    error: CelEvaluationError | None = None
    for element in container:
        try:
            if equals(element, item):
                return True
        except CelEvaluationError as failure:
            error = error or failure
    if error is not None:
        raise error
    return False


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------


def _checked_int(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise CelEvaluationError("integer overflow")


def _checked_duration(value: timedelta) -> timedelta:
    if -DURATION_MAX_SECONDS <= value.total_seconds() <= DURATION_MAX_SECONDS:
        return value
    raise CelEvaluationError("duration out of range")


def _checked_timestamp(compute: Callable[[], datetime]) -> datetime:
    try:
        return compute()
    except OverflowError:
        raise CelEvaluationError("timestamp out of range") from None


def add(left: Any, right: Any) -> Any:
    left_type = type(left)
    if left_type is type(right):
        if left_type is int:
            return _checked_int(left + right)
        if left_type is float or left_type is str or left_type is bytes or left_type is list:
            return left + right
    pair = (kind(left), kind(right))
    if pair in (("double", "double"), ("string", "string"), ("bytes", "bytes")):
        return left + right
    if pair == ("int", "int"):
        return _checked_int(int(left) + int(right))
    if pair == ("list", "list"):
        return [*left, *right]
    if pair == ("duration", "duration"):
        return _checked_duration(left + right)
    if pair == ("timestamp", "duration"):
        return _checked_timestamp(lambda: left + right)
    if pair == ("duration", "timestamp"):
        return _checked_timestamp(lambda: right + left)
    raise no_overload("_+_", left, right)


def subtract(left: Any, right: Any) -> Any:
    left_type = type(left)
    if left_type is type(right):
        if left_type is int:
            return _checked_int(left - right)
        if left_type is float:
            return left - right
    pair = (kind(left), kind(right))
    if pair == ("int", "int"):
        return _checked_int(int(left) - int(right))
    if pair == ("double", "double"):
        return left - right
    if pair == ("duration", "duration"):
        return _checked_duration(left - right)
    if pair == ("timestamp", "duration"):
        return _checked_timestamp(lambda: left - right)
    if pair == ("timestamp", "timestamp"):
        return _checked_duration(left - right)
    raise no_overload("_-_", left, right)


def multiply(left: Any, right: Any) -> Any:
    left_type = type(left)
    if left_type is type(right):
        if left_type is int:
            return _checked_int(left * right)
        if left_type is float:
            return left * right
    pair = (kind(left), kind(right))
    if pair == ("int", "int"):
        return _checked_int(int(left) * int(right))
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
        return _checked_int(-quotient if (left < 0) != (right < 0) else quotient)
    if pair == ("double", "double"):
        if right == 0.0:
            if left == 0.0 or math.isnan(left):
                return math.nan
            return math.copysign(math.inf, left) * math.copysign(1.0, right)
        return left / right
    raise no_overload("_/_", left, right)


def modulo(left: Any, right: Any) -> Any:
    """Integer remainder with the sign of the dividend; there is no double modulo."""
    if kind(left) == "int" and kind(right) == "int":
        if right == 0:
            raise CelEvaluationError("modulus by zero")
        remainder = abs(left) % abs(right)
        return -remainder if left < 0 else remainder
    raise no_overload("_%_", left, right)


def negate(operand: Any) -> Any:
    operand_kind = kind(operand)
    if operand_kind == "int":
        return _checked_int(-operand)
    if operand_kind == "double":
        return -operand
    raise no_overload("-_", operand)


# ---------------------------------------------------------------------------------------------
# Field access and indexing
# ---------------------------------------------------------------------------------------------

_MAP_KEY_KINDS = frozenset({"string", "int", "bool"})


def index(container: Any, key: Any) -> Any:
    """``container[key]``: a list position (no negative indexing) or a map key."""
    container_type = type(container)
    if container_type is dict and type(key) is str:
        return container[key]
    container_kind = kind(container)
    if container_kind == "list":
        if kind(key) != "int":
            raise no_overload("_[_]", container, key)
        if 0 <= key < len(container):
            return container[key]
        raise CelEvaluationError(f"index out of range: {key}")
    if container_kind == "map":
        if kind(key) not in _MAP_KEY_KINDS:
            raise no_overload("_[_]", container, key)
        found = _find_key(container, key)
        if found is _ABSENT:
            raise CelEvaluationError(f"no such key: {key!r}")
        return container[found]
    raise no_overload("_[_]", container, key)


def has_field(value: Any, path: tuple[str, ...], field: str) -> bool:
    """``has(value.p1.p2.field)``: true when every step is a map holding the next key.

    Like cel-python, a step that is missing or not a map makes the answer false rather than
    an error, so ``has(a.b.c)`` also guards ``a.b``."""
    for step in path:
        if not (type(value) is dict or isinstance(value, Mapping)) or step not in value:
            return False
        value = value[step]
    return (type(value) is dict or isinstance(value, Mapping)) and field in value


def make_map(entries: Iterable[tuple[Any, Any]]) -> dict[Any, Any]:
    """A CEL map literal: keys are strings, ints or bools, and never repeat."""
    result: dict[Any, Any] = {}
    for key, value in entries:
        if kind(key) not in _MAP_KEY_KINDS:
            raise CelEvaluationError(f"unsupported map key type: {_kind_or_python_type(key)}")
        if key in result:  # also catches 1 vs true, which a Python dict would merge
            raise CelEvaluationError(f"duplicate map key: {key!r}")
        result[key] = value
    return result


def iteration_range(value: Any) -> Iterable[Any]:
    """What a macro iterates: a list's elements or a map's keys."""
    value_type = type(value)
    if value_type is list or value_type is dict:
        return value  # type: ignore[no-any-return]
    if kind(value) in _AGGREGATE_KINDS:
        return value  # type: ignore[no-any-return]
    raise no_overload("comprehension", value)


# ---------------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------------


def size(value: Any) -> int:
    """Length of a string (in code points), bytes, list or map. ``size(null)`` is 0, as in
    cel-python."""
    value_type = type(value)
    if value_type is str or value_type is list or value_type is dict or value_type is bytes:
        return len(value)
    if value is None:
        return 0
    if kind(value) in ("string", "bytes", "list", "map"):
        return len(value)
    raise no_overload("size", value)


def _strings(function: str, receiver: Any, argument: Any) -> tuple[str, str]:
    if isinstance(receiver, str) and isinstance(argument, str):
        return receiver, argument
    raise no_overload(function, receiver, argument)


def lower_ascii(receiver: Any) -> str:
    """``s.lowerAscii()``: only ASCII letters change, as in cel-go's strings extension."""
    if not isinstance(receiver, str):
        raise no_overload("lowerAscii", receiver)
    return "".join(c.lower() if c.isascii() else c for c in receiver)


def upper_ascii(receiver: Any) -> str:
    if not isinstance(receiver, str):
        raise no_overload("upperAscii", receiver)
    return "".join(c.upper() if c.isascii() else c for c in receiver)


def contains(receiver: Any, argument: Any) -> bool:
    text, fragment = _strings("contains", receiver, argument)
    return fragment in text


def starts_with(receiver: Any, argument: Any) -> bool:
    text, prefix = _strings("startsWith", receiver, argument)
    return text.startswith(prefix)


def ends_with(receiver: Any, argument: Any) -> bool:
    text, suffix = _strings("endsWith", receiver, argument)
    return text.endswith(suffix)


def matches_compiled(receiver: Any, pattern: CompiledPattern) -> bool:
    """``text.matches(re)`` with ``re`` compiled once at compile time."""
    if not isinstance(receiver, str):
        raise no_overload("matches", receiver, pattern.source)
    return pattern.search(receiver)


@lru_cache(maxsize=256)
def _compiled_at_run_time(pattern: str) -> CompiledPattern:
    return compile_pattern(pattern)


def matches(receiver: Any, pattern: Any) -> bool:
    """``text.matches(re)`` with a pattern only known at run time."""
    text, source = _strings("matches", receiver, pattern)
    return _compiled_at_run_time(source).search(text)


# Conversions --------------------------------------------------------------------------------

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)",
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
        return _checked_int(int(value))
    if value_kind == "timestamp":
        return _checked_int(int(value.timestamp()))
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


def identity(value: Any) -> Any:
    """``dyn(x)``: only a hint for the type checker."""
    return value


# Timestamps and durations -------------------------------------------------------------------

# Texts other than RFC 3339 go through cel-python's own parser (pendulum: lenient, slow, and
# reading "now" as the current time, so such texts are never folded at compile time).
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})",
)


def is_rfc3339(text: str) -> bool:
    return _RFC3339.fullmatch(text) is not None


def to_timestamp(value: Any) -> datetime:
    if type(value) is str and len(value) >= 20 and value[10] == "T" and value[16] == ":":
        # The common case, an RFC 3339 text: Python's ISO reader is twenty times faster
        # than cel-python's and reads any such text with an offset to the same instant.
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    value_kind = kind(value)
    if value_kind == "timestamp":
        return value  # type: ignore[no-any-return]
    if value_kind != "string":
        raise no_overload("timestamp", value)
    try:
        parsed = celtypes.TimestampType(str(value))
    except Exception as error:  # pendulum raises its own exception classes
        raise CelEvaluationError(f"invalid timestamp {value!r}: {error}") from None
    return datetime(
        parsed.year, parsed.month, parsed.day, parsed.hour, parsed.minute, parsed.second,
        parsed.microsecond, tzinfo=parsed.tzinfo,
    )


def to_duration(value: Any) -> timedelta:
    value_kind = kind(value)
    if value_kind == "duration":
        return _checked_duration(value)
    if value_kind != "string":
        raise no_overload("duration", value)
    try:
        parsed = celtypes.DurationType(str(value))
    except ValueError as error:
        raise CelEvaluationError(f"invalid duration {value!r}: {error}") from None
    return timedelta(days=parsed.days, seconds=parsed.seconds, microseconds=parsed.microseconds)


_UTC = UTC


@lru_cache(maxsize=128)
def _timezone(name: str) -> tzinfo:
    try:
        found = celtypes.TimestampType.tz_parse(name)
    except Exception as error:  # pendulum's lookup raises its own exception classes
        raise CelEvaluationError(f"unknown time zone {name!r}") from error
    if not isinstance(found, tzinfo):
        raise CelEvaluationError(f"unknown time zone {name!r}")
    return found


def _local_time(function: str, value: Any, zone: Any) -> datetime:
    if kind(value) != "timestamp":
        raise no_overload(function, value)
    if zone is None:
        return value.astimezone(_UTC)  # type: ignore[no-any-return]
    if not isinstance(zone, str):
        raise no_overload(function, value, zone)
    return value.astimezone(_timezone(zone))  # type: ignore[no-any-return]


def _timestamp_accessor(name: str, read: Callable[[datetime], int]) -> Callable[..., int]:
    def accessor(value: Any, zone: Any = None) -> int:
        return read(_local_time(name, value, zone))

    accessor.__name__ = name
    return accessor


def _duration_or_timestamp_accessor(
    name: str, of_timestamp: Callable[[datetime], int], of_duration: Callable[[timedelta], int]
) -> Callable[..., int]:
    def accessor(value: Any, zone: Any = None) -> int:
        if kind(value) == "duration" and zone is None:
            return of_duration(value)
        return of_timestamp(_local_time(name, value, zone))

    accessor.__name__ = name
    return accessor


# Months and days of month/year count from 0 except getDate; Sunday is day 0 of the week.
get_full_year = _timestamp_accessor("getFullYear", lambda t: t.year)
get_month = _timestamp_accessor("getMonth", lambda t: t.month - 1)
get_day_of_year = _timestamp_accessor("getDayOfYear", lambda t: t.timetuple().tm_yday - 1)
get_day_of_month = _timestamp_accessor("getDayOfMonth", lambda t: t.day - 1)
get_date = _timestamp_accessor("getDate", lambda t: t.day)
get_day_of_week = _timestamp_accessor("getDayOfWeek", lambda t: t.isoweekday() % 7)
# Duration accessors give the whole duration in that unit, truncated (as cel-python does).
get_hours = _duration_or_timestamp_accessor(
    "getHours", lambda t: t.hour, lambda d: int(d.total_seconds() / 60 / 60)
)
get_minutes = _duration_or_timestamp_accessor(
    "getMinutes", lambda t: t.minute, lambda d: int(d.total_seconds() / 60)
)
get_seconds = _duration_or_timestamp_accessor(
    "getSeconds", lambda t: t.second, lambda d: int(d.total_seconds())
)
get_milliseconds = _duration_or_timestamp_accessor(
    "getMilliseconds", lambda t: t.microsecond // 1000, lambda d: int(d.total_seconds() * 1000)
)


# ---------------------------------------------------------------------------------------------
# The registry compiled code and constant folding call through
# ---------------------------------------------------------------------------------------------

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "add": add,
    "subtract": subtract,
    "multiply": multiply,
    "divide": divide,
    "modulo": modulo,
    "negate": negate,
    "index": index,
    "size": size,
    "contains": contains,
    "starts_with": starts_with,
    "ends_with": ends_with,
    "lower_ascii": lower_ascii,
    "upper_ascii": upper_ascii,
    "matches": matches,
    "matches_compiled": matches_compiled,
    "to_int": to_int,
    "to_double": to_double,
    "to_string": to_string,
    "to_bool": to_bool,
    "to_bytes": to_bytes,
    "to_timestamp": to_timestamp,
    "to_duration": to_duration,
    "get_full_year": get_full_year,
    "get_month": get_month,
    "get_day_of_year": get_day_of_year,
    "get_day_of_month": get_day_of_month,
    "get_date": get_date,
    "get_day_of_week": get_day_of_week,
    "get_hours": get_hours,
    "get_minutes": get_minutes,
    "get_seconds": get_seconds,
    "get_milliseconds": get_milliseconds,
}

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": equals,
    "!=": not_equals,
    "<": less,
    "<=": less_equal,
    ">": greater,
    ">=": greater_equal,
}
