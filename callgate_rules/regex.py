"""Regular expressions on text the model or the conversation controls: RE2 syntax and
semantics, matched in time linear in the text.

A backtracking matcher — Python's ``re``, and so ``jsonschema`` by default — takes time
exponential in the text on a pattern such as ``^(a+)+$``: one proposed call of 41 characters
would hold a decision for minutes, holding the GIL, and no timeout bounds it. RE2 never
backtracks: its time is linear in the text for every pattern it accepts, and CEL specifies
its syntax. So every pattern the gate runs on such text — JSON Schema ``pattern`` and
``patternProperties``, CEL ``matches()`` — is compiled here, by RE2 first. A pattern RE2
refuses (a backreference, a lookaround, ``\\Z``) raises ``PatternError``, whose text says
what is wrong and how to write it instead; the document compiler reports it at load.

Calling RE2 from Python costs more than a microsecond (the pybind11 crossing), a few times a
short ``re`` search, and a decision checks a few patterns. So a pattern is searched with
``re`` when two things hold, both decided on the pattern's source, once:

- **the same answers**: the pattern is in the subset where the two engines agree once
  translated (``to_python_syntax``: ``$`` → ``\\Z``, RE2's ``\\s`` spelled out, ASCII
  classes);
- **linear time**: the pattern is ``^`` followed by a plain sequence of single characters,
  ``.``, escapes like ``\\d`` and character classes, each with an optional greedy repetition
  (``*``, ``+``, ``?``, ``{n}``, ``{n,}``, ``{n,m}``), optionally ending in ``$`` — no group,
  no alternation — and it is *deterministic*: wherever a repetition may either stop or go
  on, no character that would go on can also begin what follows it. Then a backtracking
  matcher, having consumed a run greedily, gives characters back only to find at once that
  nothing after can take them: each give-back costs at most one step per item of the
  pattern, and the one start position ``^`` allows costs at most the text's length of
  them. ``^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$`` qualifies; ``^(a+)+$``, ``^a*a$``,
  ``^[a-z]+[a-z0-9]*$`` and every unanchored pattern (a search starts at every position)
  go to RE2.

Everything else is searched by RE2 itself, on the text encoded as UTF-8 (a lone surrogate,
which is not text, is passed through rather than raising).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import re2  # type: ignore[import-untyped]

Search = Callable[[str], bool]  # does the pattern match somewhere in the text?

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is reported by the caller, not on stderr
_RE2_OPTIONS.never_capture = True  # only "is there a match" is asked: groups cost time


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the text says what is wrong and how to fix it."""


class Pattern(NamedTuple):
    source: str
    search: Search
    # the same test for generated code, one call cheaper: something truthy (for ``re``, the
    # match object) when the pattern matches somewhere, else something falsy
    find: Callable[[str], object]
    engine: str  # "re" (provably linear and equivalent here) or "re2"


@lru_cache(maxsize=1024)  # schema patterns are few; CEL may meet patterns only at run time
def compile_pattern(source: str) -> Pattern:
    """``source`` compiled with RE2 semantics; raises ``PatternError`` if RE2 refuses it."""
    try:
        encoded = source.encode("utf-8")
    except UnicodeEncodeError:
        raise PatternError("the pattern holds a lone UTF-16 surrogate, which is not text; "
                           "write the character it stands for") from None
    try:  # bytes in, bytes searched: the text's lone surrogates pass through (below)
        compiled = re2.compile(encoded, _RE2_OPTIONS)
    except re2.error as error:
        raise PatternError(_explain(_re2_message(error))) from None
    if is_linear_under_backtracking(source):
        translated = to_python_syntax(source)
        if translated is not None:
            python_search = re.compile(translated, re.ASCII).search
            return Pattern(source, lambda text: python_search(text) is not None, python_search,
                           "re")
    search = compiled.search

    def re2_search(text: str) -> bool:
        return search(text.encode("utf-8", "surrogatepass")) is not None

    return Pattern(source, re2_search, re2_search, "re2")


def _re2_message(error: Exception) -> str:
    """RE2's reason, as text (``re2.error`` carries it as bytes)."""
    found = error.args[0] if error.args else ""
    return found.decode("utf-8", "replace") if isinstance(found, bytes) else str(found)


def pattern_problem(source: str) -> str | None:
    """Why RE2 refuses ``source`` (what to write instead), or ``None`` if it compiles."""
    try:
        compile_pattern(source)
    except PatternError as error:
        return str(error)
    return None


# What RE2 says, and what to do about it ------------------------------------------------------

_ADVICE = (
    ("invalid perl operator: (?=", "lookahead is not supported (RE2 matches in linear time "
     "and has no lookaround); check the condition with a second pattern or a CEL rule"),
    ("invalid perl operator: (?!", "negative lookahead is not supported (RE2 has no "
     "lookaround); check the condition with a second pattern or a CEL rule"),
    ("invalid perl operator: (?<=", "lookbehind is not supported (RE2 has no lookaround); "
     "check the condition with a second pattern or a CEL rule"),
    ("invalid perl operator: (?<!", "negative lookbehind is not supported (RE2 has no "
     "lookaround); check the condition with a second pattern or a CEL rule"),
    ("invalid perl operator: (?>", "atomic groups are not supported; RE2 never backtracks, "
     "so a plain group (?:...) means the same"),
    ("invalid perl operator: (?P", "named backreferences (?P=name) are not supported (RE2 "
     "matches in linear time); compare the two parts in a CEL rule instead; a named group "
     "is written (?P<name>...)"),
    ("invalid escape sequence: \\Z", "\\Z is not RE2 syntax; write \\z or $ (both match "
     "only at the very end)"),
    ("bad repetition operator: ++", "possessive repetition is not supported; RE2 never "
     "backtracks, so a plain + means the same"),
    ("bad repetition operator: *+", "possessive repetition is not supported; RE2 never "
     "backtracks, so a plain * means the same"),
    ("bad repetition operator: ?+", "possessive repetition is not supported; RE2 never "
     "backtracks, so a plain ? means the same"),
    ("invalid repetition size", "RE2 allows at most 1000 repetitions of one item; bound "
     "the length with minLength/maxLength or a CEL size() rule instead"),
    ("pattern too large", "the compiled pattern exceeds RE2's memory budget; split it or "
     "bound the length with minLength/maxLength instead"),
)
_BACKREFERENCE = re.compile(r"invalid escape sequence: \\[1-9]")


def _explain(error: str) -> str:
    """RE2's error, with what to write instead where one is known."""
    if _BACKREFERENCE.match(error):
        return (f"not RE2 syntax ({error}): backreferences are not supported (RE2 matches in "
                "linear time); compare the two parts in a CEL rule instead")
    for start, advice in _ADVICE:
        if error.startswith(start):
            return f"not RE2 syntax ({error}): {advice}"
    return (f"not RE2 syntax ({error}); see https://github.com/google/re2/wiki/Syntax for "
            "what RE2 accepts")


# Linear time under a backtracking matcher ----------------------------------------------------

_MAX = 0x10FFFF
Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, inclusive code point ranges


def _negated(ranges: Ranges) -> Ranges:
    result: list[tuple[int, int]] = []
    low = 0
    for start, end in _merged(ranges):
        if start > low:
            result.append((low, start - 1))
        low = end + 1
    if low <= _MAX:
        result.append((low, _MAX))
    return tuple(result)


def _merged(ranges: Ranges | list[tuple[int, int]]) -> Ranges:
    result: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if result and start <= result[-1][1] + 1:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return tuple(result)


def _intersect(one: Ranges, two: Ranges) -> bool:
    return any(a <= d and c <= b for a, b in one for c, d in two)


_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE: Ranges = ((0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20))  # RE2's \s: no \v
_SET_ESCAPES: dict[str, Ranges] = {
    "d": _DIGIT, "D": _negated(_DIGIT), "w": _WORD, "W": _negated(_WORD),
    "s": _SPACE, "S": _negated(_SPACE),
}
_CHAR_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07}
_DOT: Ranges = ((0, 0x09), (0x0B, _MAX))  # any character but a newline, in both engines
_META = frozenset("\\^$.|?*+()[]{}")
_REPETITION = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")


class _Item(NamedTuple):
    characters: Ranges
    least: int
    most: int | None  # None: unbounded


def is_linear_under_backtracking(pattern: str) -> bool:
    """Whether a backtracking matcher searches ``pattern`` in time linear in the text (see
    the module's docstring for the shape that proves it). ``False`` means "not proven"."""
    if not pattern.startswith("^"):
        return False
    body = (pattern[1:-1] if pattern.endswith("$") and not _escaped_at_end(pattern)
        else pattern[1:])
    items = _items(body)
    if items is None:
        return False
    for index, item in enumerate(items):
        if item.least == item.most:
            continue  # no choice to make here
        following: list[tuple[int, int]] = []
        for after in items[index + 1:]:
            following.extend(after.characters)
            if after.least > 0:
                break
        if _intersect(item.characters, _merged(following)):
            return False
    return True


def _escaped_at_end(pattern: str) -> bool:
    """Whether the final ``$`` is an escaped literal (an odd run of backslashes before it)."""
    backslashes = len(pattern) - 1 - len(pattern[:-1].rstrip("\\"))
    return backslashes % 2 == 1


def _items(body: str) -> list[_Item] | None:
    """The pattern body as a sequence of (characters, repetition), or ``None`` when it is not
    such a plain sequence."""
    items: list[_Item] = []
    position = 0
    while position < len(body):
        atom = _atom(body, position)
        if atom is None:
            return None
        characters, position = atom
        least: int = 1
        most: int | None = 1
        if position < len(body):
            char = body[position]
            if char in "*+?":
                least, most = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
                position += 1
            elif char == "{":
                repetition = _REPETITION.match(body, position)
                if repetition is None:
                    return None
                least = int(repetition[1])
                most = (least if repetition[2] is None else
                    (int(repetition[3]) if repetition[3] else None))
                position = repetition.end()
            if position < len(body) and body[position] in "*+?{":
                return None  # lazy, possessive or stacked repetition: not plain
        items.append(_Item(characters, least, most))
    return items


def _atom(body: str, position: int) -> tuple[Ranges, int] | None:
    char = body[position]
    if char == "[":
        return _class(body, position + 1)
    if char == ".":
        return _DOT, position + 1
    if char == "\\":
        return _escape(body, position)
    if char in _META:
        return None
    return ((ord(char), ord(char)),), position + 1


def _escape(body: str, position: int) -> tuple[Ranges, int] | None:
    if position + 1 >= len(body):
        return None
    letter = body[position + 1]
    if letter in _SET_ESCAPES:
        return _SET_ESCAPES[letter], position + 2
    if letter in _CHAR_ESCAPES:
        code = _CHAR_ESCAPES[letter]
        return ((code, code),), position + 2
    if letter.isascii() and not letter.isalnum():
        return ((ord(letter), ord(letter)),), position + 2  # an escaped punctuation mark
    return None  # \b, \pL, \x{..}, \Q ... : not in the plain subset


def _class(body: str, position: int) -> tuple[Ranges, int] | None:
    """A character class after its ``[``: its characters, and the position after ``]``."""
    negate = position < len(body) and body[position] == "^"
    position += negate
    ranges: list[tuple[int, int]] = []
    first = True
    while position < len(body):
        char = body[position]
        if char == "]" and not first:
            merged = _merged(ranges)
            return (_negated(merged) if negate else merged), position + 1
        if char == "[" or body.startswith(("&&", "--", "||", "~~"), position):
            return None  # POSIX classes and set operations
        single = _class_character(body, position)
        if single is None:
            return None
        low, position = single
        if (len(low) == 1 and low[0][0] == low[0][1] and body.startswith("-", position)
                and position + 1 < len(body) and body[position + 1] != "]"):
            high = _class_character(body, position + 1)
            if (high is None or len(high[0]) != 1 or high[0][0][0] != high[0][0][1]
                    or high[0][0][0] < low[0][0]):
                return None
            ranges.append((low[0][0], high[0][0][0]))
            position = high[1]
        else:
            ranges.extend(low)
        first = False
    return None  # no closing ]


def _class_character(body: str, position: int) -> tuple[Ranges, int] | None:
    char = body[position]
    if char == "\\":
        return _escape(body, position)
    if (char == "-" and position + 1 < len(body) and body[position + 1] != "]"
            and body[position - 1] not in "[^"):
        return None  # a '-' that neither starts nor ends the class: read differently
    return ((ord(char), ord(char)),), position + 1


# The Python spelling of an RE2 pattern ---------------------------------------------------------

_RE2_SPACE = r"\t\n\f\r "
# Escapes that mean the same in both engines (with re.ASCII); letters not listed here
# either differ or have no Python equivalent.
_SAME_ESCAPES = frozenset("dDwWbBAnrtfva")


def to_python_syntax(pattern: str) -> str | None:
    """The Python ``re`` spelling of an RE2 pattern, or None when it is outside the subset
    where the two provably agree. The translation: ``$`` becomes ``\\Z`` (Python's ``$``
    also matches before a final newline, RE2's does not), ``\\s`` is spelled out as RE2's
    ASCII set (Python's ASCII ``\\s`` also holds ``\\v``), and the pattern compiles with
    ``re.ASCII`` so ``\\d``, ``\\w`` and ``\\b`` are ASCII-only as in RE2. Flags,
    back-references, Unicode classes, POSIX classes, ``\\Q...\\E`` and nested sets are
    outside the subset."""
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
