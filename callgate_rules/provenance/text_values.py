"""Values inside text, and the ordinary spellings of a value.

A free-text argument (a payment subject, a mail body) is more than one value: the URLs,
e-mail addresses, IBANs, dates, numbers and distinctive words written inside it each came
from somewhere. ``parts_of`` finds them; each part has a *kind* and a *canonical* spelling,
so that the same value written differently compares equal:

- dates: ``2025-01-11``, ``January 11th 2025``, ``11 Jan 2025``, ``11.01.2025`` all read
  ``date:2025-01-11``; ``01/11/2025`` is ambiguous and reads both ways;
- numbers: ``1.000,00``, ``1,000.00`` and ``1000`` are ``number:1000`` (both decimal
  conventions, as ``numbers``);
- IBANs: spaced or not, any case: ``iban:DE89370400440532013000``. Spaced in groups of
  four, letters only in the first group (``MT84 MALT 0110 0001 2345 MTLC`` is not read so);
  spaced otherwise (``US 133 000 000 121 212 121 212``), as the matcher finds it: with a
  space anywhere, the checksum choosing where it ends (``_spaced_ibans``);
- e-mail addresses in lower case; URLs without scheme, ``www.``, case or trailing ``/``;
- words: a word of at least four letters that is not common in the languages listed in
  ``common_words``, folded (``word:spotify``); a capitalised run of them is also a *name*
  (``name:john smith``);
- tokens: a run of 6 to 40 letters and digits holding both (``token:1a7b3d``);
- in an attacker's spellings (``spellings``): defanged and spelled-out links and addresses
  (``hxxps://bit[.]ly/x`` is ``url:bit.ly/x``), read before the plain forms; a quoted
  string's escapes (``…/link\\nMore``) read as spaces. Tokens written across separators
  (``1-a-7-b-3-d``) are found by ``origins``, against the tokens the conversation holds;
- numbers and tokens spelled in words (``in_words``): ``twelve hundred`` is
  ``number:1200``, ``one a seven b three d`` is ``token:1a7b3d``, read after the dates.

Every pattern that could backtrack is run by RE2 (linear time, no backtracking); words,
the commonest parts, by Python's engine with a pattern that cannot backtrack (its C loop
costs far less per match than the RE2 binding's). A text longer than ``MAX_TEXT`` is read
only up to there, so the cost per text is bounded and linear: about a second per megabyte
of text dense with parts (tests/provenance/test_origins.py times two megabytes). The same reading is
applied to every piece of the conversation, once (cached with the conversation), so a part
is found wherever any of its spellings is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from itertools import accumulate
from typing import Any

from callgate_rules.provenance.common_words import COMMON_WORDS
from callgate_rules.provenance.in_words import InWords, read_in_words
from callgate_rules.provenance.matching import fold
from callgate_rules.provenance.numbers import (
    as_decimal,
    numbers_in,
    significant_digits,
)
from callgate_rules.provenance.spellings import TOKEN, defanged_in, tokens_in

MAX_TEXT = 200_000  # characters of one text read for parts
MIN_WORD = 4  # letters of a word part
MIN_NUMBER_DIGITS = 3  # significant digits of a number part
_SPACED_WINDOW = 70  # characters that hold an IBAN with a space between every two

URL, EMAIL, IBAN, DATE, NUMBER, WORD, NAME = (
    "url", "email", "iban", "date", "number", "word", "name")

MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
    # German, French, Spanish, Italian month names that differ from the English ones
    "januar": 1, "februar": 2, "märz": 3, "mai": 5, "juni": 6, "juli": 7, "oktober": 10,
    "dezember": 12, "janvier": 1, "février": 2, "mars": 3, "avril": 4, "juin": 6,
    "juillet": 7, "août": 8, "septembre": 9, "octobre": 10, "novembre": 11,
    "décembre": 12, "enero": 1, "febrero": 2, "marzo": 3, "abril": 4, "mayo": 5,
    "junio": 6, "julio": 7, "agosto": 8, "septiembre": 9, "octubre": 10, "noviembre": 11,
    "diciembre": 12, "gennaio": 1, "febbraio": 2, "aprile": 4, "maggio": 5, "giugno": 6,
    "luglio": 7, "settembre": 9, "ottobre": 10, "dicembre": 12,
}
_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th|er|\.)?"
_PATTERNS = {
    # a backslash ends a URL: in a quoted YAML or JSON string "…/link\n" is the link, then
    # an escape
    URL: r"(?:https?://|www\.)[^\s<>\"'`()\[\]{}\\]+",
    EMAIL: r"[\p{L}\p{N}._%+\-]+@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+)*\.\p{L}{2,}",
    # spaced: letters only in the first group (the bank code), so a word after it is not taken
    IBAN: r"\b[a-z]{2}\d{2}(?:[a-z0-9]{11,30}|(?: [a-z0-9]{4})(?: \d{4}){1,6}(?: \d{1,4})?)\b",
    # any spelling the matcher finds an IBAN in: a space anywhere (``_spaced_ibans``)
    "spaced_iban": r"\b[a-z] ?[a-z] ?\d ?\d(?: ?[a-z0-9]){11,30}\b",
    "iso": r"\b(\d{4})-(\d{1,2})-(\d{1,2})(?:\b|t)",
    "month_first": r"\b" + _MONTH + r"\s+" + _DAY + r",?\s+(\d{4})\b",
    "day_first": r"\b" + _DAY + r"\s+(?:of\s+|de\s+)?" + _MONTH + r",?\s+(?:de\s+)?(\d{4})\b",
    "dotted": r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b",
    "slashed": r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b",
}
# Words are found with Python's own engine (many matches: its C loop costs far less per
# match than the RE2 binding's). The pattern cannot backtrack: each repetition must begin
# with a separator that no letter run can take, so it runs in linear time.
_WORD = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*")
_IBAN_START = re.compile(r"[a-z] ?[a-z] ?\d ?\d")  # a group that can begin a spaced IBAN


@dataclass(frozen=True)
class TextPart:
    """One value inside a text: its kind, as written, and its canonical spellings."""

    kind: str
    written: str
    canonical: tuple[str, ...]

    def as_variable(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.written, "value": self.canonical[0]}


@lru_cache(maxsize=1)
def _compiled() -> dict[str, Any]:
    import re2  # type: ignore[import-untyped]  # google-re2: linear time

    options = re2.Options()
    options.max_mem = 64 << 20
    return {name: re2.compile(pattern, options) for name, pattern in _PATTERNS.items()}


def _date(year: int, month: int, day: int) -> str | None:
    if 1 <= month <= 12 and 1 <= day <= 31 and 1000 <= year <= 9999:
        return f"date:{year:04d}-{month:02d}-{day:02d}"
    return None


def _number_key(number: Decimal) -> str:
    return "number:" + format(number.normalize(), "f")


def parts_of(text: str) -> tuple[TextPart, ...]:
    """The values written inside ``text``: URLs, e-mail addresses, IBANs, dates, numbers
    (of at least three significant digits), names and distinctive words."""
    if not isinstance(text, str) or not text:
        return ()
    if len(text) <= _REMEMBERED:  # argument values come back with every proposal
        return _remembered_parts(text)
    return _parts(text[:MAX_TEXT])


_REMEMBERED = 4096  # characters of a text whose parts are kept (at most 4,096 texts)


@lru_cache(maxsize=4096)
def _remembered_parts(text: str) -> tuple[TextPart, ...]:
    return _parts(text)


def _parts(text: str) -> tuple[TextPart, ...]:
    patterns = _compiled()
    folded = _without_escapes(fold(text))
    parts: list[TextPart] = []
    taken = bytearray(len(folded))  # characters inside a part already found
    spans: list[tuple[int, int]] = []

    def claim(start: int, end: int) -> bool:
        if taken.find(1, start, end) >= 0:
            return False
        taken[start:end] = b"\x01" * (end - start)
        spans.append((start, end))
        return True

    for defanged in defanged_in(folded):  # hxxps://bit[.]ly/x, name [at] example dot com
        if claim(defanged.start, defanged.end):
            parts.append(TextPart(defanged.kind, folded[defanged.start:defanged.end],
                                  (defanged.canonical,)))
    for match in patterns[URL].finditer(folded):
        written = match.group(0).rstrip(".,;:!?")
        if claim(match.start(), match.start() + len(written)):
            bare = written.split("://", 1)[-1].removeprefix("www.").rstrip("/")
            parts.append(TextPart(URL, written, (f"url:{bare}",)))
    for match in patterns[EMAIL].finditer(folded):
        if claim(*match.span()):
            parts.append(TextPart(EMAIL, match.group(0), (f"email:{match.group(0)}",)))
    for match in patterns[IBAN].finditer(folded):
        compact = match.group(0).replace(" ", "").upper()
        if _iban_shaped(compact) and claim(*match.span()):
            parts.append(TextPart(IBAN, match.group(0), (f"iban:{compact}",)))
    _spaced_ibans(folded, patterns["spaced_iban"], taken, claim, parts)
    _dates(folded, patterns, claim, parts)
    for reading in read_in_words(folded):  # twelve hundred, one a seven b three d
        part = _in_words_part(reading, folded)
        if part is not None and claim(reading.start, reading.end):
            parts.append(part)
    masked = folded
    if spans:  # the parts found so far blanked out, so numbers and words skip them
        pieces, at = [], 0
        for start, end in sorted(spans):
            pieces += [folded[at:start], " " * (end - start)]
            at = end
        masked = "".join([*pieces, folded[at:]])
    parts.extend(TextPart(TOKEN, token, (f"{TOKEN}:{token}",)) for token in tokens_in(masked))
    for number in sorted(numbers_in(masked)):
        if significant_digits(number) >= MIN_NUMBER_DIGITS:
            parts.append(TextPart(NUMBER, format(number, "f"), (_number_key(number),)))
    _words(text, masked, parts)
    return tuple(parts)


def _iban_shaped(compact: str) -> bool:
    return 15 <= len(compact) <= 34 and any(c.isdigit() for c in compact[4:])


def iban_checksum_holds(compact: str) -> bool:
    """ISO 13616: the IBAN with its first four characters moved to the end, letters as
    10 to 35, is 1 modulo 97."""
    digits = (compact[4:] + compact[:4]).translate(_LETTERS_AS_NUMBERS)
    return digits.isdigit() and digits.isascii() and int(digits) % 97 == 1


_LETTERS_AS_NUMBERS = str.maketrans(
    {letter: str(10 + n) for case in ("abcdefghijklmnopqrstuvwxyz",
                                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
     for n, letter in enumerate(case)})


def _spaced_ibans(folded: str, pattern: Any, taken: bytearray, claim: Any,
                  parts: list[TextPart]) -> None:
    """IBANs spaced otherwise than in groups of four (``US 133 000 000 121 212 121 212``).

    The matcher ignores white space (``matching.squash``), so it finds an IBAN however it
    is spaced, beginning at any group; each such spelling must count, or a bill holding a
    second IBAN spaced unevenly still "has one IBAN". So an IBAN is read from every group
    that can begin one (two letters, two digits, then 11 to 30 letters and digits), even
    inside the reading of another. Where the groups could end it at several places, the
    checksum decides: the longest reading whose checksum holds is an IBAN for certain (its
    digits are no numbers); else the longest that ends in a group with a digit, before the
    next group that can begin one, is counted as an IBAN, and its digits are read as
    numbers and dates too (``on 12 03 2024 10 30 …`` may be either)."""
    before = bytes(taken)  # what the readings before this one took
    at = 0
    for match in pattern.finditer(folded):  # one pass over the text; each group of the
        at = max(at, match.start())  # match is tried again, in a window of the text
        while at < match.end():
            if before[at]:  # inside an IBAN in groups of four, a link, an address
                free = before.find(0, at)
                at = free if free >= 0 else len(folded)
                continue
            local = pattern.search(folded[at:at + _SPACED_WINDOW])
            if local is None:
                break
            start, end = at + local.start(), at + local.end()
            at = start + 1
            if start and folded[start - 1].isalnum():  # not where a group begins
                continue
            cut = before.find(1, start, end)
            written = folded[start:end if cut < 0 else cut].rstrip()
            reading = _spaced_reading(written)
            if reading is not None:
                length, certain = reading
                compact = written[:length].replace(" ", "").upper()
                if certain:
                    claim(start, start + length)  # unless another reading holds a part
                parts.append(TextPart(IBAN, written[:length], (f"iban:{compact}",)))


def _spaced_reading(written: str) -> tuple[int, bool] | None:
    """Where the IBAN written at the start of ``written`` ends (a group's end), and whether
    its checksum holds: the longest reading whose checksum holds, else the longest that
    ends in a group holding a digit and before the next group that can begin an IBAN."""
    groups = written.split(" ")
    ends = list(accumulate(len(group) + 1 for group in groups))  # each group's end, + 1
    compacts = list(accumulate(groups))
    shaped = [n for n, compact in enumerate(compacts) if _iban_shaped(compact)]
    for n in reversed(shaped):
        if iban_checksum_holds(compacts[n]):
            return ends[n] - 1, True
    next_start = next((n for n in range(1, len(groups))
                       if _IBAN_START.match(written, ends[n - 1])), len(groups))
    for n in reversed(shaped):
        if n < next_start and any(c.isdigit() for c in groups[n]):
            return ends[n] - 1, False
    return None


def _in_words_part(reading: InWords, folded: str) -> TextPart | None:
    """A number (of three significant digits or more) or a token spelled in words, as the
    part its plain spelling would be (``in_words``)."""
    written = folded[reading.start:reading.end]
    number = reading.number()
    if number is None:
        return TextPart(TOKEN, written, tuple(f"{TOKEN}:{value}" for value in reading.values()))
    if significant_digits(number) < MIN_NUMBER_DIGITS:
        return None
    return TextPart(NUMBER, written, (_number_key(number),))


_ESCAPES = ("\\n", "\\r", "\\t")


def _without_escapes(folded: str) -> str:
    """A quoted YAML or JSON string's escapes (``\\n``, ``\\r``, ``\\t``) as spaces, of the
    same length (the parts' places stay those of the folded text): ``…/link\\nMore`` holds the
    link and the word ``more``."""
    if "\\" not in folded:
        return folded
    for escape in _ESCAPES:
        folded = folded.replace(escape, "  ")
    return folded


def _dates(folded: str, patterns: dict[str, Any], claim: Any, parts: list[TextPart]) -> None:
    for match in patterns["iso"].finditer(folded):
        found = _date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        if found and claim(match.start(), match.end(3)):
            parts.append(TextPart(DATE, match.group(0).rstrip("t"), (found,)))
    for name, order in (("month_first", (3, 1, 2)), ("day_first", (3, 2, 1))):
        for match in patterns[name].finditer(folded):
            year, month, day = (match.group(i) for i in order)
            found = _date(int(year), MONTHS[month], int(day))
            if found and claim(*match.span()):
                parts.append(TextPart(DATE, match.group(0), (found,)))
    for match in patterns["dotted"].finditer(folded):  # 11.01.2025: day first
        found = _date(int(match.group(3)), int(match.group(2)), int(match.group(1)))
        if found and claim(*match.span()):
            parts.append(TextPart(DATE, match.group(0), (found,)))
    for match in patterns["slashed"].finditer(folded):  # 01/11/2025: either way
        first, second, year = (int(match.group(i)) for i in (1, 2, 3))
        readings = tuple(dict.fromkeys(
            d for d in (_date(year, first, second), _date(year, second, first)) if d))
        if readings and claim(*match.span()):
            parts.append(TextPart(DATE, match.group(0), readings))


def _words(text: str, masked: str, parts: list[TextPart]) -> None:
    """Distinctive words, and runs of capitalised ones as names (read in the original
    text for the capitals, in the folded one for the spelling)."""
    seen: set[str] = set()
    for word in _WORD.findall(masked):
        if len(word) >= MIN_WORD and word not in COMMON_WORDS and word not in seen:
            seen.add(word)
            parts.append(TextPart(WORD, word, (f"word:{word}",)))
    run: list[str] = []
    for word in _WORD.findall(text[:MAX_TEXT]):
        if word[0].isupper() and word[1:].islower() and fold(word) not in COMMON_WORDS:
            run.append(word)
            continue
        _name(run, parts, seen)
        run = []
    _name(run, parts, seen)


def _name(run: list[str], parts: list[TextPart], seen: set[str]) -> None:
    if len(run) >= 2:
        name = fold(" ".join(run))
        if name not in seen:
            seen.add(name)
            parts.append(TextPart(NAME, " ".join(run), (f"name:{name}",)))


def canonical_of_value(value: Any) -> tuple[str, ...]:
    """The canonical spellings of a whole argument value: a number as a number, a string as
    the parts it consists of when it is one part (a date, an IBAN...), else none."""
    if isinstance(value, bool) or value is None:
        return ()
    if isinstance(value, int | float):
        number = as_decimal(value)
        return (_number_key(number),) if number.is_finite() else ()
    if isinstance(value, str):
        found = parts_of(value)
        whole = [part for part in found if part.kind not in (WORD, NAME)]
        if (len(whole) == 1 and
                fold(whole[0].written).rstrip("/") == fold(value).rstrip(".,;:!?/")):
            return whole[0].canonical
    return ()
