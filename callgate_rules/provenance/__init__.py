"""Where an argument value came from: the user's words, instructions, tool results, records.

The same well-formed call is legitimate or an attack depending on where a value came from:
the user typed the account number, or it appeared only inside a document the agent read.
Given the conversation that led to a proposal, ``trace_sources`` finds, for every leaf of
the arguments, the kinds of places it appears in:

- ``user`` — the user's own messages;
- ``system`` — system or developer instructions;
- ``tool`` (and ``tool:NAME``) — tool results (and which tool produced them), never the
  gate's own messages that the host appended as tool results, and never a result that
  holds the value only as an echo of its own call's arguments (``echoes``): the value keeps
  the sources it has elsewhere, those of the arguments it repeats;
- ``record`` — the records looked up for this call;
- ``unknown`` — the host passed no conversation, or one that cannot be read, so nothing
  can be said;
- ``indistinct`` — the value is too short or too common (``1``, ``yes``, ``EUR``) for a
  match to mean anything, so it is neither traced nor counted as made up.

An empty list means *nowhere*: the model produced the value.

Matching tolerates the ordinary ways a value is re-written — case, white space inside
identifiers (``DE89 3704 0044`` vs ``de8937040044``), number formatting (``1,000.00`` vs
``1000``), a value embedded in a longer text — but a short or common value (``1``, ``yes``,
``the``) never counts as evidence: see ``Thresholds``. It runs in time linear in the
conversation for any value (``matching``).

The parts: ``reading`` (the formats, within bounds), ``seal`` (the gate's own words),
``matching`` (the index and the search), ``numbers`` (numbers as people write them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from callgate_rules.provenance.common_words import COMMON_WORDS
from callgate_rules.provenance.conversation import (
    INDISTINCT,
    RECORD,
    SYSTEM,
    TOOL,
    UNKNOWN,
    USER,
    Conversation,
    ConversationError,
    RecordedConversation,
    Segment,
)
from callgate_rules.provenance.echoes import CallArguments, call_arguments
from callgate_rules.provenance.in_words import WordsIndex, whole_in_words
from callgate_rules.provenance.matching import ConversationIndex, fold, index_of, squash
from callgate_rules.provenance.numbers import as_decimal, significant_digits
from callgate_rules.provenance.reading import (
    DEFAULT_LIMITS,
    ReadingLimits,
    read_conversation,
)
from callgate_rules.provenance.seal import Sealer, default_sealer
from callgate_rules.provenance.spellings import other_spellings

__all__ = [
    "DEFAULT_COMMON_VALUES", "DEFAULT_LIMITS", "INDISTINCT", "RECORD", "SYSTEM", "TOOL",
    "UNKNOWN", "USER", "Conversation", "ConversationError", "ReadingLimits",
    "RecordedConversation", "Sealer", "Segment", "Thresholds", "default_sealer", "flatten",
    "is_evidence", "read_conversation", "sources_of", "trace_sources", "unknown_sources",
]

DEFAULT_COMMON_VALUES = frozenset({
    "yes", "no", "ok", "okay", "true", "false", "null", "none", "the", "and", "for", "you",
    "this", "that", "with", "from", "to", "of", "in", "on", "it", "is", "a", "an", "n/a",
    "test", "hello", "thanks", "please", "eur", "usd", "gbp",
}) | COMMON_WORDS  # and the common words of six languages ("file", "Datei", "fichier")
_ORDER = {USER: 0, SYSTEM: 1, RECORD: 2, TOOL: 3}


@dataclass(frozen=True)
class Thresholds:
    """What counts as evidence. A string must have at least ``min_string_length``
    characters (ignoring white space) and not be a common word; a number must have at least
    ``min_number_digits`` significant digits. Booleans and null never count."""

    min_string_length: int = 4
    min_number_digits: int = 3
    common_values: frozenset[str] = DEFAULT_COMMON_VALUES


def is_evidence(value: Any, thresholds: Thresholds) -> bool:
    """Whether ``value`` is distinctive enough for a match to mean anything."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return significant_digits(as_decimal(value)) >= thresholds.min_number_digits
    if isinstance(value, str):
        # the length as written: NFKC may expand one character into several ("¼" → "1⁄4")
        length = len("".join(value.split()))
        folded = fold(value)
        return (min(length, len(folded.replace(" ", ""))) >= thresholds.min_string_length
                and folded not in thresholds.common_values)
    return False


class _RecordValues:
    """The leaves of the records looked up for a call, as a value is compared with them:
    strings squashed, numbers exact. Collected once per call, without recursion."""

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.texts: set[str] = set()
        self.numbers: set[Decimal] = set()
        seen: set[int] = set()
        pending: list[Any] = list(records)
        while pending:
            item = pending.pop()
            if isinstance(item, Mapping | list):
                if id(item) not in seen:  # shared or cyclic containers: once each
                    seen.add(id(item))
                    pending.extend(item.values() if isinstance(item, Mapping) else item)
            elif isinstance(item, str):
                self.texts.add(squash(item))
            elif isinstance(item, int | float) and not isinstance(item, bool):
                number = as_decimal(item)
                if number.is_finite():
                    self.numbers.add(number)

    def hold(self, value: Any) -> bool:
        if isinstance(value, str):
            return squash(value) in self.texts
        number = as_decimal(value)
        return number.is_finite() and number in self.numbers


def _echoes(conversation: Conversation) -> dict[int, CallArguments]:
    """The arguments of the call each tool result answers, by position, found once."""
    found = conversation._cache.get("echoes")
    if found is None:
        found = conversation._cache["echoes"] = {
            position: call_arguments(segment.arguments)
            for position, segment in enumerate(conversation.segments)
            if segment.kind == TOOL and segment.arguments}
    assert isinstance(found, dict)
    return found


def _words(conversation: Conversation, index: ConversationIndex) -> WordsIndex:
    """Where the conversation spells numbers and tokens in words, found once."""
    found = conversation._cache.get("in_words")
    if found is None:
        found = conversation._cache["in_words"] = WordsIndex(index)
    assert isinstance(found, WordsIndex)
    return found


def _searched_as(value: Any) -> tuple[list[str], list[Decimal]]:
    """The squashed texts and the numbers a leaf is looked for as: a string as written and
    in its other spellings (a defanged link, a token spelled across separators); a string
    that spells a number or a token in words as that (its digits, its number; never as words
    inside longer ones); a number as itself."""
    if not isinstance(value, str):
        return [], [as_decimal(value)]
    folded = fold(value)
    whole = whole_in_words(folded)
    if whole is not None:  # as what it spells: "two hundred thousand" is not a piece of
        number = whole.number()  # "one million two hundred thousand"
        return list(whole.values()), [] if number is None else [number]
    return [squash(value), *map(squash, other_spellings(folded))], []


def _sources(value: Any, conversation: Conversation, records: _RecordValues) -> list[str]:
    """The kinds of places one evidence-worthy leaf appears in, most trustworthy first; a
    tool result that holds it only as an echo of its call's arguments is not one."""
    index = index_of(conversation)
    echoes = _echoes(conversation)
    skip = None if not echoes else (
        lambda position: position in echoes and echoes[position].repeat(value))
    words = _words(conversation, index)  # what the conversation spells in words
    texts, numbers = _searched_as(value)
    places: dict[int, int] = {}
    found_in = [finder(text, skip) for text in texts
                for finder in (index.places_of_text, words.places_of_text)]
    found_in += [finder(number, skip) for number in numbers
                 for finder in (index.places_of_number, words.places_of_number)]
    for groups in found_in:
        for group, first in groups.items():
            places[group] = min(first, places.get(group, first))
    found: list[str] = []
    tools: list[tuple[int, str]] = []
    for group, first in sorted(places.items(), key=lambda place: place[1]):
        kind, tool = index.origins[group]
        if kind not in found:
            found.append(kind)
        if kind == TOOL and tool:
            tools.append((first, f"{TOOL}:{tool}"))
    if records.hold(value):
        found.append(RECORD)
    return sorted(found, key=lambda kind: _ORDER.get(kind, 9)) + [name for _, name in tools]


def sources_of(value: Any, conversation: Conversation | None,
               records: Sequence[Mapping[str, Any]], thresholds: Thresholds) -> list[str]:
    """The kinds of places one leaf value appears in, most trustworthy first."""
    if conversation is None or conversation.unreadable is not None:
        return [UNKNOWN]
    if not is_evidence(value, thresholds):
        return [INDISTINCT]
    return _sources(value, conversation, _RecordValues(records))


def trace_sources(arguments: Any, conversation: Conversation | None,
                  records: Sequence[Mapping[str, Any]], thresholds: Thresholds) -> Any:
    """The ``provenance`` variable: the arguments' shape, each leaf replaced by its sources.
    The conversation's index and the records' values are built once for all the leaves."""
    if isinstance(conversation, RecordedConversation):  # replayed: as it was at the time
        return conversation.sources
    if conversation is None or conversation.unreadable is not None:
        return unknown_sources(arguments)
    looked_up = _RecordValues(records)

    def leaf(value: Any) -> list[str]:
        if not is_evidence(value, thresholds):
            return [INDISTINCT]
        return _sources(value, conversation, looked_up)

    return _shaped(arguments, leaf)


def _shaped(arguments: Any, leaf: Callable[[Any], list[str]]) -> Any:
    if isinstance(arguments, Mapping):
        return {key: _shaped(value, leaf) for key, value in arguments.items()}
    if isinstance(arguments, list):
        return [_shaped(value, leaf) for value in arguments]
    return leaf(arguments)


def unknown_sources(arguments: Any) -> Any:
    """``trace_sources`` without a conversation, on every call's path: each leaf's sources
    are ``[unknown]``, without the per-leaf work of ``sources_of``."""
    if isinstance(arguments, dict):
        return {key: [UNKNOWN] if type(value) in _SCALARS else unknown_sources(value)
                for key, value in arguments.items()}
    if isinstance(arguments, list):
        return [unknown_sources(value) for value in arguments]
    if isinstance(arguments, Mapping):
        return {key: unknown_sources(value) for key, value in arguments.items()}
    return [UNKNOWN]


_SCALARS = frozenset({str, int, float, bool, type(None)})  # JSON leaves, never containers


def flatten(provenance: Any, prefix: str = "args") -> Iterator[tuple[str, list[str]]]:
    """(``args.path``, sources) for every leaf, for ``--explain`` and drafts."""
    if isinstance(provenance, Mapping):
        for key, value in provenance.items():
            yield from flatten(value, f"{prefix}.{key}")
    elif isinstance(provenance, list) and provenance and not isinstance(provenance[0], str):
        for index, value in enumerate(provenance):
            yield from flatten(value, f"{prefix}[{index}]")
    else:
        yield prefix, list(provenance)
