"""Argument checks the library's implementations share: the kind an argument must have,
the "no such overload" error for anything else."""

from __future__ import annotations

from typing import Any

from callgate_rules.cel.compiler.runtime.kinds import kind, no_overload


def expect(function: str, wanted: str, value: Any, *arguments: Any) -> Any:
    """``value`` when its CEL kind is ``wanted``, else "no such overload" naming every
    argument of the call (``arguments``, the receiver first; ``value`` alone if empty)."""
    if kind(value) == wanted:
        return value
    raise no_overload(function, *(arguments or (value,)))


def strings(function: str, *arguments: Any) -> tuple[str, ...]:
    """Every argument, when all are strings."""
    for argument in arguments:
        if kind(argument) != "string":
            raise no_overload(function, *arguments)
    return tuple(_plain(argument, "string") for argument in arguments)


def typed(function: str, arguments: tuple[Any, ...], kinds: tuple[str, ...]) -> tuple[Any, ...]:
    """``arguments`` when each has the CEL kind at its place in ``kinds`` (``"dyn"``: any),
    else "no such overload" naming all of them. Ints and strings come back as plain
    ``int`` and ``str``."""
    for argument, wanted in zip(arguments, kinds, strict=True):
        if wanted != "dyn" and kind(argument) != wanted:
            raise no_overload(function, *arguments)
    pairs = zip(arguments, kinds, strict=True)
    return tuple(_plain(argument, wanted) for argument, wanted in pairs)


def _plain(value: Any, wanted: str) -> Any:
    if wanted == "int" and type(value) is not int:
        return int(value)
    if wanted == "string" and type(value) is not str:
        return str(value)
    return value
