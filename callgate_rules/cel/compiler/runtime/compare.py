"""CEL ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` and ``in``, as cel-python answers them.

Generated code compares two operands of one exact scalar type inline (``SCALAR_TYPES`` for
equality, ``ORDERED_TYPES`` for ordering) and calls these for every other pair.
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

_NUMERIC_KINDS = frozenset({"int", "double"})
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

    Python's dict would let ``1`` find ``True`` (and ``1.0``); CEL keys never cross kinds.
    Strings only ever equal strings in Python, so they take the hash lookup directly."""
    if type(key) is str:
        return key if key in mapping else ABSENT
    key_kind = kind(key)
    for candidate in mapping:
        if candidate == key and kind_or_python_type(candidate) == key_kind:
            return candidate
    return ABSENT


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
