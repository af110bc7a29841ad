"""Values spelled so that they do not look like themselves: defanged and spelled-out links
and addresses, and distinctive tokens with separators inserted.

An attacker who has read a policy writes a link as ``hxxps://bit[.]ly/x`` or
``secure-systems-252 dot com`` so that no URL is found in it, and a secret read in a
channel as ``1-a-7-b-3-d`` so that it matches nothing. Both are read here as the value they
stand for, with the canonical spelling the plain form has (``text_values``):

- **Defanged and spelled-out links and addresses.** A dot written ``[.]``, ``(.)``,
  ``{.}``, ``[dot]`` or `` dot ``; a scheme written ``hxxp(s)``, ``http[:]//`` or
  ``http[://]``; an at sign written ``[at]``, ``(at)`` or ``[@]``. A host is read only when
  at least one of its dots (or its scheme, or its at sign) is defanged, and its last label
  has two letters or more. A spoken `` dot `` is ordinary English, so it is read only where
  nothing else could be meant: every label before the last of four characters or more (or
  with a digit or a hyphen) and not a common word, the last a common top-level domain
  (``the dot com era`` names no host). A spoken `` at `` is never read as an at sign
  (``mirrored at example dot com`` is a link to ``example.com``, ``meet me at example.com``
  nothing). The value is the plain one: ``url:bit.ly/x``, ``email:name@example.com``.
- **Distinctive tokens.** A *token* is a run of letters and digits (nothing else between
  them) of 6 to 40 characters holding both letters and digits (``1a7b3d``, ``suf7toj``);
  it is a part of its own (kind ``token``) wherever it is written whole. In a text that
  the conversation's tokens, IBANs (compact) and numbers of 8 digits or more (whole) are
  looked for *across* separators: the text's runs of letters and digits joined (its
  *skeleton*), and a token counts where it begins at the start of a run and ends at the end
  of another, in any letter case, with any characters between the runs (``1-a-7-b-3-d``,
  ``1 A 7 B 3 D``, ``GB29-NWBK-6016-1331-9268-19``). Words of letters only never qualify:
  ``s-e-c-r-e-t`` or ``note book`` match nothing, so ordinary text with separators does not
  become evidence.

Cost: the patterns run on RE2 (linear); the skeleton search is one pass over a text's runs
with one look-up of a 6-character prefix each, and, only where a prefix is a token's, one
look-up per length of the tokens that begin so (at most 35: 6 to 40 characters): linear in
the text whatever the conversation holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from typing import Any

from callgate_rules.provenance.common_words import COMMON_WORDS
from callgate_rules.provenance.in_words import transliterated, whole_in_words

MIN_TOKEN = 6  # characters of a token of letters and digits
MIN_DIGIT_TOKEN = 8  # digits of a number found across separators
MAX_TOKEN = 40  # characters of a token (an IBAN has at most 34)
TOKEN = "token"
_LONGEST_WHOLE = 2048  # characters of a whole value read as a defanged link

# Top-level domains a spoken " dot " may end in ("example dot com"); bracketed forms may end
# in any two letters or more.
SPOKEN_DOMAINS = frozenset({
    "com", "net", "org", "io", "ly", "co", "uk", "de", "fr", "es", "it", "ru", "info", "biz",
    "me", "app", "dev", "ai", "us", "eu", "ch", "nl", "be", "at", "se", "no", "dk", "fi",
    "pl", "cz", "pt", "gr", "ie", "ca", "au", "jp", "cn", "in", "br", "mx", "xyz", "site",
    "online", "top", "edu", "gov",
})

_LABEL = r"[\p{L}\p{N}](?:[\p{L}\p{N}\-]*[\p{L}\p{N}])?"
_BRACKETED_DOT = r"[\[\(\{]\s*(?:\.|dot)\s*[\]\)\}]"  # no space outside: "and [.] by" is no host
_SPOKEN_DOT = r"\s+dot\s+"
_SEPARATOR = "(?:" + "|".join((r"\.", _BRACKETED_DOT, _SPOKEN_DOT)) + ")"
_DEFANGED_DOT = "(?:" + _BRACKETED_DOT + "|" + _SPOKEN_DOT + ")"
_HOST = _LABEL + "(?:" + _SEPARATOR + _LABEL + ")+"
# a host with at least one dot defanged, so that plain hosts are never even matched
_DEFANGED_HOST = ("(?:" + _LABEL + _SEPARATOR + ")*" + _LABEL + _DEFANGED_DOT + _LABEL
                  + "(?:" + _SEPARATOR + _LABEL + ")*")
_DEFANGED_SCHEME = r"(?:h(?:xx|tt)ps?(?:\[:\]|\(:\))//|h(?:xx|tt)ps?\[://\]|hxxps?://)"
_PATH = r"(/[^\s<>\"'`()\[\]{}\\]*)?"
_LOCAL = r"([\p{L}\p{N}._%+\-]+)"
_BRACKETED_AT = r"\s*[\[\(\{]\s*(?:at|@)\s*[\]\)\}]\s*"
# each: (kind, pattern); groups: the local part (addresses), the host, the path (links)
_PATTERNS = (
    ("email", _LOCAL + _BRACKETED_AT + "(" + _HOST + ")"),
    ("email", _LOCAL + "@(" + _DEFANGED_HOST + ")"),
    ("url", _DEFANGED_SCHEME + "(" + _HOST + ")" + _PATH),
    ("url", r"(?:https?://)?(" + _DEFANGED_HOST + ")" + _PATH),
)
# a quick look for what a defanged form needs, before any pattern runs
_HINTS = re.compile(r"[\[\(\{]|hxxp| dot ", re.IGNORECASE)
_DOTS = re.compile(_BRACKETED_DOT + "|" + _SPOKEN_DOT + r"|\.")
_RUN = re.compile(r"[^\W_]+")  # a run of letters and digits: cannot backtrack


@dataclass(frozen=True)
class Defanged:
    """A link or an address found in a defanged or spelled-out form."""

    kind: str  # "url" or "email"
    start: int
    end: int
    canonical: str  # ``url:bit.ly/x``, ``email:name@example.com``


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[str, Any], ...]:
    import re2  # type: ignore[import-untyped]  # google-re2: linear time

    options = re2.Options()
    options.max_mem = 16 << 20
    return tuple((kind, re2.compile(pattern, options)) for kind, pattern in _PATTERNS)


def may_be_defanged(folded: str) -> bool:
    return _HINTS.search(folded) is not None


def defanged_in(folded: str) -> list[Defanged]:
    """The defanged and spelled-out e-mail addresses and URLs in a folded text, addresses
    first (``name [at] example dot com`` holds a host that reads as a URL too)."""
    if not may_be_defanged(folded):
        return []
    found: list[Defanged] = []
    for kind, pattern in _compiled():
        for match in pattern.finditer(folded):
            start, end = match.span()
            if any(start < other.end and other.start < end for other in found):
                continue  # "name [at] example dot com" holds a link too
            host = match.group(2 if kind == "email" else 1)
            labels, separators = _labels(host)
            if not _plausible_host(labels, separators):
                continue
            if kind == "email":
                found.append(Defanged(kind, start, end,
                                      f"email:{match.group(1)}@{'.'.join(labels)}"))
                continue
            path = match.group(2) or ""
            trimmed = path.rstrip(".,;:!?")
            bare = ".".join(labels).removeprefix("www.") + trimmed.rstrip("/")
            found.append(Defanged(kind, start, end - len(path) + len(trimmed), f"url:{bare}"))
    return found


def _labels(host: str) -> tuple[list[str], list[str]]:
    """A host's labels and the separators between them, as written."""
    labels, separators, at = [], [], 0
    for dot in _DOTS.finditer(host):
        labels.append(host[at:dot.start()])
        separators.append(dot.group(0))
        at = dot.end()
    labels.append(host[at:])
    return labels, separators


def _plausible_host(labels: list[str], separators: list[str]) -> bool:
    """A host read from a defanged form: the last label letters only (two or more); a
    spoken dot only among uncommon words, before a common top-level domain."""
    if not labels[-1].isalpha() or len(labels[-1]) < 2 or "" in labels:
        return False
    return "dot" not in (separator.strip() for separator in separators) or (
        labels[-1] in SPOKEN_DOMAINS and all(map(_uncommon, labels[:-1])))


def _uncommon(label: str) -> bool:
    """A label a spoken dot may follow: four characters or more, or with a digit or a
    hyphen, and not a common word ("the dot com era" names no host)."""
    return label not in COMMON_WORDS and (len(label) >= 4 or not label.isalpha())


def is_token(run: str) -> bool:
    """A run of letters and digits that is distinctive written whole: 6 to 40 characters,
    both letters and digits."""
    if not MIN_TOKEN <= len(run) <= MAX_TOKEN or run.isdigit():
        return False
    return any(character.isdigit() for character in run)


def tokens_in(masked: str) -> list[str]:
    """The distinct tokens of a folded text (outside the parts already found)."""
    seen: dict[str, None] = {}
    for run in _RUN.findall(masked):
        if len(run) >= MIN_TOKEN and run not in seen and is_token(run):
            seen[run] = None
    return list(seen)


@dataclass
class Vocabulary:
    """What the conversation holds that is looked for across separators: a skeleton (the
    letters and digits, folded) → the canonical spelling it stands for."""

    tokens: dict[str, str] = field(default_factory=dict)
    # a token's first 6 characters → the lengths of the tokens that begin so
    prefixes: dict[str, set[int]] = field(default_factory=dict)

    def add(self, skeleton: str, canonical: str) -> None:
        if MIN_TOKEN <= len(skeleton) <= MAX_TOKEN and skeleton not in self.tokens:
            self.tokens[skeleton] = canonical
            self.prefixes.setdefault(skeleton[:MIN_TOKEN], set()).add(len(skeleton))


def skeleton_of(kind: str, canonical: str) -> str | None:
    """The letters and digits a part of the conversation is looked for by, across
    separators: a token as it is, an IBAN compact, a whole number of 8 digits or more."""
    value = canonical.split(":", 1)[1]
    if kind == TOKEN:
        return value
    if kind == "iban":
        return value.casefold()
    if kind == "number" and value.isdigit() and len(value) >= MIN_DIGIT_TOKEN:
        return value
    return None


@dataclass(frozen=True)
class Spelled:
    """A value of the conversation found in a text across separators."""

    written: str
    canonical: str
    whole: bool  # the text is that value and nothing else
    start: int = 0  # where it is written in the folded text
    end: int = 0


def spelled_in(folded: str, vocabulary: Vocabulary) -> list[Spelled]:
    """The conversation's tokens written in a folded text across two runs or more, each
    once, in the order they are written."""
    if not vocabulary.prefixes or len(folded) < MIN_TOKEN:
        return []
    runs = _RUN.findall(folded)
    if len(runs) < 2:
        return []
    skeleton = "".join(runs)
    ends = list(accumulate(map(len, runs)))
    starts = [0, *ends[:-1]]
    prefixes = vocabulary.prefixes
    hits = [first for first, begin in enumerate(starts)
            if skeleton[begin:begin + MIN_TOKEN] in prefixes]
    found: dict[str, tuple[int, int]] = {}
    run_ending = dict(zip(ends, range(len(ends)), strict=True))  # skeleton offset → run
    for first in hits:
        begin = starts[first]
        for length in prefixes[skeleton[begin:begin + MIN_TOKEN]]:
            last = run_ending.get(begin + length, first)
            canonical = (vocabulary.tokens.get(skeleton[begin:begin + length])
                if last > first else None)
            if canonical is not None and canonical not in found:
                found[canonical] = (first, last)
    if not found:
        return []
    spans = [match.span() for match in _RUN.finditer(folded)]  # where each run is written
    return [Spelled(folded[spans[first][0]:spans[last][1]], canonical,
                    first == 0 and last == len(runs) - 1, spans[first][0], spans[last][1])
            for canonical, (first, last) in found.items()]


def spelled_in_words(folded: str, vocabulary: Vocabulary,
                     already: Iterable[Spelled] = ()) -> list[Spelled]:
    """The conversation's tokens a folded text spells in words among other letters and
    digits (``zulu one a seven b three d`` holds ``1a7b3d``): ``spelled_in`` over the text
    with each word of a spelled run written as its character (``in_words``), as written in
    the text; those of ``already`` (found by ``spelled_in``) left out."""
    if not vocabulary.prefixes:
        return []
    moved = transliterated(folded)
    if moved is None:
        return []
    text, back = moved
    seen = {spelled.canonical for spelled in already}
    return [Spelled(folded[back(s.start):back(s.end)], s.canonical, s.whole,
                    back(s.start), back(s.end))
            for s in spelled_in(text, vocabulary) if s.canonical not in seen]


def vocabulary_of(parts: Iterable[tuple[str, str]]) -> Vocabulary:
    """The vocabulary of (kind, canonical) parts read in the conversation."""
    vocabulary = Vocabulary()
    for kind, canonical in parts:
        skeleton = skeleton_of(kind, canonical)
        if skeleton is not None:
            vocabulary.add(skeleton, canonical)
    return vocabulary


def other_spellings(folded: str) -> list[str]:
    """Texts a whole value is also looked for as (``provenance``): the plain form of a
    defanged link or address that is the whole value, the skeleton of a token written
    across separators (``1-a-7-b-3-d`` is looked for as ``1a7b3d``), and the token or the
    digits a value spells in words (``one a seven b three d``, ``twelve hundred``:
    ``in_words``)."""
    found: list[str] = []
    if len(folded) > _LONGEST_WHOLE:
        return found
    for defanged in defanged_in(folded):
        if defanged.start == 0 and defanged.end >= len(folded.rstrip(".,;:!?/")):
            found.append(defanged.canonical.split(":", 1)[1])
    runs = _RUN.findall(folded) if len(folded) <= 5 * MAX_TOKEN else []
    skeleton = "".join(runs)
    if len(runs) >= 2 and skeleton != folded.replace(" ", "") and (is_token(skeleton) or (
            skeleton.isdigit() and MIN_DIGIT_TOKEN <= len(skeleton) <= MAX_TOKEN)):
        found.append(skeleton)  # not when only spaces separate its runs: searched already
    in_words = whole_in_words(folded)  # "one a seven b three d", "twelve hundred"
    if in_words is not None:
        found.extend(in_words.values())
    return found
