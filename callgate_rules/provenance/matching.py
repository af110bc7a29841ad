"""Finding a value in a conversation: normalise and index the conversation once, then one
substring scan per value, in time linear in the conversation whatever the value.

A string value matches where its characters appear in order with, at most, white space
between them (``DE89 3704 0044`` matches ``de8937040044`` and vice versa), ignoring case and
compatibility forms, but not inside a longer word: if the value begins (ends) with a letter
or digit, the character before (after) it must not be one.

How, and what it costs (n: characters of the conversation, m: of the value):

- Each piece of the conversation is *folded* once (NFKC, case-folded, white space runs made
  one space) and *squashed* (the same without spaces); a cache keyed by the raw text keeps
  both for later proposals of the same, growing, conversation. The index of a conversation
  joins the squashed pieces, grouped by origin, into one text; a value found in a group
  sends the search on to the next group.
- A value is squashed the same way and searched with ``str.find`` (CPython's two-way search:
  O(n + m)). An occurrence is checked on both sides: a letter or digit there with no space
  between (the folded text, or the piece's *space mask* once asked often) means "inside a
  longer word".
- Occurrences inside longer words are skipped in bulk. A value with period p < m has
  overlapping occurrences in runs spaced by p: a run is measured with slice comparisons and
  decided from the space mask by strided slices, in C, and the next search starts past it
  (two occurrences closer than max(p, m - p) share a run: the Fine–Wilf theorem). A value of
  at most 64 characters found inside longer words more than 48 times has all the rest
  decided at once by byte masks (``masks``).

The bound: per value, O(n · min(m, 64)) byte operations in C, and in Python at most 48
occurrence checks, one step per run (a run spans at least m characters, and the next search
starts at least m/2 past it) and one per group of origins — for a value over 64 characters
at most one step per 32 characters of the conversation. Typically: one scan of the index
text and a few microseconds. ``benchmarks/provenance_benchmark.py`` prints both.
"""

from __future__ import annotations

import threading
import unicodedata
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache

from callgate_rules.provenance.conversation import Conversation
from callgate_rules.provenance.in_words import InWords, read_in_words
from callgate_rules.provenance.masks import SHORT, IndexMasks
from callgate_rules.provenance.numbers import numbers_in

SEPARATOR = "\x00"  # between pieces in the index text; never in a normalised text
_BLOCK = 1024  # folded characters per entry of a text's position table
_FEW_QUESTIONS = 32  # about where answering from the folded text costs more than a mask
_MANY_MISSES = 48  # about where checking occurrences one by one costs more than masks


def fold(text: str) -> str:
    """Case, compatibility forms and white space normalised; one space between words."""
    if len(text) <= _REMEMBERED:
        return _fold_short(text)
    return " ".join(normalise(text).split())


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace(SEPARATOR, "\ufffd")


def squash(text: str) -> str:
    """A value as it is searched: folded, without any white space."""
    if len(text) <= _REMEMBERED:
        return _squash_short(text)
    return "".join(normalise(text).split())


# Argument values and the strings of looked-up records come back with every proposal: the
# short ones are normalised once (a few microseconds each otherwise).
_REMEMBERED = 256


@lru_cache(maxsize=8192)
def _fold_short(text: str) -> str:
    return " ".join(normalise(text).split())


@lru_cache(maxsize=8192)
def _squash_short(text: str) -> str:
    return "".join(normalise(text).split())


class NormalText:
    """One piece of the conversation normalised once: folded, squashed (where values are
    searched), and — when first asked — where its spaces are and which numbers it holds."""

    __slots__ = ("folded", "squashed", "_table", "_space_mask", "_numbers", "_in_words")

    def __init__(self, raw: str) -> None:
        words = normalise(raw).split()
        self.folded = " ".join(words)
        self.squashed = "".join(words)
        self._table: list[int] | None = None
        self._space_mask: bytes | None = None
        self._numbers: set[Decimal] | None = None
        self._in_words: list[InWords] | None = None

    def numbers(self) -> set[Decimal]:
        if self._numbers is None:
            self._numbers = numbers_in(self.folded)
        return self._numbers

    def in_words(self) -> list[InWords]:
        """The numbers and tokens it spells in words (``in_words``), read once."""
        if self._in_words is None:
            self._in_words = read_in_words(self.folded)
        return self._in_words

    def follows_space(self, position: int) -> bool:
        """Whether a space comes right before the squashed text's character ``position``
        in the folded text, found in the folded text (for a few questions)."""
        folded_at = self.folded_position(position)
        return folded_at > 0 and self.folded[folded_at - 1] == " "

    def space_mask(self) -> bytes:
        """One byte per squashed character: 1 where a space comes right before it in the
        folded text. Made in C: each word after the first as a 1 and its other characters
        as zero bytes."""
        if self._space_mask is None:
            first, *others = self.folded.split(" ")
            self._space_mask = bytes(len(first)) + b"".join(
                map(b"\x01".__add__, map(bytes, map((-1).__add__, map(len, others)))))
        return self._space_mask

    def folded_position(self, position: int) -> int:
        """Where the squashed text's character ``position`` is in the folded text: from the
        table entry below it, advance by the characters still missing; a folded text has
        no two spaces in a row, so what is missing at least halves with each step."""
        table = self._table if self._table is not None else self._make_table()
        entry = bisect_right(table, position) - 1
        at, missing = entry * _BLOCK, position - table[entry]
        while missing:
            ahead = at + missing
            missing = self.folded.count(" ", at, ahead)
            at = ahead
        return at + 1 if self.folded.startswith(" ", at) else at

    def _make_table(self) -> list[int]:
        """Squashed positions at every ``_BLOCK`` folded characters."""
        table, squashed = [], 0
        for start in range(0, max(len(self.folded), 1), _BLOCK):
            table.append(squashed)
            squashed += (min(_BLOCK, len(self.folded) - start)
                - self.folded.count(" ", start, start + _BLOCK))
        self._table = table
        return table


class _TextCache:
    """Normalised texts by raw text, least recently used first out, within a budget of
    characters: a conversation grows by appending, so each proposal of a run finds the
    pieces of the earlier ones already normalised."""

    def __init__(self, max_characters: int) -> None:
        self.max_characters = max_characters
        self._texts: OrderedDict[str, NormalText] = OrderedDict()
        self._characters = 0
        self._lock = threading.Lock()

    def get(self, raw: str) -> NormalText:
        with self._lock:
            found = self._texts.get(raw)
            if found is not None:
                self._texts.move_to_end(raw)
                return found
        made = NormalText(raw)
        size = 2 * len(raw)
        if size > self.max_characters // 4:
            return made  # too large to keep without pushing everything else out
        with self._lock:
            if raw not in self._texts:
                self._texts[raw] = made
                self._characters += size
            while self._characters > self.max_characters:
                old, _ = self._texts.popitem(last=False)
                self._characters -= 2 * len(old)
        return made


TEXTS = _TextCache(max_characters=32_000_000)


class ConversationIndex:
    """A conversation's pieces, squashed and joined into one text, grouped by origin (the
    user, system instructions, each tool), so one scan answers a value for every origin."""

    def __init__(self, conversation: Conversation) -> None:
        groups: dict[tuple[str, str | None], list[int]] = {}
        for position, segment in enumerate(conversation.segments):
            groups.setdefault((segment.kind, segment.tool), []).append(position)
        self.origins = list(groups)  # (kind, tool) of each group
        self.pieces: list[NormalText] = []
        self.positions: list[int] = []  # each piece's place in the conversation
        self.piece_group: list[int] = []
        self.starts: list[int] = []  # each piece's offset in the index text
        self.group_ends: list[int] = []  # the offset just after each group's last piece
        offset = 0
        for group, members in enumerate(groups.values()):
            for position in members:
                piece = TEXTS.get(conversation.segments[position].text)
                self.pieces.append(piece)
                self.positions.append(position)
                self.piece_group.append(group)
                self.starts.append(offset)
                offset += len(piece.squashed) + 1
            self.group_ends.append(offset - 1)
        self.text = SEPARATOR.join(piece.squashed for piece in self.pieces)
        self._numbers: list[dict[Decimal, list[int]]] | None = None
        self._questions: dict[int, int] = {}  # piece → how often asked about its spaces
        self._masks: IndexMasks | None = None

    def places_of_number(self, number: Decimal,
                         skip: Callable[[int], bool] | None = None) -> dict[int, int]:
        """Group → the first place in the conversation where ``number`` is written (and
        that ``skip`` does not rule out: an echo)."""
        if not number.is_finite():
            return {}
        if self._numbers is None:
            self._numbers = [{} for _ in self.origins]
            for piece, group, position in zip(self.pieces, self.piece_group, self.positions,
                                              strict=True):
                for written in piece.numbers():
                    self._numbers[group].setdefault(written, []).append(position)
        found: dict[int, int] = {}
        for group, numbers in enumerate(self._numbers):
            for position in numbers.get(number, ()):
                if skip is None or not skip(position):
                    found[group] = position
                    break
        return found

    def places_of_text(self, value: str,
                       skip: Callable[[int], bool] | None = None) -> dict[int, int]:
        """Group → the first place in the conversation where the squashed ``value`` is
        written, not inside a longer word (and that ``skip`` does not rule out: an echo;
        the search goes on after that piece, so it stays one scan)."""
        if not value:
            return {group: self.positions[self.piece_group.index(group)]
                    for group in range(len(self.origins))}
        found: dict[int, int] = {}
        search = _Search(self, value)
        start = 0
        while start < len(self.text):
            at = search.first_from(start)
            if at < 0:
                break
            piece = bisect_right(self.starts, at) - 1
            group = self.piece_group[piece]
            if skip is not None and skip(self.positions[piece]):
                start = self.starts[piece] + len(self.pieces[piece].squashed) + 1
                continue  # on to the next piece
            found[group] = self.positions[piece]
            start = self.group_ends[group] + 1  # this group is answered: on to the next
        return found

    def follows_space(self, at: int) -> bool:
        """Whether a space comes right before the index text's character ``at``. The first
        few questions about a piece look in its folded text; a piece asked often (a value
        inside many longer words) is answered from its space mask."""
        piece = bisect_right(self.starts, at) - 1
        local = at - self.starts[piece]
        asked = self._questions[piece] = self._questions.get(piece, 0) + 1
        if asked <= _FEW_QUESTIONS:
            return self.pieces[piece].follows_space(local)
        return self.pieces[piece].space_mask()[local] == 1

    def masks(self) -> IndexMasks:
        """The index text's byte masks, built on first need (see ``masks``)."""
        if self._masks is None:
            self._masks = IndexMasks(self.text, [piece.space_mask() for piece in self.pieces],
                                     len(SEPARATOR))
        return self._masks

class _Search:
    """Occurrences of one squashed value in an index text that are not inside longer words."""

    def __init__(self, index: ConversationIndex, value: str) -> None:
        self.index, self.text, self.value, self.length = index, index.text, value, len(value)
        self.starts_word, self.ends_word = value[0].isalnum(), value[-1].isalnum()
        self.period = 0  # the value's smallest period, worked out at the first need
        self.misses = 0  # occurrences found inside longer words so far
        self._on_their_own: bytes | None = None  # once many: every answer, as a mask

    def first_from(self, start: int) -> int:
        """The first offset ≥ ``start`` of an occurrence on its own, or -1."""
        if self._on_their_own is not None:
            return self._on_their_own.find(1, start)
        text, value, length = self.text, self.value, self.length
        tail, skip, period = "", 0, 0
        at = text.find(value, start)
        while at >= 0:
            if self.on_its_own(at):
                return at
            self.misses += 1
            if self.misses > _MANY_MISSES and length <= SHORT:  # all the rest at once, in C
                self._on_their_own = self.index.masks().on_its_own(
                    value, self.starts_word, self.ends_word)
                return self._on_their_own.find(1, at)
            if not period:
                period = self.period = smallest_period(value)
                tail, skip = value[length - period:], max(period + 1, length - period + 1)
            if text.startswith(tail, at + length):  # another occurrence at + period: a run
                run = (period + common_prefix(text, at, at + period) - length) // period
                found = self.in_run(at, run)
                if found >= 0:
                    return found
                at += run * period
            at = text.find(value, at + skip)
        return -1

    def on_its_own(self, at: int) -> bool:
        """Whether the occurrence at ``at`` is not inside a longer word."""
        text, end, index = self.text, at + self.length, self.index
        if self.starts_word and text[at - 1:at].isalnum() and not index.follows_space(at):
            return False
        return not (self.ends_word and text[end:end + 1].isalnum()
                    and not index.follows_space(end))

    def in_run(self, at: int, run: int) -> int:
        """An occurrence on its own among ``at + j * period`` (1 ≤ j ≤ ``run``), or -1, when
        the one at ``at`` is not: the text from ``at`` repeats with the value's period, so
        inside the run (j < ``run``) every occurrence has the same characters around it —
        the value's own — and only a space right before or right after it can make one
        differ. Those are read from the space mask by strided slices, in C (a run may hold
        a space every other character)."""
        period, length, value = self.period, self.length, self.value
        last = at + run * period
        if self.on_its_own(last):  # what follows the last comes from outside the run
            return last
        if run < 2:
            return -1
        start_free = not self.starts_word or not value[period - 1].isalnum()
        end_free = not self.ends_word or not value[length % period].isalnum()
        if start_free and end_free:
            return at + period
        piece = bisect_right(self.index.starts, at) - 1
        base = self.index.starts[piece]
        first, final = at - base + period, at - base + (run - 1) * period  # starts, locally
        mask = self.index.pieces[piece].space_mask()
        before = mask[first:final + 1:period]  # a space right before occurrence 1, 2, …
        after = mask[first + length:final + length + 1:period]  # … and right after it
        if start_free:
            step = after.find(1)
        elif end_free:
            step = before.find(1)
        else:  # both, for the same occurrence: the bitwise AND of the two, in C
            both = int.from_bytes(before, "little") & int.from_bytes(after, "little")
            step = both.to_bytes(len(before), "little").find(1) if both else -1
        return base + first + step * period if step >= 0 else -1


@lru_cache(maxsize=64)
def smallest_period(value: str) -> int:
    """The smallest p > 0 with value[i] == value[i + p] for every i (Knuth–Morris–Pratt)."""
    border = [0] * len(value)
    matched = 0
    for at in range(1, len(value)):
        character = value[at]
        while matched and value[matched] != character:
            matched = border[matched - 1]
        if value[matched] == character:
            matched += 1
        border[at] = matched
    return len(value) - border[-1]


def common_prefix(text: str, first: int, second: int) -> int:
    """The length of the common prefix of ``text[first:]`` and ``text[second:]``, with
    comparisons of doubling, then halving, slices: O(the length) in C."""
    available = len(text) - max(first, second)
    length, size = 0, 64
    while length < available:
        size = min(size, available - length)
        if (text[first + length:first + length + size] ==
                text[second + length:second + length + size]):
            length += size
            size *= 2
            continue
        while size > 1:  # the first difference lies within these ``size`` characters
            half = size // 2
            if (text[first + length:first + length + half] ==
                    text[second + length:second + length + half]):
                length += half
                size -= half
            else:
                size = half
        return length
    return length


def index_of(conversation: Conversation) -> ConversationIndex:
    """The conversation's index, built on first use and kept with it."""
    index = conversation._cache.get("index")
    if index is None:
        index = conversation._cache["index"] = ConversationIndex(conversation)
    assert isinstance(index, ConversationIndex)
    return index
