"""CEL equality as a hash key, so that ``distinct`` and the sets functions take time linear
in their lists rather than comparing every pair (a hostile list of 10,000 small lists would
otherwise cost 50 million comparisons).

``key(a) == key(b)`` exactly when CEL's ``a == b`` (``cel.compiler.runtime.compare``) is
true: numbers of every numeric type under one tag (``1``, ``1u`` and ``1.0`` are one key),
lists element by element, maps as sets of entries, every other kind by its own value. A
value that equals nothing, not even itself (NaN, or a list or map holding one), has no key
(``None``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

from callgate_rules.cel.compiler.runtime.kinds import kind_or_python_type

_NUMBERS = frozenset({"int", "uint", "double"})


class _NoKey(Exception):
    """The value equals nothing: it has no key."""


def key(value: Any) -> Hashable | None:
    try:
        return _key(value)
    except (_NoKey, TypeError):
        return None


def _key(value: Any) -> Hashable:
    value_kind = kind_or_python_type(value)
    if value_kind in _NUMBERS:
        if value_kind == "double" and math.isnan(value):
            raise _NoKey
        return ("number", value)
    if value_kind == "list":
        return ("list", tuple(_key(item) for item in value))
    if value_kind == "map":
        return ("map", frozenset((_key(name), _key(item)) for name, item in value.items()))
    if value_kind == "optional_type":
        return ("optional", value.present, _key(value.value) if value.present else None)
    hash(value)  # a TypeError for a value with no CEL kind that cannot be hashed
    return (value_kind, value)
