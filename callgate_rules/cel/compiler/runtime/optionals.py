"""The optionals syntax at run time: ``a.?b``, ``a[?k]``, selections after them (``a.?b.c``),
``[?x]`` and ``{?k: v}``, and the ``optMap``/``optFlatMap`` macros' checks. Values are
``cel.values.Optional``; ``NONE`` is ``optional.none()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from callgate_rules.cel.compiler.runtime.compare import find_key
from callgate_rules.cel.compiler.runtime.containers import (
    has_field,
    index,
    index_position,
    make_map,
)
from callgate_rules.cel.compiler.runtime.kinds import ABSENT, kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.values import NONE, Optional


def select_optional(operand: Any, field: str) -> Optional:
    """``operand.?field``: the field's value as an optional, none when it is absent."""
    if type(operand) is Optional:
        if not operand.present:
            return NONE
        operand = operand.value
    if isinstance(operand, Mapping):
        return Optional(operand[field], True) if field in operand else NONE
    raise no_overload("_?._", operand, field)


def select_through_optional(operand: Any, field: str) -> Any:
    """``.field`` on what may be an optional (after ``a.?b``, or a function's result such
    as ``optional.of(m).c``): none stays none, a value's field is optional too (none when
    absent), and anything else is selected as usual."""
    if type(operand) is not Optional:
        if isinstance(operand, Mapping):
            if field in operand:
                return operand[field]
            raise CelEvaluationError(f"no such key: {field!r}")
        raise no_overload("_._", operand, field)
    return select_optional(operand, field)


def has_through_optional(operand: Any, field: str) -> bool:
    """``has(a.?b.c)``: false when ``a.?b`` is none, else whether its value has ``c``."""
    if type(operand) is Optional:
        return operand.present and has_field(operand.value, (), field)
    return has_field(operand, (), field)


def index_optional(operand: Any, key: Any) -> Optional:
    """``operand[?key]``: the element or entry as an optional, none when there is none."""
    if type(operand) is Optional:
        if not operand.present:
            return NONE
        operand = operand.value
    operand_kind = kind(operand)
    if operand_kind == "map":
        found = find_key(operand, key)
        return NONE if found is ABSENT else Optional(operand[found], True)
    if operand_kind == "list":
        position = index_position(operand, key)
        return Optional(operand[position], True) if position is not None else NONE
    raise no_overload("_[?_]", operand, key)


def index_through_optional(operand: Any, key: Any) -> Any:
    """``[key]`` on what may be an optional, as ``select_through_optional`` selects."""
    if type(operand) is not Optional:
        return index(operand, key)
    return index_optional(operand, key)


def _optional(where: str, value: Any) -> Optional:
    if type(value) is not Optional:
        raise CelEvaluationError(f"{where} needs an optional value, not {kind(value)}")
    return value


def make_list_with_optionals(items: Iterable[tuple[bool, Any]]) -> list[Any]:
    """``[a, ?b]``: an optional item is included when it has a value."""
    result: list[Any] = []
    for is_optional, value in items:
        if not is_optional:
            result.append(value)
        elif _optional("[?x]", value).present:
            result.append(value.value)
    return result


def make_map_with_optionals(entries: Iterable[tuple[bool, Any, Any]]) -> dict[Any, Any]:
    """``{?k: v}``: an optional entry is included when its value has one."""
    kept: list[tuple[Any, Any]] = []
    for is_optional, key, value in entries:
        if not is_optional:
            kept.append((key, value))
        elif _optional("{?k: v}", value).present:
            kept.append((key, value.value))
    return make_map(kept)


def optional_present(value: Any) -> bool:
    """Whether ``value`` is an optional with a value (anything else: false, and the library
    function called next reports the wrong receiver)."""
    return type(value) is Optional and value.present


def optional_operand(macro: str, value: Any) -> Optional:
    """What ``optMap``/``optFlatMap`` are called on: an optional."""
    if type(value) is not Optional:
        raise no_overload(macro, value)
    return value


def flat_map_result(value: Any) -> Optional:
    return _optional("optFlatMap's expression", value)
