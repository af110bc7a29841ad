"""Characters a person could not see or could misread, made visible and recovered.

The marks a draft shows (``visible``): a line break as ``↵``, any other control, bidi
control, invisible character (every ``Default_Ignorable_Code_Point``: zero-width
characters, variation selectors, the combining grapheme joiner, Hangul fillers…), unusual
or blank-looking space, digit of another script than ASCII (``৪`` looks like ``8``) and
combining mark that could draw over its neighbours (an overlay such as U+0338, a second mark
on one base, a mark with no base) as a named mark such as
``⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩``; in a word that mixes scripts, the letters of the
minority script the same way. The marks are reversible (``recovered``). The script of a
letter is the first word of its Unicode name (``unicodedata``), no dependency.
"""

from __future__ import annotations

import bisect
import functools
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

NEWLINE_MARK = "\u21b5"  # ↵
OPEN_MARK, CLOSE_MARK = "\u27e8", "\u27e9"  # ⟨ ⟩

BIDI_CONTROLS = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                           *range(0x2066, 0x206A)})
ZERO_WIDTH = frozenset({0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF})
LINE_BREAKS = frozenset({0x0A, 0x0B, 0x0C, 0x0D, 0x85, 0x2028, 0x2029})
# Default_Ignorable_Code_Point, from Unicode's DerivedCoreProperties.txt (Unicode 15.1;
# https://www.unicode.org/Public/UCD/latest/ucd/DerivedCoreProperties.txt). Python's
# ``unicodedata`` has no such property; these code points draw nothing, whatever their
# general category (several are Mn or Lo, which a category check alone lets through).
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF))
# Characters that are not spaces but draw as one.
BLANK_LOOKING = frozenset({0x2800})  # BRAILLE PATTERN BLANK
_CONTROL_NAMES = {0x00: "NULL", 0x07: "BELL", 0x08: "BACKSPACE", 0x09: "CHARACTER TABULATION",
                  0x0A: "LINE FEED", 0x0B: "LINE TABULATION", 0x0C: "FORM FEED",
                  0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE", 0x7F: "DELETE",
                  0x85: "NEXT LINE"}
# Scripts that are written together in one word: not a confusable mix.
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "IDEOGRAPHIC": "CJK",
                  "HALFWIDTH": "CJK"}

# The kinds of character marked (warning kinds of a draft's rows, in the order a row lists
# them; ``drafts`` adds ``long`` and ``origin``).
LINE_BREAK, CONTROL, BIDI, INVISIBLE, SPACE, DIGIT, COMBINING, MIXED_SCRIPT = (
    "line_break", "control", "bidi", "invisible", "space", "digit", "combining_mark",
    "mixed_script")
# A combining mark in the ``overlay`` class (canonical combining class 1: U+0334–U+0338,
# U+20D2…) draws across its base and its neighbours.
_OVERLAY = 1


_IGNORABLE_STARTS = tuple(low for low, _ in DEFAULT_IGNORABLE)


def default_ignorable(code: int) -> bool:
    """Is ``code`` a ``Default_Ignorable_Code_Point`` (see ``DEFAULT_IGNORABLE``)?"""
    at = bisect.bisect_right(_IGNORABLE_STARTS, code) - 1
    return at >= 0 and code <= DEFAULT_IGNORABLE[at][1]


@dataclass(frozen=True)
class Visible:
    """A text made visible: what is shown, and each kind of character marked, by name."""

    shown: str
    marked: Mapping[str, Counter[str]]  # kind → "U+202E RIGHT-TO-LEFT OVERRIDE" → count
    scripts: tuple[str, ...] = ()  # the scripts of its letters, when it mixes them


@functools.lru_cache(maxsize=4096)
def char_name(character: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: the code point and its Unicode name."""
    code = ord(character)
    name = unicodedata.name(character, "") or _CONTROL_NAMES.get(code) or (
        "CONTROL CHARACTER" if unicodedata.category(character) == "Cc" else
        "SURROGATE" if unicodedata.category(character) == "Cs" else
        "PRIVATE USE CHARACTER" if unicodedata.category(character) == "Co" else
        "UNASSIGNED CHARACTER")
    return f"U+{code:04X} {name}"


def _mark(character: str) -> str:
    return f"{OPEN_MARK}{char_name(character)}{CLOSE_MARK}"


# Each answer depends on the character alone, and a text repeats its characters.
@functools.lru_cache(maxsize=4096)
def _kind_of(character: str) -> str | None:
    """The kind of character that is marked wherever it is, or ``None``."""
    code = ord(character)
    if 0x20 <= code < 0x7F:  # printable ASCII: the common case
        return None
    if code in LINE_BREAKS:
        return LINE_BREAK
    if code in BIDI_CONTROLS:
        return BIDI
    if code in ZERO_WIDTH or default_ignorable(code):
        return INVISIBLE
    category = unicodedata.category(character)
    if category == "Cc":
        return CONTROL
    if category in ("Cf", "Co", "Cn", "Cs"):
        return INVISIBLE
    if (category in ("Zs", "Zl", "Zp") and character != " ") or code in BLANK_LOOKING:
        return SPACE
    if category == "Nd" and not "0" <= character <= "9":
        return DIGIT
    return None


def _lone_mark(character: str, marks_before: int, base_shown: bool) -> bool:
    """Is this combining mark one that could draw over other characters or rows: an
    enclosing or overlay mark, a second mark on one base, or a mark with no base shown as
    it is (at the start, after a space or after a named mark)?"""
    category = unicodedata.category(character)
    return (category == "Me" or unicodedata.combining(character) == _OVERLAY
            or marks_before >= 1 or not base_shown)


@functools.lru_cache(maxsize=4096)
def script_of(character: str) -> str | None:
    """A letter's script, from the first word of its Unicode name (``LATIN``,
    ``CYRILLIC``, ``GREEK``, ``FULLWIDTH``, ``MATHEMATICAL``…); ``None`` for a non-letter."""
    if character.isascii():
        return "LATIN" if character.isalpha() else None
    if not unicodedata.category(character).startswith("L") or default_ignorable(
            ord(character)):
        return None
    name = unicodedata.name(character, "")
    if not name:
        return "UNKNOWN"
    first = name.split(" ", 1)[0]
    if first.startswith("CJK"):
        return "CJK"
    if first == "MODIFIER":
        return None
    return _SCRIPT_GROUPS.get(first, first)


def _words(text: str) -> Iterator[tuple[int, int]]:
    """The spans of the runs of letters, marks and digits."""
    start = None
    for at, character in enumerate(text):
        if unicodedata.category(character)[0] in "LMN":
            if start is None:
                start = at
        elif start is not None:
            yield start, at
            start = None
    if start is not None:
        yield start, len(text)


def _confusable(text: str) -> tuple[set[int], list[str]]:
    """The positions of the letters of a word's minority scripts (a word that mixes
    scripts), and every script the text's letters are written in, when more than one."""
    marked: set[int] = set()
    everywhere: Counter[str] = Counter()
    for start, end in _words(text):
        scripts: Counter[str] = Counter()
        for at in range(start, end):
            script = script_of(text[at])
            if script is not None:
                scripts[script] += 1
        everywhere.update(scripts)
        if len(scripts) > 1:
            first = next(s for s in map(script_of, text[start:end]) if s is not None)
            # the word's script: the one most of its letters are in (on a tie Latin, else
            # its first letter's): the others are what a person would misread
            top = max(scripts.values())
            leaders = [s for s, n in scripts.items() if n == top]
            main = "LATIN" if "LATIN" in leaders else first if first in leaders else leaders[0]
            marked.update(at for at in range(start, end)
                          if script_of(text[at]) not in (None, main))
    return marked, sorted(everywhere) if len(everywhere) > 1 else []


def visible(text: str) -> Visible:
    """``text`` with every character a person could not see or could misread marked (see
    the module's docstring); ``recovered`` gives ``text`` back from what is shown."""
    if text.isascii() and text.isprintable():  # the common case: nothing to mark
        return Visible(text, {})
    confusable, scripts = _confusable(text)
    shown: list[str] = []
    marked: dict[str, Counter[str]] = {}
    marks_before, base_shown = 0, False  # the combining marks on the base shown last
    for at, character in enumerate(text):
        kind = _kind_of(character) or (MIXED_SCRIPT if at in confusable else None)
        is_mark = not character.isascii() and unicodedata.category(character) in ("Mn", "Me")
        if kind is None and is_mark and _lone_mark(character, marks_before, base_shown):
            kind = COMBINING
        if kind is not None:
            marked.setdefault(kind, Counter())[char_name(character)] += 1
            shown.append(NEWLINE_MARK if character == "\n" else _mark(character))
        elif character in (NEWLINE_MARK, OPEN_MARK):  # the marks' own characters, marked
            shown.append(_mark(character))
        else:
            shown.append(character)
        if is_mark:
            marks_before += 1
        else:  # a base a mark may sit on: a character shown as it is, not a space
            marks_before = 0
            base_shown = (kind is None and character not in (NEWLINE_MARK, OPEN_MARK)
                and not character.isspace())
    return Visible("".join(shown), marked, tuple(scripts))


def shown(text: str) -> str:
    """Only what ``visible`` shows: for a text with no warning of its own (a message)."""
    return visible(text).shown


def shown_lines(text: str) -> str:
    """A text the page lays out in lines itself (indented JSON): each line made visible,
    the line feeds between them kept."""
    return "\n".join(shown(line) for line in text.split("\n"))


def recovered(shown_text: str) -> str:
    """The text ``visible`` showed as ``shown_text``."""
    out: list[str] = []
    at = 0
    while at < len(shown_text):
        character = shown_text[at]
        if character == NEWLINE_MARK:
            out.append("\n")
        elif character == OPEN_MARK:
            end = shown_text.index(CLOSE_MARK, at)
            out.append(chr(int(shown_text[at + 3:end].split(" ", 1)[0], 16)))
            at = end
        else:
            out.append(character)
        at += 1
    return "".join(out)
