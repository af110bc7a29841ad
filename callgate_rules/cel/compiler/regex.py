"""``matches()`` patterns: RE2 semantics, matched by Python's ``re`` when that is safe.

CEL specifies RE2 syntax, and cel-python matches with the ``re2`` module. That module costs
several microseconds per call from Python, twenty times Python's ``re``. So each pattern is
validated by RE2 (a pattern RE2 rejects is an error, as in cel-python) and then, if it stays
within a subset of the syntax where the two engines agree once translated, compiled with
``re``; anything outside that subset is matched by RE2 itself.

The translation: ``$`` becomes ``\\Z`` (Python's ``$`` also matches before a final newline,
RE2's does not), ``\\s`` is spelled out as RE2's ASCII set (Python's ASCII ``\\s`` also
holds ``\\v``), and the pattern compiles with ``re.ASCII`` so ``\\d``, ``\\w`` and ``\\b``
are ASCII-only as in RE2. Flags, back-references, Unicode classes, POSIX classes,
``\\Q...\\E`` and nested sets all take the RE2 path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import re2  # type: ignore[import-untyped]

from callgate_rules.cel.errors import CelEvaluationError

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # report bad patterns as CEL errors, not on stderr

_RE2_SPACE = r"\t\n\f\r "
# Escapes that mean the same in both engines (with re.ASCII); letters not listed here
# either differ or have no Python equivalent.
_SAME_ESCAPES = frozenset("dDwWbBAnrtfva")


@dataclass(frozen=True)
class CompiledPattern:
    source: str
    search: Callable[[str], bool]


def compile_pattern(source: str) -> CompiledPattern:
    """Compile an RE2 pattern; raise CelEvaluationError if RE2 rejects it."""
    try:
        compiled_re2 = re2.compile(source, _RE2_OPTIONS)
    except re2.error as error:
        raise CelEvaluationError(f"invalid regular expression {source!r}: {error}") from None
    translated = to_python_syntax(source)
    if translated is not None:
        try:
            compiled = re.compile(translated, re.ASCII)
        except re.error:
            compiled = None
        if compiled is not None:
            python_search = compiled.search
            return CompiledPattern(source, lambda text: python_search(text) is not None)
    re2_search = compiled_re2.search
    return CompiledPattern(source, lambda text: re2_search(text) is not None)


def to_python_syntax(pattern: str) -> str | None:
    """The Python ``re`` spelling of an RE2 pattern, or None when it is outside the subset
    where the two provably agree."""
    out: list[str] = []
    position = 0
    in_class = False
    length = len(pattern)
    while position < length:
        char = pattern[position]
        if char == "\\":
            if position + 1 >= length:
                return None
            escaped = pattern[position + 1]
            position += 2
            if escaped == "s":
                out.append(_RE2_SPACE if in_class else f"[{_RE2_SPACE}]")
            elif escaped == "S" and not in_class:
                out.append(f"[^{_RE2_SPACE}]")
            elif escaped == "z" and not in_class:
                out.append(r"\Z")
            elif escaped in _SAME_ESCAPES and not (in_class and escaped in "bBA"):
                out.append("\\" + escaped)
            elif not escaped.isalnum() and escaped.isascii():
                out.append("\\" + escaped)  # an escaped punctuation character is literal
            else:
                return None
            continue
        if in_class:
            if char == "[" or pattern.startswith(("&&", "--", "||", "~~"), position):
                return None  # POSIX classes and set operations read differently
            if char == "]":
                in_class = False
            out.append(char)
            position += 1
            continue
        if char == "[":
            in_class = True
            out.append(char)
            position += 1
            # A ']' (after an optional '^') right at the start is a literal in both engines.
            if position < length and pattern[position] == "^":
                out.append("^")
                position += 1
            if position < length and pattern[position] == "]":
                out.append("\\]")
                position += 1
            continue
        if char == "(" and pattern.startswith("(?", position):
            if not pattern.startswith(("(?:", "(?P<"), position):
                return None  # flags and other group kinds
        elif char == "{" and pattern.startswith("{,", position):
            return None  # RE2 reads "{,n}" literally, Python as a repetition
        elif char == "$":
            out.append(r"\Z")
            position += 1
            continue
        out.append(char)
        position += 1
    return None if in_class else "".join(out)
