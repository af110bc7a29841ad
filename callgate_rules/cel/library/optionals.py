"""cel-go's optional values (``cel.OptionalTypes``): ``optional.of``, ``optional.none``,
``optional.ofNonZeroValue``, ``optional.unwrap``, and on an optional ``hasValue``,
``value``, ``orValue``, ``or``. The syntax (``a.?b``, ``a[?b]``, ``[?x]``, ``{?k: v}``) and
the ``optMap``/``optFlatMap`` macros belong to the compiler.

Evaluation order, as cel-go's: ``a.or(b)`` and ``a.orValue(b)`` short-circuit: when ``a``
has a value, ``b`` is not evaluated, so an error in ``b`` does not surface. The
implementations here receive both arguments evaluated; the compiler must evaluate the
argument only when the receiver is ``optional.none()`` (``or_else`` and ``or_value_else``
take the argument as a thunk for exactly that).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from callgate_rules.cel.compiler.runtime.kinds import kind, no_overload
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.signatures import Function, global_, member
from callgate_rules.cel.values import NONE, Optional

LIBRARY = "optionals"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def of(value: Any) -> Optional:
    return Optional(value, True)


def none() -> Optional:
    return NONE


def is_zero(value: Any) -> bool:
    """CEL's zero values: ``0``, ``0u``, ``0.0``, ``''``, ``b''``, ``false``, ``null``,
    ``[]``, ``{}``, a zero duration, the Unix epoch. An optional is never zero (as in
    cel-expr-python: ``optional.ofNonZeroValue(optional.none())`` has a value)."""
    value_kind = kind(value)
    if value_kind == "null":
        return True
    if value_kind in ("int", "uint", "double", "bool", "string", "bytes", "list", "map"):
        return not value
    if value_kind == "duration":
        return bool(value == timedelta(0))
    if value_kind == "timestamp":
        return bool(value == _EPOCH)
    return False


def of_non_zero_value(value: Any) -> Optional:
    return NONE if is_zero(value) else Optional(value, True)


def _optional(function: str, value: Any, *others: Any) -> Optional:
    if kind(value) != "optional_type":
        raise no_overload(function, value, *others)
    return value  # type: ignore[no-any-return]


def has_value(optional: Any) -> bool:
    return _optional("hasValue", optional).present


def value(optional: Any) -> Any:
    found = _optional("value", optional)
    if not found.present:
        raise CelEvaluationError("optional.none() dereference")
    return found.value


def or_value(optional: Any, default: Any) -> Any:
    """``a.orValue(b)``: ``a``'s value, or ``b`` when ``a`` is none."""
    found = _optional("orValue", optional, default)
    return found.value if found.present else default


def or_optional(optional: Any, alternative: Any) -> Optional:
    """``a.or(b)``: ``a`` when it has a value, else ``b`` (which must be an optional)."""
    found = _optional("or", optional, alternative)
    if found.present:
        return found
    return _optional("or", alternative, optional)


def or_value_else(optional: Any, default: Callable[[], Any]) -> Any:
    """``orValue`` with its argument evaluated only when needed (cel-go's order)."""
    found = _optional("orValue", optional)
    return found.value if found.present else default()


def or_else(optional: Any, alternative: Callable[[], Any]) -> Optional:
    """``or`` with its argument evaluated only when needed (cel-go's order)."""
    found = _optional("or", optional)
    if found.present:
        return found
    return _optional("or", alternative())


def unwrap(optionals: Any) -> list[Any]:
    """``optional.unwrap([optional.of(1), optional.none()])`` is ``[1]``."""
    (items,) = typed("optional.unwrap", (optionals,), ("list",))
    return [_optional("optional.unwrap", item).value for item in items
            if _optional("optional.unwrap", item).present]


FUNCTIONS: tuple[Function, ...] = (
    Function("optional.of", LIBRARY, (global_("optional_of", "T", "optional_type(T)"),), of,
             "an optional holding the value"),
    Function("optional.none", LIBRARY, (global_("optional_none", "optional_type(T)"),), none,
             "the empty optional"),
    Function("optional.ofNonZeroValue", LIBRARY,
             (global_("optional_ofNonZeroValue", "T", "optional_type(T)"),), of_non_zero_value,
             "an optional holding the value, empty for a zero value (0, '', [], null...)"),
    Function("optional.unwrap", LIBRARY,
             (global_("optional_unwrap", "list(optional_type(T))", "list(T)"),), unwrap,
             "the values of the optionals that have one"),
    Function("hasValue", LIBRARY,
             (member("optional_hasValue", "optional_type(T)", "bool"),), has_value,
             "whether the optional holds a value"),
    Function("value", LIBRARY, (member("optional_value", "optional_type(T)", "T"),), value,
             "the optional's value (an error when empty)"),
    Function("orValue", LIBRARY,
             (member("optional_orValue_value", "optional_type(T)", "T", "T"),), or_value,
             "the optional's value, or the argument when empty (evaluated only then)"),
    Function("or", LIBRARY, (member("optional_or_optional", "optional_type(T)",
                                    "optional_type(T)", "optional_type(T)"),), or_optional,
             "the optional if it has a value, else the argument (evaluated only then)"),
)
