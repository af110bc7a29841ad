"""cel-go's sets extension (``ext.Sets``): ``sets.contains``, ``sets.equivalent``,
``sets.intersects`` on lists taken as sets, elements compared by CEL equality (so
``sets.contains([1], [1.0])`` is true), as ext/sets.go documents them; by hash
(``equality.key``), so in time linear in the lists.
"""

from __future__ import annotations

from typing import Any

from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.equality import key
from callgate_rules.cel.library.signatures import Function, global_

LIBRARY = "sets"


def _keys(function: str, left: Any, right: Any) -> tuple[set[Any], set[Any], bool, bool]:
    """Each list's elements as ``equality.key``s, and whether each held an element that
    equals nothing (NaN): such an element is in no set."""
    first, second = typed(function, (left, right), ("list", "list"))
    first_keys = [key(item) for item in first]
    second_keys = [key(item) for item in second]
    return ({k for k in first_keys if k is not None}, {k for k in second_keys if k is not None},
            None in first_keys, None in second_keys)


def contains(left: Any, right: Any) -> bool:
    """Whether every element of ``right`` is in ``left`` (true for an empty ``right``)."""
    whole, part, _, part_has_nan = _keys("sets.contains", left, right)
    return not part_has_nan and part <= whole


def equivalent(left: Any, right: Any) -> bool:
    """Whether each list contains the other, duplicates and order aside."""
    first, second, first_has_nan, second_has_nan = _keys("sets.equivalent", left, right)
    return not (first_has_nan or second_has_nan) and first == second


def intersects(left: Any, right: Any) -> bool:
    """Whether the lists have an element in common."""
    first, second, _, _ = _keys("sets.intersects", left, right)
    return not first.isdisjoint(second)


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
