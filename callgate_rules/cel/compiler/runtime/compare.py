"""CEL ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` and ``in``, as the current CEL spec has them.

Generated code compares two operands of one exact scalar type inline (``SCALAR_TYPES`` for
equality, ``ORDERED_TYPES`` for ordering) and calls these for every other pair. Numbers of
different types (``int``, ``uint``, ``double``) compare by their mathematical value, as the
spec's heterogeneous equality and ordering require: Python's own ``int``/``float``
comparison is exact (``9223372036854775807 != 9.223372036854776e18``), and NaN equals
nothing and is ordered against nothing, so it is used as is, with ``bool`` kept apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from callgate_rules.cel.compiler.runtime.kinds import (
    ABSENT,
    AGGREGATE_KINDS,
    kind,
    kind_or_python_type,
    no_overload,
)
from callgate_rules.cel.errors import CelEvaluationError

# Types whose Python ``==`` / ``<`` is CEL's when both operands have exactly that type.
SCALAR_TYPES = frozenset({str, int, float, bool, bytes, type(None), datetime, timedelta})
ORDERED_TYPES = frozenset({str, int, float, bool, bytes, datetime, timedelta})

_NUMERIC_KINDS = frozenset({"int", "uint", "double"})
_ORDERED_KINDS = frozenset({"int", "double", "string", "bytes", "bool", "timestamp", "duration"})


def equals(left: Any, right: Any) -> bool:
    """CEL ``==`` for operands of different types: numbers of any numeric type compare by
    value (``1 == 1.0``), lists and maps compare element-wise and equal ``null`` never,
    and the remaining kinds (bool, string, bytes, null, timestamp, duration) are simply
    unequal to one another and to numbers, as the spec's heterogeneous equality has it."""
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
    if left_kind in _NUMERIC_KINDS and right_kind in _NUMERIC_KINDS:
        return bool(left == right)
    if left_kind in AGGREGATE_KINDS or right_kind in AGGREGATE_KINDS:
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
        found = find_key(right, key)
        if found is ABSENT:
            return False
        pairs.append((left[key], right[found]))
    return _lists_equal([pair[0] for pair in pairs], [pair[1] for pair in pairs])


def find_key(mapping: Mapping[Any, Any], key: Any) -> Any:
    """The key of ``mapping`` that equals ``key`` with the same CEL kind, or ``ABSENT``.

    Python's dict would let ``1`` find ``True``; CEL keys never cross kinds, except that
    numeric keys find each other by value (``1u``, ``1`` and ``1.0`` name one key), as the
    spec's heterogeneous equality has it. Strings only ever equal strings in Python, so they
    take the hash lookup directly."""
    if type(key) is str:
        return key if key in mapping else ABSENT
    key_kind = _numeric_or_kind(kind(key))
    for candidate in mapping:
        if candidate == key and _numeric_or_kind(kind_or_python_type(candidate)) == key_kind:
            return candidate
    return ABSENT


def _numeric_or_kind(value_kind: str) -> str:
    return "number" if value_kind in _NUMERIC_KINDS else value_kind


def _ordering(operator: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def ordered(left: Any, right: Any) -> bool:
        left_type = type(left)
        if left_type is type(right) and left_type in ORDERED_TYPES:
            return compare(left, right)
        left_kind, right_kind = kind(left), kind(right)
        if left_kind == right_kind and left_kind in _ORDERED_KINDS:
            return compare(left, right)
        if left_kind in _NUMERIC_KINDS and right_kind in _NUMERIC_KINDS:
            # Heterogeneous numeric ordering: exact, as Python compares int with float,
            # consistent with equality, so that an integral JSON number decides as the same
            # number written with a fraction. (cel-go orders an int against a double as a
            # double: its conformance tests *_big_lossy_double expect
            # 9223372036854775807 < 9223372036854775808.0 to be false; here it is true.)
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
        if kind(container) not in AGGREGATE_KINDS:
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
