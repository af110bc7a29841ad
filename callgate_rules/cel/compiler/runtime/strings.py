"""String functions the compiler calls directly: ``contains``, ``startsWith``, ``endsWith``
and ``matches`` (RE2 patterns, see ``regex``); the strings extension library (``lowerAscii``
and the rest) is ``cel.library.strings``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from callgate_rules.cel.compiler.regex import CompiledPattern, compile_pattern
from callgate_rules.cel.compiler.runtime.kinds import no_overload


def _strings(function: str, receiver: Any, argument: Any) -> tuple[str, str]:
    if isinstance(receiver, str) and isinstance(argument, str):
        return receiver, argument
    raise no_overload(function, receiver, argument)


def contains(receiver: Any, argument: Any) -> bool:
    text, fragment = _strings("contains", receiver, argument)
    return fragment in text


def starts_with(receiver: Any, argument: Any) -> bool:
    text, prefix = _strings("startsWith", receiver, argument)
    return text.startswith(prefix)


def ends_with(receiver: Any, argument: Any) -> bool:
    text, suffix = _strings("endsWith", receiver, argument)
    return text.endswith(suffix)


def matches_compiled(receiver: Any, pattern: CompiledPattern) -> bool:
    """``text.matches(re)`` with ``re`` compiled once at compile time."""
    if not isinstance(receiver, str):
        raise no_overload("matches", receiver, pattern.source)
    return pattern.search(receiver)


@lru_cache(maxsize=256)
def _compiled_at_run_time(pattern: str) -> CompiledPattern:
    return compile_pattern(pattern)


def matches(receiver: Any, pattern: Any) -> bool:
    """``text.matches(re)`` with a pattern only known at run time."""
    text, source = _strings("matches", receiver, pattern)
    return _compiled_at_run_time(source).search(text)
