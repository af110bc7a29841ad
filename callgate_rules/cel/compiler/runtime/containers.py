"""Lists and maps: indexing, ``has()``, map literals, what a macro iterates, and ``size()``."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from callgate_rules.cel.compiler.runtime.compare import find_key, less
from callgate_rules.cel.compiler.runtime.kinds import (
    ABSENT,
    AGGREGATE_KINDS,
    kind,
    kind_or_python_type,
    no_overload,
)
from callgate_rules.cel.errors import CelEvaluationError

_MAP_KEY_KINDS = frozenset({"string", "int", "uint", "bool"})


def index(container: Any, key: Any) -> Any:
    """``container[key]``: a list position (no negative indexing) or a map key."""
    container_type = type(container)
    if container_type is dict and type(key) is str:
        return container[key]
    container_kind = kind(container)
    if container_kind == "list":
        position = index_position(container, key)
        if position is None:
            raise CelEvaluationError(f"index out of range: {key}")
        return container[position]
    if container_kind == "map":
        if kind(key) not in _MAP_KEY_KINDS and kind(key) != "double":
            raise no_overload("_[_]", container, key)
        found = find_key(container, key)
        if found is ABSENT:
            raise CelEvaluationError(f"no such key: {key!r}")
        return container[found]
    raise no_overload("_[_]", container, key)


def index_position(container: Any, key: Any) -> int | None:
    """The list position ``key`` names (an int, a uint, or a double with no fraction), or
    ``None`` when it is out of range."""
    key_kind = kind(key)
    if key_kind == "double" and float(key).is_integer():
        key = int(key)  # heterogeneous numbers: 1.0 indexes like 1
    elif key_kind != "int" and key_kind != "uint":
        raise no_overload("_[_]", container, key)
    return int(key) if 0 <= key < len(container) else None


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
            raise CelEvaluationError(f"unsupported map key type: {kind_or_python_type(key)}")
        if key in result:  # also catches 1 vs true, which a Python dict would merge
            raise CelEvaluationError(f"duplicate map key: {key!r}")
        result[key] = value
    return result


def iteration_range(value: Any) -> Iterable[Any]:
    """What a macro iterates: a list's elements or a map's keys."""
    value_type = type(value)
    if value_type is list or value_type is dict:
        return value  # type: ignore[no-any-return]
    if kind(value) in AGGREGATE_KINDS:
        return value  # type: ignore[no-any-return]
    raise no_overload("comprehension", value)


def sort_by(values: Any, keys: list[Any]) -> list[Any]:
    """``list.sortBy(x, key)``: the list ordered by each element's key (CEL ordering; the
    keys must be of one orderable kind), stable for equal keys."""
    if kind(values) != "list":
        raise no_overload("sortBy", values)
    if keys and len({kind(key) for key in keys}) > 1:
        raise CelEvaluationError("sortBy: the keys are of different types")
    def order_of(a: int, b: int) -> int:
        return -1 if less(keys[a], keys[b]) else 1 if less(keys[b], keys[a]) else 0

    order = sorted(range(len(keys)), key=functools.cmp_to_key(order_of))
    return [values[position] for position in order]


def iteration_pairs(value: Any) -> Iterable[tuple[Any, Any]]:
    """What a two-variable macro iterates: (index, element) of a list, (key, value) of a map."""
    value_type = type(value)
    if value_type is list or value_type is tuple:
        return enumerate(value)
    if value_type is dict or isinstance(value, Mapping):
        return value.items()  # type: ignore[no-any-return]
    raise no_overload("comprehension", value)


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
