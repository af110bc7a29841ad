"""The CEL specification's standard functions and operators, with cel-go's overload ids.

The signatures are for the type checker; the implementations are the compiler's runtime
functions (``cel.compiler.runtime``), the same ones compiled code calls, so a call through
the library and an inlined one cannot disagree.

Operators carry cel-go's names (``_+_``, ``_==_``, ``@in``, ``_?_:_``); the compiler inlines
``&&``, ``||``, ``!`` and ``?:`` with CEL's error-absorbing evaluation order, so their
implementations here are the strict forms, for evaluated operands (constant folding).
Equality and ordering accept ``int``, ``uint`` and ``double`` against one another (the
current spec's heterogeneous numeric comparison), hence the mixed overloads below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from callgate_rules.cel.compiler import runtime
from callgate_rules.cel.compiler.runtime import (
    arithmetic,
    containers,
    conversions,
    strings,
    timestamps,
)
from callgate_rules.cel.compiler.runtime.kinds import no_overload
from callgate_rules.cel.library.signatures import Function, Overload, global_, member

LIBRARY = "core"

# cel-go's names for the types in overload ids.
_ID = {"int": "int64", "uint": "uint64", "double": "double", "string": "string",
       "bytes": "bytes", "bool": "bool", "timestamp": "timestamp", "duration": "duration",
       "list(A)": "list", "map(K, V)": "map", "null_type": "null", "type(A)": "type",
       "net.IP": "ip", "net.CIDR": "cidr", "kubernetes.URL": "url",
       "dyn": "dyn"}
_NUMBERS = ("int", "uint", "double")
_ORDERED = ("int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration")


# Conversions ---------------------------------------------------------------------------------


def dyn(value: Any) -> Any:
    """``dyn(x)`` is ``x``: it only tells the type checker to stop checking."""
    return value


# Strict forms of the logical operators (the compiler inlines the lazy ones) -------------


def _bool(operator: str, *operands: Any) -> tuple[bool, ...]:
    for operand in operands:
        if type(operand) is not bool:
            raise no_overload(operator, *operands)
    return operands


def logical_not(operand: Any) -> bool:
    (value,) = _bool("!_", operand)
    return not value


def logical_and(left: Any, right: Any) -> bool:
    if left is False or right is False:
        return False
    first, second = _bool("_&&_", left, right)
    return first and second


def logical_or(left: Any, right: Any) -> bool:
    if left is True or right is True:
        return True
    first, second = _bool("_||_", left, right)
    return first or second


def conditional(condition: Any, when_true: Any, when_false: Any) -> Any:
    (chosen,) = _bool("_?_:_", condition)
    return when_true if chosen else when_false


# Signatures ---------------------------------------------------------------------------------


def _binary(name: str, prefix: str, types: tuple[str, ...], result: str | None = None
            ) -> tuple[Overload, ...]:
    return tuple(global_(f"{prefix}_{_ID[t]}", t, t, result or t) for t in types)


def _comparisons(prefix: str) -> tuple[Overload, ...]:
    same = tuple(global_(f"{prefix}_{_ID[t]}", t, t, "bool") for t in _ORDERED)
    mixed = tuple(global_(f"{prefix}_{_ID[a]}_{_ID[b]}", a, b, "bool")
                  for a in _NUMBERS for b in _NUMBERS if a != b)
    return same + mixed


def _conversion(name: str, target: str, sources: tuple[str, ...],
                implementation: Callable[..., Any], doc: str) -> Function:
    overloads = tuple(global_(f"{_ID[source]}_to_{_ID[target]}", source, target)
                      for source in sources)
    return Function(name, LIBRARY, overloads, implementation, doc)


def _getter(name: str, cel_go: str, implementation: Callable[..., Any], doc: str,
            of_duration: bool = False) -> Function:
    overloads: tuple[Overload, ...] = (
        member(f"timestamp_to_{cel_go}", "timestamp", "int"),
        member(f"timestamp_to_{cel_go}_with_tz", "timestamp", "string", "int"),
    )
    if of_duration:
        overloads += (member(f"duration_to_{cel_go}", "duration", "int"),)
    return Function(name, LIBRARY, overloads, implementation, doc)


_EQUALITY = (global_("equals", "A", "A", "bool"),) + tuple(
    global_(f"equals_{_ID[a]}_{_ID[b]}", a, b, "bool")
    for a in _NUMBERS for b in _NUMBERS if a != b)
_INEQUALITY = (global_("not_equals", "A", "A", "bool"),) + tuple(
    global_(f"not_equals_{_ID[a]}_{_ID[b]}", a, b, "bool")
    for a in _NUMBERS for b in _NUMBERS if a != b)

_SIZED = ("string", "bytes", "list(A)", "map(K, V)")

FUNCTIONS: tuple[Function, ...] = (
    # Operators
    Function("_+_", LIBRARY, _binary("_+_", "add", ("int", "uint", "double", "string",
                                                     "bytes", "list(A)", "duration")) + (
        global_("add_timestamp_duration", "timestamp", "duration", "timestamp"),
        global_("add_duration_timestamp", "duration", "timestamp", "timestamp"),
    ), arithmetic.add, "addition, concatenation, timestamp + duration"),
    Function("_-_", LIBRARY, _binary("_-_", "subtract", ("int", "uint", "double", "duration"))
             + (global_("subtract_timestamp_timestamp", "timestamp", "timestamp", "duration"),
                global_("subtract_timestamp_duration", "timestamp", "duration", "timestamp")),
             arithmetic.subtract, "subtraction, timestamp differences"),
    Function("_*_", LIBRARY, _binary("_*_", "multiply", _NUMBERS), arithmetic.multiply,
             "multiplication"),
    Function("_/_", LIBRARY, _binary("_/_", "divide", _NUMBERS), arithmetic.divide,
             "division (integers truncate toward zero)"),
    Function("_%_", LIBRARY, _binary("_%_", "modulo", ("int", "uint")), arithmetic.modulo,
             "integer remainder"),
    Function("-_", LIBRARY, (global_("negate_int64", "int", "int"),
                             global_("negate_double", "double", "double")),
             arithmetic.negate, "negation"),
    Function("!_", LIBRARY, (global_("logical_not", "bool", "bool"),), logical_not, "not"),
    Function("_&&_", LIBRARY, (global_("logical_and", "bool", "bool", "bool"),), logical_and,
             "and (an error on one side is absorbed by false on the other)"),
    Function("_||_", LIBRARY, (global_("logical_or", "bool", "bool", "bool"),), logical_or,
             "or (an error on one side is absorbed by true on the other)"),
    Function("_?_:_", LIBRARY, (global_("conditional", "bool", "A", "A", "A"),), conditional,
             "the conditional operator"),
    Function("_==_", LIBRARY, _EQUALITY, runtime.equals,
             "equality (numbers of any numeric type by value)"),
    Function("_!=_", LIBRARY, _INEQUALITY, runtime.not_equals, "inequality"),
    Function("_<_", LIBRARY, _comparisons("less"), runtime.less, "less than"),
    Function("_<=_", LIBRARY, _comparisons("less_equals"), runtime.less_equal,
             "less than or equal"),
    Function("_>_", LIBRARY, _comparisons("greater"), runtime.greater, "greater than"),
    Function("_>=_", LIBRARY, _comparisons("greater_equals"), runtime.greater_equal,
             "greater than or equal"),
    Function("_[_]", LIBRARY, (global_("index_list", "list(A)", "int", "A"),
                               global_("index_map", "map(K, V)", "K", "V")),
             containers.index, "list element or map value"),
    Function("@in", LIBRARY, (global_("in_list", "A", "list(A)", "bool"),
                              global_("in_map", "K", "map(K, V)", "bool")),
             runtime.is_in, "list membership, map key membership"),
    # Functions
    Function("size", LIBRARY, tuple(
        global_(f"size_{_ID[t]}", t, "int") for t in _SIZED) + tuple(
        member(f"{_ID[t]}_size", t, "int") for t in _SIZED),
        containers.size, "length of a string (code points), bytes, list or map"),
    Function("contains", LIBRARY, (member("contains_string", "string", "string", "bool"),),
             strings.contains, "whether a string contains another"),
    Function("startsWith", LIBRARY,
             (member("starts_with_string", "string", "string", "bool"),),
             strings.starts_with, "whether a string starts with another"),
    Function("endsWith", LIBRARY, (member("ends_with_string", "string", "string", "bool"),),
             strings.ends_with, "whether a string ends with another"),
    Function("matches", LIBRARY, (global_("matches", "string", "string", "bool"),
                                  member("matches_string", "string", "string", "bool")),
             strings.matches, "whether an RE2 pattern matches part of a string"),
    _conversion("int", "int", ("int", "uint", "double", "string", "timestamp"), conversions.to_int,
                "conversion to int (doubles truncate; range-checked)"),
    _conversion("uint", "uint", ("uint", "int", "double", "string"), conversions.to_uint,
                "conversion to uint (doubles truncate; range-checked)"),
    _conversion("double", "double", ("double", "int", "uint", "string"), conversions.to_double,
                "conversion to double"),
    _conversion("string", "string", ("string", "int", "uint", "double", "bool", "bytes",
                                     "timestamp", "duration", "net.IP", "net.CIDR",
                                     "kubernetes.URL"), conversions.to_string,
                "conversion to string (an IP, CIDR or URL gives its text)"),
    _conversion("bytes", "bytes", ("bytes", "string"), conversions.to_bytes,
                "conversion to bytes (UTF-8)"),
    _conversion("bool", "bool", ("bool", "string"), conversions.to_bool,
                "conversion to bool ('true', 'false', 't', 'f', '1', '0'...)"),
    _conversion("duration", "duration", ("duration", "string"), timestamps.to_duration,
                "a duration from text such as '1h30m'"),
    _conversion("timestamp", "timestamp", ("timestamp", "string", "int"),
                timestamps.to_timestamp,
                "a timestamp from RFC 3339 text, or from seconds since the Unix epoch"),
    Function("dyn", LIBRARY, (global_("to_dyn", "A", "dyn"),), dyn,
             "the value itself, typed dyn for the checker"),
    Function("type", LIBRARY, (global_("type", "A", "type(A)"),), conversions.type_of,
             "the type of a value, as a value"),
    _getter("getFullYear", "year", timestamps.get_full_year, "the year"),
    _getter("getMonth", "month", timestamps.get_month, "the month, 0 for January"),
    _getter("getDayOfYear", "day_of_year", timestamps.get_day_of_year,
            "the day of the year, from 0"),
    _getter("getDayOfMonth", "day_of_month", timestamps.get_day_of_month,
            "the day of the month, from 0"),
    _getter("getDate", "day_of_month_1_based", timestamps.get_date,
            "the day of the month, from 1"),
    _getter("getDayOfWeek", "day_of_week", timestamps.get_day_of_week,
            "the day of the week, 0 for Sunday"),
    _getter("getHours", "hours", timestamps.get_hours, "hours (of a duration: in all)",
            of_duration=True),
    _getter("getMinutes", "minutes", timestamps.get_minutes,
            "minutes (of a duration: in all)", of_duration=True),
    _getter("getSeconds", "seconds", timestamps.get_seconds,
            "seconds (of a duration: in all)", of_duration=True),
    _getter("getMilliseconds", "milliseconds", timestamps.get_milliseconds,
            "milliseconds (of a duration: in all)", of_duration=True),
)
