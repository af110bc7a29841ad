"""cel-go's sets extension (``ext.Sets``): ``sets.contains``, ``sets.equivalent``,
``sets.intersects`` on lists taken as sets, elements compared by CEL equality (so
``sets.contains([1], [1.0])`` is true), as ext/sets.go documents them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from callgate_rules.cel.compiler.runtime.compare import is_in
from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.signatures import Function, global_

LIBRARY = "sets"


def _lists(function: str, left: Any, right: Any) -> tuple[Sequence[Any], Sequence[Any]]:
    first, second = typed(function, (left, right), ("list", "list"))
    return first, second


def contains(left: Any, right: Any) -> bool:
    """Whether every element of ``right`` is in ``left`` (true for an empty ``right``)."""
    whole, part = _lists("sets.contains", left, right)
    return all(is_in(item, whole) for item in part)


def equivalent(left: Any, right: Any) -> bool:
    """Whether each list contains the other, duplicates and order aside."""
    first, second = _lists("sets.equivalent", left, right)
    return all(is_in(item, second) for item in first) and \
        all(is_in(item, first) for item in second)


def intersects(left: Any, right: Any) -> bool:
    """Whether the lists have an element in common."""
    first, second = _lists("sets.intersects", left, right)
    return any(is_in(item, second) for item in first)


FUNCTIONS: tuple[Function, ...] = (
    Function("sets.contains", LIBRARY,
             (global_("list_sets_contains_list", "list(T)", "list(T)", "bool"),), contains,
             "whether the first list contains every element of the second"),
    Function("sets.equivalent", LIBRARY,
             (global_("list_sets_equivalent_list", "list(T)", "list(T)", "bool"),),
             equivalent, "whether two lists hold the same elements as sets"),
    Function("sets.intersects", LIBRARY,
             (global_("list_sets_intersects_list", "list(T)", "list(T)", "bool"),),
             intersects, "whether two lists have an element in common"),
)
