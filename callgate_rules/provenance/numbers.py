"""Numbers as people write them, found in a text in one linear pass.

A number is digit groups joined by one separator (``1,000.00``; ``1 000,00``; ``1'000``), or
plain digits with decimals; ", " ends a number ("0042, 1,200.50" is two). It starts where
the character before is not a letter, a digit, ``_``, ``.`` or ``,``, and it ends where the
next is not a letter, a digit or ``_``: never a piece of a longer word or number. Each is
read with both decimal conventions where they differ (``1,000.00`` and ``1.000,00`` are
both 1000).

That is what the regular expression (one line, Python syntax)::

    (?<![\\w.,])[-+]?(?:\\d{1,3}(?:[ ,.'\\u00a0\\u202f]\\d{3})+(?:[.,]\\d+)?
                    |\\d+(?:[.,]\\d+)?)(?![\\w])

finds, searched left to right — which a backtracking engine may run in more than linear
time, and RE2 cannot run at all (no look-around). So RE2 only finds the runs of digits, and
``_stretch_numbers`` decides, per run of digits and separators, which numbers that
expression would have found there: a constant amount of work per run of digits.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

SEPARATORS = " ,.'\u00a0\u202f"  # between digit groups
DECIMAL_POINTS = ".,"
SIGNS = "+-"
_NOT_WRITTEN = {ord(c): None for c in " \t\n\r\x0b\x0c'\u00a0\u202f"}
# Longer than any number a JSON argument can hold (Python reads at most 4,300 digits).
MAX_NUMBER_CHARACTERS = 4_400

_digit_runs: Any = None  # the compiled RE2 pattern, made on first use (RE2 costs import time)


def numbers_in(text: str) -> set[Decimal]:
    """Every number written in ``text`` (already folded), in both readings."""
    runs = _runs_of_digits(text)
    found: set[Decimal] = set()
    first = 0
    while first < len(runs):
        last = first
        while (last + 1 < len(runs) and runs[last + 1][0] == runs[last][1] + 1
               and text[runs[last][1]] in SEPARATORS):
            last += 1
        _stretch_numbers(text, runs[first:last + 1], found)
        first = last + 1
    return found


def _runs_of_digits(text: str) -> list[tuple[int, int]]:
    global _digit_runs
    if _digit_runs is None:
        import re2  # type: ignore[import-untyped]  # google-re2: linear time

        _digit_runs = re2.compile(r"\p{Nd}+")
    if text.isascii():  # as bytes, the offsets are the same and RE2 skips decoding them
        return [match.span() for match in _digit_runs.finditer(text.encode("ascii"))]
    return [match.span() for match in _digit_runs.finditer(text)]


def _is_word(character: str) -> bool:
    """``\\w`` of Python's regular expressions: a letter, a digit, a number or ``_``."""
    return character.isalnum() or character == "_"


def _may_start_at(text: str, position: int) -> bool:
    return position == 0 or not (_is_word(text[position - 1]) or text[position - 1] in ".,")


def _stretch_numbers(text: str, runs: list[tuple[int, int]], found: set[Decimal]) -> None:
    """The numbers in one stretch of digit runs joined by single separators, as the
    expression finds them: try each place a number may start, left to right; after a
    number, go on after it."""
    first = runs[0][0]
    next_run = 1
    end = _number_end(text, runs, 0)
    if end is not None:
        signed = first > 0 and text[first - 1] in SIGNS
        if signed and _may_start_at(text, first - 1):
            _add(text[first - 1:runs[end][1]], found)
            next_run = end + 1
        elif signed or _may_start_at(text, first):  # after a sign, a number may start
            _add(text[first:runs[end][1]], found)
            next_run = end + 1
    index = next_run
    while index < len(runs):
        start = runs[index][0]
        # the separator before this run is the character a number would start after
        end = (_number_end(text, runs, index) if text[start - 1] not in DECIMAL_POINTS
            else None)
        if end is None:
            index += 1
        else:
            _add(text[start:runs[end][1]], found)
            index = end + 1


def _number_end(text: str, runs: list[tuple[int, int]], index: int) -> int | None:
    """The last run of the number starting at run ``index``, or None: digit groups
    (``1,000,000``) before plain digits, the longest first, each with its decimals first."""
    last = len(runs) - 1

    def ends_here(run: int) -> bool:  # (?![\w]) after the run: a separator never is \w
        stop = runs[run][1]
        return run < last or stop == len(text) or not _is_word(text[stop])

    def with_decimals(run: int) -> int | None:  # (?:[.,]\d+)? then (?![\w])
        if run < last and text[runs[run][1]] in DECIMAL_POINTS and ends_here(run + 1):
            return run + 1
        return run if ends_here(run) else None

    if runs[index][1] - runs[index][0] <= 3:  # \d{1,3}(?:[sep]\d{3})+
        groups = 0
        while index + groups < last and _width(runs[index + groups + 1]) == 3:
            groups += 1
        for count in range(groups, 0, -1):
            end = with_decimals(index + count)
            if end is not None:
                return end
    return with_decimals(index)  # \d+(?:[.,]\d+)?


def _width(run: tuple[int, int]) -> int:
    return run[1] - run[0]


def _add(written: str, found: set[Decimal]) -> None:
    if len(written) <= MAX_NUMBER_CHARACTERS:
        found.update(readings(written.translate(_NOT_WRITTEN)))


def readings(raw: str) -> Iterator[Decimal]:
    """``raw`` read with both decimal conventions (``1,000.5`` and ``1.000,5``)."""
    for option in {raw.replace(",", ""), raw.replace(".", "").replace(",", ".")}:
        try:
            yield Decimal(option)
        except InvalidOperation:
            continue


def as_decimal(value: int | float) -> Decimal:
    """An argument's number exactly as written in JSON (a float by its shortest repr)."""
    return Decimal(value) if isinstance(value, int) else Decimal(str(value))


def significant_digits(number: Decimal) -> int:
    """Digits as the number is written plainly: 1000 → 4, 250.5 → 4, 0.05 → 1."""
    plain = format(abs(number).normalize(), "f").replace(".", "").lstrip("0")
    return len(plain)
