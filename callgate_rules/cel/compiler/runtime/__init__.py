"""CEL operators and functions over plain Python values, as called by compiled expressions.

Every function here takes and returns the values of callgate's CEL border (``bool``, ``int``,
``float``, ``str``, ``bytes``, ``None``, lists, mappings, aware ``datetime``, ``timedelta``,
and ``cel.values``' ``UInt``, ``CelType`` and ``Optional``)
and raises :class:`CelEvaluationError` when CEL has no answer. Each starts with a fast path
for the common same-type case; the slower, general path classifies operands by CEL kind.

The generated code inlines the cheapest cases itself (see ``codegen``) and calls these for
everything else; constant folding calls them at compile time. ``codegen`` binds each one in
the generated code's globals under its name with a ``_`` prefix (``FUNCTIONS["add"]`` is
``_add``), so a call from compiled code goes straight to the function defined in its module.

- ``kinds``: the CEL kind of a value, int64 and duration ranges, the errors compiled code
  raises (and ``translate``, which turns a Python exception into a ``CelEvaluationError``);
- ``compare``: ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``;
- ``arithmetic``: ``+``, ``-``, ``*``, ``/``, ``%``, unary ``-``;
- ``containers``: indexing, ``has()``, map literals, macro ranges, ``size()``;
- ``strings``: ``contains``, ``startsWith``, ``endsWith``, ``matches``;
- ``conversions``: ``int()``, ``uint()``, ``double()``, ``string()``, ``bool()``,
  ``bytes()``, ``type()``;
- ``optionals``: ``a.?b``, ``a[?k]``, ``[?x]``, ``{?k: v}`` and ``optMap``/``optFlatMap``;
- ``timestamps``: ``timestamp()``, ``duration()`` and the ``get*`` accessors;
- ``cost``: the run-time cost budget every loop, and every call that scans a value in an
  expression with a loop, is charged against.

This module holds the registry the compiler calls through, ``FUNCTIONS`` by the name
``lowering`` gives a call and ``COMPARISONS`` by operator, and names what ``codegen`` and
``lowering`` use besides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from callgate_rules.cel.compiler.runtime.arithmetic import (
    add,
    divide,
    modulo,
    multiply,
    negate,
    subtract,
)
from callgate_rules.cel.compiler.runtime.compare import (
    ORDERED_TYPES,
    SCALAR_TYPES,
    equals,
    greater,
    greater_equal,
    is_in,
    less,
    less_equal,
    not_equals,
)
from callgate_rules.cel.compiler.runtime.containers import (
    has_field,
    index,
    iteration_pairs,
    iteration_range,
    make_map,
    size,
    sort_by,
)
from callgate_rules.cel.compiler.runtime.conversions import (
    to_bool,
    to_bytes,
    to_double,
    to_int,
    to_string,
    to_uint,
    type_of,
)
from callgate_rules.cel.compiler.runtime.cost import (
    CostExceeded,
    metered_equals,
    metered_in,
    metered_not_equals,
    metered_pairs,
    metered_range,
    scanned,
    scanned_sort,
    start_metering,
)
from callgate_rules.cel.compiler.runtime.kinds import (
    ABSENT,
    FAILURES,
    INT64_MAX,
    INT64_MIN,
    fail,
    kind,
    logic_failure,
    no_overload,
    not_bool,
    translate,
)
from callgate_rules.cel.compiler.runtime.optionals import (
    flat_map_result,
    has_through_optional,
    index_optional,
    index_through_optional,
    make_list_with_optionals,
    make_map_with_optionals,
    optional_operand,
    optional_present,
    select_optional,
    select_through_optional,
)
from callgate_rules.cel.compiler.runtime.strings import (
    contains,
    ends_with,
    matches,
    matches_compiled,
    starts_with,
)
from callgate_rules.cel.compiler.runtime.timestamps import (
    get_date,
    get_day_of_month,
    get_day_of_week,
    get_day_of_year,
    get_full_year,
    get_hours,
    get_milliseconds,
    get_minutes,
    get_month,
    get_seconds,
    is_rfc3339,
    to_duration,
    to_timestamp,
)
from callgate_rules.cel.values import Optional

__all__ = [
    "ABSENT", "COMPARISONS", "CostExceeded", "FAILURES", "FUNCTIONS", "INT64_MAX", "INT64_MIN",
    "ORDERED_TYPES", "SCALAR_TYPES", "equals", "fail", "greater", "greater_equal",
    "flat_map_result", "has_field", "is_in", "is_rfc3339", "iteration_pairs",
    "iteration_range", "make_list_with_optionals", "make_map_with_optionals",
    "optional_operand", "kind", "less", "less_equal",
    "logic_failure", "make_map", "no_overload", "not_bool", "not_equals", "translate",
]

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
    "matches": matches,
    "matches_compiled": matches_compiled,
    "to_int": to_int,
    "to_uint": to_uint,
    "type_of": type_of,
    "sort_by": sort_by,
    "select_optional": select_optional,
    "select_through_optional": select_through_optional,
    "index_optional": index_optional,
    "has_through_optional": has_through_optional,
    "optional_present": optional_present,
    "index_through_optional": index_through_optional,
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

# The globals every generated program runs with (``codegen`` names them ``_...``); here, not
# in ``codegen``, so that running a program compiled before needs no code generator.
NAMESPACE: dict[str, Any] = {
    **{f"_{name}": function for name, function in FUNCTIONS.items()},
    "_FAILURES": FAILURES,
    "_ABSENT": ABSENT,
    "_SCALAR": SCALAR_TYPES,
    "_ORDERED": ORDERED_TYPES,
    "_equals": equals,
    "_not_equals": not_equals,
    "_less": less,
    "_less_equal": less_equal,
    "_greater": greater,
    "_greater_equal": greater_equal,
    "_is_in": is_in,
    "_has_field": has_field,
    "_make_map": make_map,
    "_iteration_range": iteration_range,
    "_iteration_pairs": iteration_pairs,
    "_metered_range": metered_range,
    "_metered_pairs": metered_pairs,
    "_start_metering": start_metering,
    "_scanned": scanned,
    "_scanned_sort": scanned_sort,
    "_metered_equals": metered_equals,
    "_metered_not_equals": metered_not_equals,
    "_metered_in": metered_in,
    "_CostExceeded": CostExceeded,
    "_make_list_with_optionals": make_list_with_optionals,
    "_make_map_with_optionals": make_map_with_optionals,
    "_optional_operand": optional_operand,
    "_flat_map_result": flat_map_result,
    "_Optional": Optional,
    "_not_bool": not_bool,
    "_no_overload": no_overload,
    "_logic_failure": logic_failure,
    "_translate": translate,
    "_fail": fail,
}
