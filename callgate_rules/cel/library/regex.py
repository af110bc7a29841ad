"""cel-go's regex extension (``ext.Regex``): ``regex.replace``, ``regex.extract``,
``regex.extractAll``, with RE2 semantics, in time linear in the text.

Patterns are RE2's (leftmost-first, as Go's ``regexp`` and cel-go); they run on RE2 itself
(the ``re2`` module ``callgate_rules.regex`` uses), never on a backtracking engine, since
both pattern and text may come from untrusted input. Semantics and messages are cel-go's
ext/regex.go: ``extract`` gives an optional (none when nothing matches, or when the one
capture group matched empty), ``extractAll`` the matches (or the non-empty captures of the
one group), a pattern with two or more capture groups is an error for both; in a
replacement, ``\\1``..``\\9`` insert a group and ``\\\\`` a backslash. As in Go, an empty
match right after a previous match is not a match.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.signatures import Function, global_
from callgate_rules.cel.values import NONE, Optional
from callgate_rules.regex import pattern_problem

LIBRARY = "regex"
_INT32_MAX = 2**31 - 1

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@lru_cache(maxsize=256)
def compiled(pattern: str) -> Any:
    """The RE2 program for ``pattern``, or a CEL error saying what is wrong with it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except Exception:  # re2 raises its own error class
        problem = pattern_problem(pattern) or "RE2 cannot compile it"
        raise CelEvaluationError(f"given regex is invalid: {pattern!r}: {problem}") from None


def subject(value: str) -> str:
    """RE2 reads UTF-8: a lone surrogate (not text) is read as U+FFFD."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
    return value


def matches(program: Any, text: str) -> Iterator[Any]:
    """Every match, left to right, as Go's FindAll finds them."""
    previous_end = -1
    for found in program.finditer(text):
        start, end = found.span()
        if start == end and start == previous_end:
            continue
        previous_end = end
        yield found


def _one_group(pattern: str, program: Any) -> int:
    if program.groups > 1:
        raise CelEvaluationError(
            f"regular expression has more than one capturing group: {pattern!r}")
    return int(program.groups)


def extract(target: Any, pattern: Any) -> Optional:
    """The first match (or its one capture group) as an optional string."""
    text, source = typed("regex.extract", (target, pattern), ("string", "string"))
    program = compiled(source)
    groups = _one_group(source, program)
    found = program.search(subject(text))
    if found is None:
        return NONE
    captured = found.group(groups)
    return Optional(captured, True) if captured else NONE


def extract_all(target: Any, pattern: Any) -> list[str]:
    """Every match (or every non-empty capture of the one group)."""
    text, source = typed("regex.extractAll", (target, pattern), ("string", "string"))
    program = compiled(source)
    groups = _one_group(source, program)
    results = [found.group(groups) for found in matches(program, subject(text))]
    return [result for result in results if result] if groups else results


def _expanded(replacement: str, found: Any, groups: int) -> str:
    pieces: list[str] = []
    position = 0
    while position < len(replacement):
        character = replacement[position]
        position += 1
        if character != "\\":
            pieces.append(character)
            continue
        if position >= len(replacement):
            raise CelEvaluationError(
                f"invalid replacement string: '{replacement}' \\ not allowed at end")
        following = replacement[position]
        position += 1
        if following == "\\":
            pieces.append("\\")
            continue
        if not (following.isascii() and following.isdigit()):
            raise CelEvaluationError(f"invalid replacement string: '{replacement}' \\ must be "
                                     "followed by a digit or \\")
        number = int(following)
        if number > groups:
            raise CelEvaluationError(f"replacement string references group {number} but "
                                     f"regex has only {groups} group(s)")
        pieces.append(found.group(number) or "")
    return "".join(pieces)


def replace(target: Any, pattern: Any, replacement: Any, count: Any = None) -> str:
    """Matches replaced (all, or the first ``count``; none for 0; all when negative)."""
    if count is None:
        text, source, template = typed("regex.replace", (target, pattern, replacement),
                                       ("string", "string", "string"))
        limit = -1
    else:
        text, source, template, limit = typed(
            "regex.replace", (target, pattern, replacement, count),
            ("string", "string", "string", "int"))
        if limit == 0:
            return str(text)
        if limit > _INT32_MAX:
            raise CelEvaluationError("integer overflow")
    program = compiled(source)
    searched = subject(text)
    pieces: list[str] = []
    last = 0
    for done, found in enumerate(matches(program, searched)):
        if 0 <= limit <= done:
            break
        start, end = found.span()
        pieces.append(searched[last:start])
        pieces.append(_expanded(template, found, int(program.groups)))
        last = end
    pieces.append(searched[last:])
    return "".join(pieces)


FUNCTIONS: tuple[Function, ...] = (
    Function("regex.replace", LIBRARY, (
        global_("regex_replace_string_string_string", "string", "string", "string", "string"),
        global_("regex_replace_string_string_string_int", "string", "string", "string", "int",
                "string"),
    ), replace, "RE2 matches replaced (\\1 inserts a group), all or the first n"),
    Function("regex.extract", LIBRARY,
             (global_("regex_extract_string_string", "string", "string",
                      "optional_type(string)"),),
             extract, "the first RE2 match (or its capture group) as an optional"),
    Function("regex.extractAll", LIBRARY,
             (global_("regex_extractAll_string_string", "string", "string", "list(string)"),),
             extract_all, "every RE2 match (or every capture of its group)"),
)
