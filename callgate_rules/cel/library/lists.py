"""cel-go's lists extension (``ext.Lists``): ``slice``, ``flatten``, ``sort``, ``distinct``,
``reverse``, ``lists.range``, ``first``, ``last``; ``sortBy`` is a macro (the compiler's).

Semantics and messages are cel-go's (ext/lists.go). Elements compare by CEL's equality and
ordering (``cel.compiler.runtime.compare``), so ``[1, 1.0, 1u].distinct()`` is ``[1]`` and a
list of ints and doubles sorts by value. ``first``/``last`` return optionals
(``cel.values.Optional``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from callgate_rules.cel.bounds import MOST_RANGE
from callgate_rules.cel.compiler.runtime.compare import less
from callgate_rules.cel.compiler.runtime.kinds import kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library import strings
from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.equality import key
from callgate_rules.cel.library.signatures import Function, global_, member
from callgate_rules.cel.values import NONE, Optional

LIBRARY = "lists"


def _list(function: str, value: Any, *others: Any) -> Sequence[Any]:
    if kind(value) != "list":
        raise no_overload(function, value, *others)
    return value  # type: ignore[no-any-return]


def slice_list(items: Any, start: Any, end: Any) -> list[Any]:
    """``[1, 2, 3, 4].slice(1, 3)`` is ``[2, 3]``."""
    values, first, last = typed("slice", (items, start, end), ("list", "int", "int"))
    if first < 0 or last < 0:
        raise CelEvaluationError(f"cannot slice({first}, {last}), negative indexes not supported")
    if first > last:
        raise CelEvaluationError(
            f"cannot slice({first}, {last}), start index must be less than or equal to end index")
    if last > len(values):
        raise CelEvaluationError(f"cannot slice({first}, {last}), list is length {len(values)}")
    return list(values[first:last])


def flatten(items: Any, depth: Any = None) -> list[Any]:
    """Nested lists spliced in, one level deep (or ``depth`` levels)."""
    if depth is None:
        values, levels = _list("flatten", items), 1
    else:
        values, levels = typed("flatten", (items, depth), ("list", "int"))
        if levels < 0:
            raise CelEvaluationError("level must be non-negative")
    result = list(values)
    for _ in range(levels):
        if not any(kind(item) == "list" for item in result):
            break
        result = [part for item in result
                  for part in (item if kind(item) == "list" else (item,))]
    return result


def _order(function: str, left: Any, right: Any) -> int:
    try:
        return -1 if less(left, right) else (1 if less(right, left) else 0)
    except CelEvaluationError:
        raise CelEvaluationError(
            f"{function}: list elements must be comparable: "
            f"{kind(left)} and {kind(right)}") from None


def sort(items: Any) -> list[Any]:
    """The elements in ascending order (stable); all must be comparable with one another
    (numbers of any numeric type, or all strings, bytes, bools, timestamps, durations)."""
    values = _list("sort", items)
    return sorted(values, key=functools.cmp_to_key(lambda a, b: _order("sort", a, b)))


def distinct(items: Any) -> list[Any]:
    """The elements without repeats (by CEL equality), first occurrences kept in order;
    found again by hash (``equality.key``), so in time linear in the list. NaN, and a list
    or map holding one, equals nothing and so always stays."""
    kept: list[Any] = []
    seen: set[Any] = set()
    for item in _list("distinct", items):
        found = key(item)
        if found is not None:
            if found in seen:
                continue
            seen.add(found)
        kept.append(item)
    return kept


def reverse(items: Any) -> Any:
    """A list's elements in reverse order; on a string, cel-go's strings ``reverse``."""
    if kind(items) == "string":
        return strings.reverse(items)
    return list(reversed(_list("reverse", items)))


def numbers_range(count: Any) -> list[int]:
    """``lists.range(3)`` is ``[0, 1, 2]``."""
    (limit,) = typed("lists.range", (count,), ("int",))
    if limit > MOST_RANGE:
        raise CelEvaluationError(f"lists.range({limit}) is over callgate's limit of "
                                 f"{MOST_RANGE} elements")
    return list(range(max(limit, 0)))


def first(items: Any) -> Optional:
    values = _list("first", items)
    return Optional(values[0], True) if values else NONE


def last(items: Any) -> Optional:
    values = _list("last", items)
    return Optional(values[-1], True) if values else NONE


FUNCTIONS: tuple[Function, ...] = (
    Function("slice", LIBRARY, (member("list_slice", "list(T)", "int", "int", "list(T)"),),
             slice_list, "the elements from start (inclusive) to end (exclusive)"),
    Function("flatten", LIBRARY, (
        member("list_flatten", "list(list(T))", "list(T)"),
        member("list_flatten_int", "list(dyn)", "int", "list(dyn)"),
    ), flatten, "nested lists spliced in, one level or the given depth"),
    Function("sort", LIBRARY, (member("list_sort", "list(T)", "list(T)"),), sort,
             "the elements in ascending order"),
    Function("distinct", LIBRARY, (member("list_distinct", "list(T)", "list(T)"),), distinct,
             "the elements without repeats, first occurrences kept"),
    Function("reverse", LIBRARY, (
        *strings.REVERSE.overloads,
        member("list_reverse", "list(T)", "list(T)"),
    ), reverse, "the elements (or a string's code points) in reverse order"),
    Function("lists.range", LIBRARY, (global_("lists_range", "int", "list(int)"),),
             numbers_range, "the ints from 0 to n - 1"),
    Function("first", LIBRARY, (member("list_first", "list(T)", "optional_type(T)"),), first,
             "the first element as an optional (none for an empty list)"),
    Function("last", LIBRARY, (member("list_last", "list(T)", "optional_type(T)"),), last,
             "the last element as an optional (none for an empty list)"),
)
