"""Numbers and tokens of letters and digits spelled in words: ``twelve hundred`` is 1200,
``one a seven b three d`` the token ``1a7b3d``, ``nine eight seven six`` the number 9876.

An attacker who has read a policy writes a secret read in a channel as ``one a seven b
three d`` and an amount as ``twelve hundred`` so that neither matches anything. This module
reads such words back as the value they stand for, in one pass over a folded text (lower
case, one space between words: ``matching.fold``). The grammar, and nothing else:

- **Elements.** Whole words only (a letter or a digit on either side ends nothing):
  the digit words ``zero``, ``oh`` (0, in digit runs only) and ``one`` … ``nine``;
  ``ten`` … ``nineteen``; ``twenty`` … ``ninety``; the scales ``hundred``, ``thousand``,
  ``million``, ``billion``, ``trillion``; ``and``; a single letter (``a`` … ``z``) or a
  NATO-alphabet word (``alpha`` … ``zulu``, ``juliet``/``juliett``, ``whiskey``/``whisky``,
  ``xray``/``x-ray``) for its letter; a numeral (up to 15 digits, optionally a point and up
  to 6 decimals). Two elements are *adjacent* when 1 to 3 characters that are neither
  letters nor digits (space, ``-``, ``,``, ``.``, ``/`` …) separate them; anything else
  ends what is being read.
- **Spelled runs** (digit by digit). Adjacent elements that each stand for one character —
  a digit word, a single-digit numeral, a letter or a NATO word — with at least one of them
  a word (``1 a 7 b`` is the separators' business, ``spellings``). A run holding letters
  and digits of 6 to 40 characters is a *token* (``one a seven b three d`` → ``1a7b3d``,
  ``golf seven delta nine alpha two`` → ``g7d9a2``); otherwise each stretch of two digits
  or more in it, with at least one digit word, is a *number* (``nine eight seven six`` →
  9876, ``four oh four`` → 404; leading zeros are kept in the digits, and dropped in the
  number, as ``0421`` is 421). Letters alone never make a value (``alpha bravo``).
- **Cardinals** (English, short scale). ``[unit|teen|tens[-unit]] [hundred]`` makes a
  group below 10,000 (``twelve hundred`` 1200, ``twenty-five hundred`` 2500, ``three
  hundred and five`` 305); a group followed by a scale multiplies, scales strictly
  descending (``two million five hundred thousand`` 2,500,000; ``one thousand two
  hundred`` 1200); ``and`` only after ``hundred`` or a scale. A numeral followed by a scale
  is multiplied by it (``1.2 thousand`` 1200, ``12 hundred`` 1200). Two elements at least;
  an element the grammar does not allow where it stands ends the number and may begin the
  next (``one two`` is no cardinal). Cardinals are read only in a run that holds
  ``hundred`` or a scale: below a hundred a number is never evidence (``forty-two`` alone,
  ``nineteen eighty-four`` are not read).

What is not read: ``a hundred``, ``double five``, years and times said in pairs
(``nineteen eighty-four``, ``twelve thirty``), ordinals (``twenty-first``), fractions
(``two and a half``), words of other languages, and letters spelled as words other than
the NATO alphabet (``bee``, ``see``).

Cost: one scan by Python's regular expression engine with a pattern that cannot
backtrack (every repetition begins with a separator no element can take, and an element is
a whole word); then, only for a run that holds a digit word, a NATO word or a scale, a
constant amount of work per element: each element's character joined into one string per
run, whose spelled runs and stretches of digits regular expressions find (in C), and the
cardinal grammar, a state machine of a few comparisons per element, where a scale is
written. Linear in the text (tests/provenance/test_spelled_in_words.py counts the work per
element); a stretch of more than 40 digits is no number. A text is read up to
``MAX_TEXT`` characters, as ``text_values`` reads it.
"""

from __future__ import annotations

import operator
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matching reads each piece's words with this module
    from callgate_rules.provenance.matching import ConversationIndex

MAX_TEXT = 200_000  # characters of a text read (text_values reads as many)
MIN_TOKEN, MAX_RUN = 6, 40  # characters of a token; of a spelled run kept
NUMBER, TOKEN = "number", "token"

DIGITS = {"zero": "0", "oh": "0", "one": "1", "two": "2", "three": "3", "four": "4",
          "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9"}
TEENS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
         "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
        "eighty": 80, "ninety": 90}
SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
NATO = {"alpha": "a", "alfa": "a", "bravo": "b", "charlie": "c", "delta": "d", "echo": "e",
        "foxtrot": "f", "golf": "g", "hotel": "h", "india": "i", "juliet": "j",
        "juliett": "j", "kilo": "k", "lima": "l", "mike": "m", "november": "n",
        "oscar": "o", "papa": "p", "quebec": "q", "romeo": "r", "sierra": "s", "tango": "t",
        "uniform": "u", "victor": "v", "whiskey": "w", "whisky": "w", "xray": "x",
        "x-ray": "x", "yankee": "y", "zulu": "z"}

_WORDS = sorted([*DIGITS, *TEENS, *TENS, *SCALES, *NATO, "hundred", "and"],
                key=len, reverse=True)
_ELEMENT = (r"(?<![^\W_])(?:" + "|".join(map(re.escape, _WORDS))
            + r"|[a-z]|\d{1,15}(?:\.\d{1,6})?)(?![^\W_])")
# a run of elements, each after 1 to 3 characters that are neither letters nor digits: no
# element begins with such a character, so the repetition cannot backtrack into a run
_RUN = re.compile(_ELEMENT + r"(?:[\W_]{1,3}" + _ELEMENT + ")*")
_ONE = re.compile(_ELEMENT)

# what an element is to the cardinal grammar
_UNIT, _TEEN, _TENS, _HUNDRED, _SCALE, _AND, _OTHER = range(7)  # a numeral is a unit
_FRESH = (_OTHER, _HUNDRED, _AND, _SCALE)  # where a unit, a teen or a tens may come next
_NONE = 10**15  # above every scale: no scale taken yet


def _table() -> dict[str, tuple[str | None, int, int]]:
    """Each word element → (the character it stands for in a spelled run, its kind in a
    cardinal, its value there)."""
    table: dict[str, tuple[str | None, int, int]] = {}
    for word, digit in DIGITS.items():
        table[word] = (digit, _UNIT if word not in ("zero", "oh") else _OTHER, int(digit))
    table.update({word: (None, _TEEN, value) for word, value in TEENS.items()})
    table.update({word: (None, _TENS, value) for word, value in TENS.items()})
    table.update({word: (None, _SCALE, value) for word, value in SCALES.items()})
    table.update({word: (letter, _OTHER, 0) for word, letter in NATO.items()})
    table["hundred"], table["and"] = (None, _HUNDRED, 100), (None, _AND, 0)
    for letter in "abcdefghijklmnopqrstuvwxyz":
        table[letter] = (letter, _OTHER, 0)
    for digit in "0123456789":
        table[digit] = (digit, _UNIT, int(digit))
    return table


_TABLE = _table()
_CHARACTERS = {word: entry[0] for word, entry in _TABLE.items() if entry[0] is not None}
# a run that holds neither a digit word, a NATO word nor a scale reads as nothing (letters
# and numerals as themselves are the separators' business, and numbers)
_WORTH_READING = re.compile("|".join((*DIGITS, *NATO, *SCALES, "hundred")))
# a cardinal is read only in a run with a scale: below a hundred a number is no evidence
_HAS_SCALE = re.compile("|".join(("hundred", *SCALES)))
_span = operator.methodcaller("span")


@dataclass(frozen=True)
class InWords:
    """A number or a token read from words: where it is written in the folded text, and
    its value (a number's digits as ``format(number, "f")`` gives them; a digit run's
    digits as written, leading zeros kept; a token's characters)."""

    kind: str  # "number" or "token"
    start: int
    end: int
    value: str
    # a token's other readings: without a first or last "a" or "i" that may be English
    # ("the key: one a seven b three d, i think" spells 1a7b3d)
    others: tuple[str, ...] = ()

    def values(self) -> tuple[str, ...]:
        return (self.value, *self.others)

    def number(self) -> Decimal | None:
        return Decimal(self.value) if self.kind == NUMBER else None


# an element as read: (its word, where it starts, where it ends), a plain tuple (one per
# element found, so the cheapest to make)
_Element = tuple[str, int, int]


def read_in_words(folded: str) -> list[InWords]:
    """The numbers and tokens spelled in words in a folded text, in the order written
    (see the module's docstring for the grammar)."""
    found: list[InWords] = []
    for run in _RUN.finditer(folded, 0, MAX_TEXT):
        text = run.group(0)
        if len(text) < 3 or _WORTH_READING.search(text) is None:
            continue  # one short element ("a", "7"); letters and numerals only
        base = run.start()
        elements = [(text[start:end], base + start, base + end)
                    for start, end in map(_span, _ONE.finditer(text))]
        found.extend(_spelled_runs(elements))
        if _HAS_SCALE.search(text) is not None:  # below a hundred, a number is no evidence
            found.extend(_cardinals(elements))
    found.sort(key=lambda reading: reading.start)
    return found


_NO_CHARACTER = "\x00"  # an element that stands for no character (a scale, "and", "twelve")
_SPELLED = re.compile("[^\x00]{2,}")  # two elements or more that each stand for a character
_STRETCH = re.compile(r"\d{2,}")


def _spelled_runs(elements: list[_Element]) -> list[InWords]:
    """The spelled runs among a run's elements. Each element stands for one character or
    none, so the run's characters, joined, are read by regular expressions (in C): a
    stretch of characters is a run; a character's offset is its element's number."""
    words = [element[0] for element in elements]
    line = "".join([_CHARACTERS.get(word) or _NO_CHARACTER for word in words])
    kinds = "".join(["w" if len(word) > 1 else "c" for word in words])  # a word; a character
    found: list[InWords] = []
    for spelled in _SPELLED.finditer(line):
        first, last = spelled.start(), spelled.end()
        if kinds.find("w", first, last) < 0:
            continue  # "1 a 7 b": the separators' business (spellings)
        characters = spelled.group(0)
        if (MIN_TOKEN <= len(characters) <= MAX_RUN and not characters.isdigit()
                and not characters.isalpha()):
            found.append(InWords(TOKEN, elements[first][1], elements[last - 1][2], characters,
                                 _without_english(characters, kinds[first], kinds[last - 1])))
            continue
        for stretch in _STRETCH.finditer(characters):
            begin, end = first + stretch.start(), first + stretch.end()
            if end - begin <= MAX_RUN and kinds.find("w", begin, end) >= 0:
                found.append(InWords(NUMBER, elements[begin][1], elements[end - 1][2],
                                     stretch.group(0)))
    return found


def _without_english(token: str, first: str, last: str) -> tuple[str, ...]:
    """The token without a first or last letter that is an English word ("a", "i")
    written as itself (``first``, ``last``: "c" for an element written as a character), or
    without both, where what is left is a token still."""
    strip_first = first == "c" and token[0] in _ENGLISH_LETTERS
    strip_last = last == "c" and token[-1] in _ENGLISH_LETTERS
    others = ([token[1:]] if strip_first else []) + ([token[:-1]] if strip_last else [])
    others += [token[1:-1]] if strip_first and strip_last else []
    return tuple(other for other in others if _is_token(other))


_ENGLISH_LETTERS = ("a", "i")  # letters that are words of their own


def _is_token(characters: str) -> bool:
    return (MIN_TOKEN <= len(characters) <= MAX_RUN and not characters.isalpha()
            and not characters.isdigit())


class _Cardinal:
    """A cardinal number being read, element by element (see the module's docstring)."""

    def __init__(self) -> None:
        self.total: int | Decimal = 0
        self.group: int | Decimal = 0
        self.last = _OTHER  # the last element taken; _OTHER: none yet
        self.scale = _NONE  # the smallest scale taken so far: the next must be smaller
        self.hundred = False  # the group being read has its hundred
        self.scaled = False  # a hundred or a scale taken (a numeral needs one)
        self.numeral = False  # a numeral begins it
        self.taken = 0
        self.start = self.end = 0

    def takes(self, kind: int, value: int, numeral: bool) -> bool:
        last = self.last
        if numeral:  # a numeral only begins a number
            return last == _OTHER and not self.taken
        if kind == _UNIT:
            return last in _FRESH or last == _TENS
        if kind in (_TEEN, _TENS):
            return last in _FRESH
        if kind == _HUNDRED:
            return last in (_UNIT, _TEEN, _TENS) and not self.hundred and 0 < self.group < 100
        if kind == _SCALE:
            return (last in (_UNIT, _TEEN, _TENS, _HUNDRED) and self.group > 0
                    and value < self.scale)
        return kind == _AND and last in (_HUNDRED, _SCALE)

    def take(self, kind: int, value: int | Decimal, element: _Element) -> None:
        if not self.taken:
            self.start = element[1]
            self.numeral = element[0][0].isdigit()
        if kind in (_UNIT, _TEEN, _TENS):
            self.group += value
        elif kind == _HUNDRED:
            self.group *= 100
            self.hundred = self.scaled = True
        elif kind == _SCALE:
            self.total += self.group * value
            self.group, self.hundred, self.scale, self.scaled = 0, False, int(value), True
        if kind != _AND:  # a last "and" is not part of the number
            self.end = element[2]
            self.taken += 1
        self.last = kind

    def reading(self) -> InWords | None:
        if self.taken < 2 or (self.numeral and not self.scaled):
            return None  # one word, or a numeral no scale follows: no number in words
        value = Decimal(self.total + self.group).normalize()
        return InWords(NUMBER, self.start, self.end, format(value, "f"))


def _cardinals(elements: list[_Element]) -> list[InWords]:
    found: list[InWords] = []
    cardinal = _Cardinal()
    for element in elements:
        word = element[0]
        entry = _TABLE.get(word)
        kind: int
        value: int | Decimal
        if entry is None:  # a numeral of two digits or more, or with decimals
            kind, value = _UNIT, Decimal(word)
        else:
            kind, value = entry[1], entry[2]
        if cardinal.takes(kind, int(value), entry is None or word.isdigit()):
            cardinal.take(kind, value, element)
            continue
        reading = cardinal.reading()
        if reading is not None:
            found.append(reading)
        cardinal = _Cardinal()
        if kind in (_UNIT, _TEEN, _TENS):
            cardinal.take(kind, value, element)
    reading = cardinal.reading()
    if reading is not None:
        found.append(reading)
    return found


def transliterated(folded: str) -> tuple[str, Callable[[int], int]] | None:
    """``folded`` with each word of a spelled run that holds a digit written as the
    character it stands for (``key: zulu one a seven`` → ``key: z 1 a 7``), and the map from
    an offset of that text to the offset in ``folded`` (of an element's start or end, or of
    a character outside the words changed); None when nothing is written in words."""
    pieces: list[str] = []
    anchors: list[tuple[int, int]] = [(0, 0)]  # (offset in the new text, in folded)
    at = 0  # in folded, how far the pieces reach
    for run in _RUN.finditer(folded, 0, MAX_TEXT):
        text = run.group(0)
        if len(text) < 3 or _WORTH_READING.search(text) is None:
            continue
        base = run.start()
        for match in _ONE.finditer(text):
            word = match.group(0)
            entry = _TABLE.get(word)
            if len(word) < 2 or entry is None or entry[0] is None:
                continue  # a letter or a numeral as itself, or no character
            start, end = base + match.start(), base + match.end()
            pieces += [folded[at:start], entry[0]]
            new_start = anchors[-1][0] + (start - anchors[-1][1])
            anchors += [(new_start, start), (new_start + 1, end)]
            at = end
    if not pieces:
        return None
    pieces.append(folded[at:])
    starts = [new for new, _ in anchors]

    def back(offset: int) -> int:
        new, old = anchors[bisect_right(starts, offset) - 1]
        return old + offset - new

    return "".join(pieces), back


def whole_in_words(folded: str) -> InWords | None:
    """The number or token a whole value spells in words (``twelve hundred``), or None:
    one reading from its start to its end (a final ``.,;:!?`` aside)."""
    if len(folded) > _LONGEST_WHOLE:
        return None
    readings = read_in_words(folded)
    if (len(readings) == 1 and readings[0].start == 0
            and readings[0].end == len(folded.rstrip(".,;:!?"))):
        return readings[0]
    return None


_LONGEST_WHOLE = 2048  # characters of a whole value read as one number or token in words


class WordsIndex:
    """Where a conversation spells values in words: each value's plain text (a token's
    characters, a number's digits) and each number → the pieces of the conversation's index
    (``matching.ConversationIndex``) that spell it, in the index's order (by group, then by
    place), so the first one found per group is the first place."""

    def __init__(self, index: ConversationIndex) -> None:
        self.index = index
        self.texts: dict[str, list[int]] = {}
        self.numbers: dict[Decimal, list[int]] = {}
        for piece, normal in enumerate(index.pieces):
            for reading in normal.in_words():
                for value in reading.values():
                    _add(self.texts, value, piece)
                number = reading.number()
                if number is not None:
                    _add(self.numbers, number, piece)

    def places_of_text(self, squashed: str,
                       skip: Callable[[int], bool] | None = None) -> dict[int, int]:
        """Group → the first place where a piece spells ``squashed`` (a token, digits) in
        words (and that ``skip`` does not rule out: an echo)."""
        return self._first_places(self.texts.get(squashed, ()), skip)

    def places_of_number(self, number: Decimal,
                         skip: Callable[[int], bool] | None = None) -> dict[int, int]:
        return self._first_places(self.numbers.get(number, ()) if number.is_finite() else (),
                                  skip)

    def _first_places(self, pieces: Sequence[int],
                      skip: Callable[[int], bool] | None) -> dict[int, int]:
        found: dict[int, int] = {}
        for piece in pieces:
            group, position = self.index.piece_group[piece], self.index.positions[piece]
            if group not in found and (skip is None or not skip(position)):
                found[group] = position
        return found


def _add(places: dict[Any, list[int]], key: Any, piece: int) -> None:
    found = places.setdefault(key, [])
    if not found or found[-1] != piece:
        found.append(piece)
