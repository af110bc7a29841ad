"""JSON numbers typed by their schema, as CEL sees them.

JSON has one number type; CEL has ``int`` and ``double`` and its arithmetic mixes neither
(``600 + 0.5`` is an error). A JSON text says ``600`` or ``600.0`` as the model happens to
write it, so an argument declared ``type: number`` would be an ``int`` one call and a
``double`` the next, and ``args.amount + 0.5`` would fail closed exactly when the model wrote
the amount without a fraction. Kubernetes types CEL values by their OpenAPI schema; callgate
does the same: a value the schema declares ``number`` (and not ``integer``) is presented as a
double when it arrives integral, and a value declared ``integer`` that arrives as an integral
float (``5.0``, which JSON Schema accepts as an integer) is presented as an ``int``.

``number_typing(schema)`` works the conversion out once per schema (compile once) and
returns ``None`` when the schema declares no number anywhere, so most tools pay nothing.
Only values that need it are copied; the rest is shared. An int too large to be a double
exactly stays an int (comparisons stay exact; arithmetic on it is as before).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Typing = Callable[[Any], Any]

_MAX_DEPTH = 32  # schemas deeper than this are left as they arrive (dyn)


def number_typing(schema: Any) -> Typing | None:
    """The function presenting values of ``schema`` with CEL number types, or ``None``."""
    return _typing(schema, 0)


def _declared_types(schema: Mapping[str, Any]) -> frozenset[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(item for item in declared if isinstance(item, str))
    return frozenset()


def _typing(schema: Any, depth: int) -> Typing | None:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None
    declared = _declared_types(schema)
    if "number" in declared and "integer" not in declared:
        return _as_double
    if "integer" in declared and "number" not in declared:
        return _as_int
    fields = ({name: typing for name, sub in (schema.get("properties") or {}).items()
              if isinstance(name, str) and (typing := _typing(sub, depth + 1)) is not None}
        if isinstance(schema.get("properties"), Mapping) else {})
    items = _typing(schema.get("items"), depth + 1)
    if fields:
        return _object(fields)
    if items is not None:
        return _array(items)
    return None


def _as_double(value: Any) -> Any:
    if type(value) is int and float(value) == value:
        return float(value)
    return value


def _as_int(value: Any) -> Any:
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _object(fields: Mapping[str, Typing]) -> Typing:
    named = tuple(fields.items())

    def typed(value: Any) -> Any:
        if type(value) is not dict:
            return value
        changed: dict[str, Any] | None = None
        for name, typing in named:
            if name in value:
                before = value[name]
                after = typing(before)
                if after is not before:
                    if changed is None:
                        changed = dict(value)
                    changed[name] = after
        return value if changed is None else changed

    return typed


def _array(items: Typing) -> Typing:
    def typed(value: Any) -> Any:
        if type(value) is not list:
            return value
        converted = [items(item) for item in value]
        return (value if all(a is b for a, b in zip(converted, value, strict=True))
            else converted)

    return typed
