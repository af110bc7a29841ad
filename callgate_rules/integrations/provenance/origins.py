"""Origins and labels: which read a value came from, and what that read was labelled.

``provenance`` says *what kind* of place a value appears in (``user``, ``tool:read_file``).
``origins`` says *which* places, with what rules need to tell them apart:

- for each piece of the conversation the value appears in: its ``kind`` (user, system,
  tool), the ``tool``, the user ``turn`` it came in or after, the ``labels`` its contract
  gave that read, and for a tool result whether the call's arguments were ``named_by_user``
  (every distinctive value of them written by the user before the call) — "from a document
  the user named" versus "from a document the assistant found";
- ``latest_turn``: whether the user wrote it in the request being served (the last user
  message), not only earlier, for something else;
- ``echoes``: the tools whose result held it only because it repeats the call's own
  arguments (a bank echoing the payment it made). Such an occurrence is *not* a source:
  the value keeps the origin those arguments had (wherever else it appears);
- ``composed``: a string not written whole by the user whose every piece (words, numbers,
  a date's year, month and day) the user wrote counts as user-given (``user`` in its
  ``sources``);
- ``parts``: for a string, the values inside it (``text_values``: URLs, e-mail addresses,
  IBANs, dates, numbers, names, words), each with its own sources, labels and turns, matched
  across ordinary spellings.

A label is evidence of where a value *appeared*, not proof of where it flowed: a value the
user typed that also appears in a confidential read carries ``confidential`` too.

Cost: the conversation is indexed once (per piece, reusing ``matching``'s normalised texts),
its parts read once (``text_values``); each value is then one linear scan plus a dictionary
look-up per part. Whether a read was named by the user is one scan of the user's text per
distinctive argument of each read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from callgate_rules.integrations.provenance.conversation import (
    RECORD,
    TOOL,
    USER,
    Conversation,
    RecordedConversation,
    Segment,
)
from callgate_rules.integrations.provenance.matching import ConversationIndex, fold, squash
from callgate_rules.integrations.provenance.numbers import as_decimal, numbers_in
from callgate_rules.integrations.provenance.text_values import (
    DATE,
    NAME,
    WORD,
    TextPart,
    canonical_of_value,
    parts_of,
)

Labeller = Callable[[str, Any, Any], tuple[str, ...]]  # (tool, result, arguments) → labels
Evidence = Callable[[Any], bool]
_ORDER = {USER: 0, "system": 1, RECORD: 2, TOOL: 3}


def no_labels(tool: str, result: Any, arguments: Any) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Read:
    """One piece of the conversation, as a place a value may come from."""

    position: int
    kind: str
    tool: str | None
    turn: int
    labels: tuple[str, ...]
    named_by_user: bool
    # distinct values of each kind written in it (``iban``, ``url``, ``email``, ``date``,
    # ``number``): one IBAN beside another in a bill is not the bill's IBAN for certain
    counts: tuple[tuple[str, int], ...] = ()

    def as_variable(self) -> dict[str, Any]:
        counts = dict.fromkeys(_COUNTED, 0)
        counts.update(self.counts)
        return {"kind": self.kind, "tool": self.tool or "", "turn": self.turn,
                "labels": list(self.labels), "named_by_user": self.named_by_user,
                "counts": counts}


_COUNTED = ("iban", "url", "email", "date", "number")


def _json_or_text(text: str | None) -> Any:
    if text is None:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def _leaves(value: Any) -> Iterable[Any]:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        else:
            yield item


class ReadsIndex:
    """A conversation indexed per piece, with each piece's parts, labels and echoes."""

    def __init__(self, conversation: Conversation, labeller: Labeller,
                 evidence: Evidence) -> None:
        segments = conversation.segments
        self.segments = segments
        self.last_turn = max((s.turn for s in segments if s.kind == USER), default=0)
        # one group per piece: places_of_text answers every piece that holds a value
        self.index = ConversationIndex(Conversation.of(
            [Segment(s.kind, s.text, str(i)) for i, s in enumerate(segments)]))
        self.user_index = ConversationIndex(Conversation.of(
            [Segment(USER, s.text, str(i)) for i, s in enumerate(segments) if s.kind == USER]))
        self.user_positions = [i for i, s in enumerate(segments) if s.kind == USER]
        self.parts: dict[str, list[int]] = {}
        counts: list[tuple[tuple[str, int], ...]] = []
        read_before: dict[str, tuple[TextPart, ...]] = {}
        for position, segment in enumerate(segments):
            distinct: dict[str, set[str]] = {}
            if segment.text not in read_before:  # a text repeated is read once
                read_before[segment.text] = parts_of(segment.text)
            for part in read_before[segment.text]:
                if part.kind in _COUNTED:
                    distinct.setdefault(part.kind, set()).add(part.canonical[0])
                for key in part.canonical:
                    places = self.parts.setdefault(key, [])
                    if not places or places[-1] != position:
                        places.append(position)
            counts.append(tuple((kind, len(values)) for kind, values in distinct.items()))
        self.user_words = _words_of(s.text for s in segments if s.kind == USER)
        self.echo_texts: dict[int, tuple[str, set[str], set[Decimal]]] = {}
        reads = []
        for position, segment in enumerate(segments):
            labels: tuple[str, ...] = ()
            named = False
            if segment.kind == TOOL:
                arguments = _json_or_text(segment.arguments)
                labels = labeller(segment.tool or "", _json_or_text(segment.text), arguments)
                named = self._named_by_user(arguments, position, evidence)
                if segment.arguments:
                    folded = fold(segment.arguments)
                    self.echo_texts[position] = (
                        squash(segment.arguments),
                        {key for part in parts_of(segment.arguments) for key in part.canonical},
                        numbers_in(folded))
            reads.append(Read(position, segment.kind, segment.tool, segment.turn, labels,
                              named, counts[position]))
        self.reads = reads

    def _named_by_user(self, arguments: Any, position: int, evidence: Evidence) -> bool:
        distinctive = [leaf for leaf in _leaves(arguments) if evidence(leaf)]
        return bool(distinctive) and all(
            any(self.user_positions[group] < position for group in self._user_places(leaf))
            for leaf in distinctive)

    def _user_places(self, value: Any) -> Iterable[int]:
        if isinstance(value, str):
            return self.user_index.places_of_text(squash(value)).keys()
        return self.user_index.places_of_number(as_decimal(value)).keys()

    def places(self, value: Any) -> set[int]:
        """The pieces ``value`` is written in, whole or in another spelling."""
        if isinstance(value, str):
            found = set(self.index.places_of_text(squash(value)).values())
        else:
            found = set(self.index.places_of_number(as_decimal(value)).values())
        for key in canonical_of_value(value):
            found.update(self.parts.get(key, ()))
        return found

    def is_echo(self, position: int, value: Any, keys: Sequence[str]) -> bool:
        """Whether the tool result at ``position`` holds ``value`` because its call's own
        arguments hold it."""
        echoed = self.echo_texts.get(position)
        if echoed is None:
            return False
        text, parts, numbers = echoed
        if isinstance(value, str) and value and squash(value) in text:
            return True
        if isinstance(value, int | float) and not isinstance(value, bool):
            return as_decimal(value) in numbers
        return any(key in parts for key in keys)

    def composed_by_user(self, value: Any) -> bool:
        """A string none of the user's messages holds whole, whose every piece the user
        wrote: a date from its year, month and day; else every word and number of it
        (at least two)."""
        if not isinstance(value, str):
            return False
        for key in canonical_of_value(value):
            if key.startswith(DATE + ":"):
                year, month, day = key.removeprefix(DATE + ":").split("-")
                months = {str(int(month))} | _MONTH_NAMES.get(int(month), set())
                return (year in self.user_words and str(int(day)) in self.user_words
                        and bool(months & self.user_words))
        tokens = _tokens(value)
        return len(tokens) >= 2 and all(token in self.user_words for token in tokens)


def _tokens(text: str) -> list[str]:
    words, current = [], []
    for character in fold(text):
        if character.isalnum():
            current.append(character)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    cleaned = []
    for word in words:
        for suffix in ("st", "nd", "rd", "th"):
            if word[:-2].isdigit() and word.endswith(suffix):
                word = word[:-2]
        cleaned.append(word.lstrip("0") or "0" if word.isdigit() else word)
    return cleaned


def _words_of(texts: Iterable[str]) -> set[str]:
    words: set[str] = set()
    for text in texts:
        words.update(_tokens(text))
    return words


def _month_names() -> dict[int, set[str]]:
    from callgate_rules.integrations.provenance.text_values import _MONTHS

    names: dict[int, set[str]] = {}
    for name, number in _MONTHS.items():
        names.setdefault(number, set()).add(name)
    return names


_MONTH_NAMES = _month_names()


def reads_index(conversation: Conversation, labeller: Labeller,
                evidence: Evidence) -> ReadsIndex:
    """The conversation's ``ReadsIndex``, built on first use and kept with it."""
    key = f"reads:{id(labeller)}"
    found = conversation._cache.get(key)
    if found is None:
        found = conversation._cache[key] = ReadsIndex(conversation, labeller, evidence)
    assert isinstance(found, ReadsIndex)
    return found


def _record_keys(records: Sequence[Mapping[str, Any]]) -> set[str]:
    keys: set[str] = set()
    for leaf in _leaves(list(records)):
        if isinstance(leaf, str):
            keys.add("s:" + squash(leaf))
            keys.update(canonical_of_value(leaf))
        elif isinstance(leaf, int | float) and not isinstance(leaf, bool):
            keys.update(canonical_of_value(leaf))
    return keys


def _describe(index: ReadsIndex, places: Iterable[int], value: Any, keys: Sequence[str],
              held_by_records: bool) -> dict[str, Any]:
    """What a value (or a part) is told by the pieces it appears in."""
    sources: list[str] = []
    tools: list[str] = []
    labels: list[str] = []
    turns: list[int] = []
    reads: list[dict[str, Any]] = []
    echoes: list[str] = []
    for position in sorted(places):
        read = index.reads[position]
        if read.kind == TOOL and index.is_echo(position, value, keys):
            echoes.append(read.tool or "")
            continue
        if read.kind not in sources:
            sources.append(read.kind)
        if read.kind == TOOL and read.tool and f"{TOOL}:{read.tool}" not in tools:
            tools.append(f"{TOOL}:{read.tool}")
        if read.kind == USER and read.turn not in turns:
            turns.append(read.turn)
        labels.extend(label for label in read.labels if label not in labels)
        reads.append(read.as_variable())
    composed = USER not in sources and index.composed_by_user(value)
    if composed:
        sources.append(USER)
    if held_by_records:
        sources.append(RECORD)
    return {"sources": sorted(sources, key=lambda kind: _ORDER.get(kind, 9)) + tools,
            "labels": labels, "turns": turns, "reads": reads, "echoes": echoes,
            "latest_turn": index.last_turn in turns and index.last_turn > 0,
            "composed": composed}


def origin_of(value: Any, index: ReadsIndex, evidence: Evidence,
              record_keys: set[str]) -> dict[str, Any]:
    """The ``origins`` entry of one argument leaf (see the module's docstring)."""
    keys = canonical_of_value(value)
    if evidence(value):
        held = (isinstance(value, str) and "s:" + squash(value) in record_keys) or \
            any(key in record_keys for key in keys)
        described = _describe(index, index.places(value), value, keys, held)
    else:
        described = {"sources": ["indistinct"], "labels": [], "turns": [], "reads": [],
                     "echoes": [], "latest_turn": False, "composed": False}
    parts = []
    if isinstance(value, str):
        for part in parts_of(value):
            if part.canonical == keys:
                continue  # the value itself
            places: set[int] = set()
            for key in part.canonical:
                places.update(index.parts.get(key, ()))
            probe: Any = part.written if part.kind in (WORD, NAME) else None
            entry = _describe(index, places, probe, part.canonical,
                              any(key in record_keys for key in part.canonical))
            entry.update(part.as_variable())
            parts.append(entry)
    described["parts"] = parts
    return described


def trace_origins(arguments: Any, conversation: Conversation,
                  records: Sequence[Mapping[str, Any]], evidence: Evidence,
                  labeller: Labeller = no_labels) -> tuple[Any, list[dict[str, Any]]]:
    """The ``origins`` variable (the arguments' shape, each leaf its origins) and the
    ``reads`` variable (every tool result of the run so far, with its labels)."""
    if conversation.unreadable is not None or isinstance(conversation, RecordedConversation):
        return unknown(arguments), []  # replayed: only provenance was recorded
    index = reads_index(conversation, labeller, evidence)
    record_keys = _record_keys(records)

    def shaped(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {key: shaped(member) for key, member in value.items()}
        if isinstance(value, list):
            return [shaped(member) for member in value]
        return origin_of(value, index, evidence, record_keys)

    reads = [read.as_variable() for read in index.reads if read.kind == TOOL]
    return shaped(arguments), reads


def unknown(arguments: Any) -> Any:
    """``origins`` without a conversation: every leaf's sources ``[unknown]``."""
    if isinstance(arguments, Mapping):
        return {key: unknown(member) for key, member in arguments.items()}
    if isinstance(arguments, list):
        return [unknown(member) for member in arguments]
    return {"sources": ["unknown"], "labels": [], "turns": [], "reads": [], "echoes": [],
            "latest_turn": False, "composed": False, "parts": []}
