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
  across ordinary spellings;
- ``derived``: for a number written nowhere, the ways it is computed from two numbers the
  conversation holds (``derived``: a sum, a difference or a product, at most
  ``MAX_DERIVED`` listed), each with its operands' own origins. A value found as written
  is never derived. Its ``sources``, ``reads`` and ``turns`` stay those of the value as
  written (none), so a rule that asks for ``user`` is not widened: a rule accepts a
  computed value by reading ``derived``. Its ``labels`` take every label of every operand
  of every way found (a label marks caution: a value computable from an untrusted number
  carries ``untrusted``, even if it is also computable from trusted ones).

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
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from callgate_rules.canonical import unique_keys
from callgate_rules.provenance.conversation import (
    RECORD,
    TOOL,
    USER,
    Conversation,
    RecordedConversation,
    Segment,
)
from callgate_rules.provenance.derived import Operands, plain
from callgate_rules.provenance.echoes import CallArguments, call_arguments
from callgate_rules.provenance.in_words import whole_in_words
from callgate_rules.provenance.matching import ConversationIndex, fold, squash
from callgate_rules.provenance.numbers import as_decimal
from callgate_rules.provenance.results import (
    NO_LABELLING,
    Labeller,
    item_texts,
    no_labels,
    parsed_result,
)
from callgate_rules.provenance.spellings import (
    Spelled,
    spelled_in,
    spelled_in_words,
    vocabulary_of,
)
from callgate_rules.provenance.text_values import (
    DATE,
    NAME,
    NUMBER,
    WORD,
    TextPart,
    canonical_of_value,
    parts_of,
)

__all__ = ["Evidence", "Labeller", "LabelledRecord", "Read", "ReadsIndex", "no_labels", "origin_of",
           "reads_index", "trace_origins", "unknown"]

Evidence = Callable[[Any], bool]
_ORDER = {USER: 0, "system": 1, RECORD: 2, TOOL: 3}
MAX_DERIVED = 8  # ways a computed number is derived that ``origins.X.derived`` lists


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
    # which item of its result this piece is (spec.labels' item form); -1: the whole
    # result, or what lies outside its items
    item: int = -1

    def as_variable(self) -> dict[str, Any]:
        counts = dict.fromkeys(_COUNTED, 0)
        counts.update(self.counts)
        return {"kind": self.kind, "tool": self.tool or "", "turn": self.turn,
                "labels": list(self.labels), "named_by_user": self.named_by_user,
                "counts": counts, "item": self.item}


_COUNTED = ("iban", "url", "email", "date", "number")


def _json_or_text(text: str | None) -> Any:
    if text is None:
        return {}
    try:  # a key twice is read as text too, as in a result (``results``)
        return json.loads(text, object_pairs_hook=unique_keys)
    except (ValueError, RecursionError):  # arguments too deep to decode are read as text
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


@dataclass(frozen=True)
class _Piece:
    """A piece of the conversation as origins indexes it: a message, a tool result, or one
    item of a tool result whose labels are per item (``spec.labels``' item form)."""

    segment: Segment  # with the piece's own text
    result: int  # the tool result it is (part of), numbered in order; -1: not a tool result
    labels: tuple[str, ...]
    item: int = -1


def _pieces(segments: Sequence[Segment], labeller: Labeller) -> list[_Piece]:
    """Each tool result with its labels, split into its items where labels are per item:
    the text outside the items first (the whole result's labels), then one per item (the
    whole result's labels, its own and those of the items it lies inside)."""
    pieces: list[_Piece] = []
    results = 0
    for segment in segments:
        if segment.kind != TOOL:
            pieces.append(_Piece(segment, -1, ()))
            continue
        results += 1
        labelling, parsed = NO_LABELLING, None
        if labeller.declares(segment.tool or ""):
            parsed = parsed_result(segment.text)
            labelling = labeller.label(segment.tool or "", parsed,
                                       _json_or_text(segment.arguments))
        if not labelling.items:
            pieces.append(_Piece(segment, results - 1, labelling.labels))
            continue
        split = item_texts(parsed, labelling.items)
        pieces.append(_Piece(replace(segment, text=split.outside), results - 1,
                             labelling.labels))
        for item, text in enumerate(split.items):
            labels = list(labelling.labels)
            at = item
            while at >= 0:  # its own labels, then those of the items it lies inside
                labels.extend(label for label in labelling.item_labels[at]
                              if label not in labels)
                at = split.parents[at]
            pieces.append(_Piece(replace(segment, text=text), results - 1, tuple(labels),
                                 item))
    return pieces


class ReadsIndex:
    """A conversation indexed per piece (``_Piece``), with each piece's parts, labels and
    echoes; ``results`` is every tool result whole, with every label of its pieces."""

    def __init__(self, conversation: Conversation, labeller: Labeller,
                 evidence: Evidence) -> None:
        pieces = _pieces(conversation.segments, labeller)
        segments = tuple(piece.segment for piece in pieces)
        self.segments = segments
        self.last_turn = max((s.turn for s in segments if s.kind == USER), default=0)
        # one group per piece: places_of_text answers every piece that holds a value
        self.index = ConversationIndex(Conversation.of(
            [Segment(s.kind, s.text, str(i)) for i, s in enumerate(segments)]))
        self.user_index = ConversationIndex(Conversation.of(
            [Segment(USER, s.text, str(i)) for i, s in enumerate(segments) if s.kind == USER]))
        self.user_positions = [i for i, s in enumerate(segments) if s.kind == USER]
        self.parts: dict[str, list[int]] = {}
        distinct = self._read_parts(segments)
        # what is looked for across separators in a text ("1-a-7-b-3-d"): ``spellings``
        self.vocabulary = vocabulary_of((key.split(":", 1)[0], key) for key in self.parts)
        self.user_words = _words_of(s.text for s in segments if s.kind == USER)
        self.echo_texts: dict[int, CallArguments] = {}
        named: dict[int, bool] = {}  # by tool result: its pieces share the call
        for position, piece in enumerate(pieces):
            if piece.result >= 0 and piece.result not in named:
                named[piece.result] = self._named_by_user(
                    _json_or_text(piece.segment.arguments), position, evidence)
            if piece.result >= 0 and piece.segment.arguments:  # a result's pieces share it
                self.echo_texts[position] = call_arguments(piece.segment.arguments)
        self.reads = [Read(position, piece.segment.kind, piece.segment.tool, piece.segment.turn,
                           piece.labels, named.get(piece.result, False),
                           _counted(distinct[position]), piece.item)
                      for position, piece in enumerate(pieces)]
        self.results = _whole_results(pieces, self.reads, distinct)
        self._operands: Operands | None = None

    def operands(self) -> Operands:
        """The numbers a computed value may come from (``derived``), made on first need:
        the number parts in the order of the pieces that hold them first."""
        if self._operands is None:
            self._operands = Operands(self.parts)
        return self._operands

    def _read_parts(self, segments: Sequence[Segment]) -> list[dict[str, set[str]]]:
        """Index every piece's parts; the distinct values of each counted kind per piece."""
        distinct: list[dict[str, set[str]]] = []
        read_before: dict[str, tuple[TextPart, ...]] = {}
        for position, segment in enumerate(segments):
            found: dict[str, set[str]] = {}
            if segment.text not in read_before:  # a text repeated is read once
                read_before[segment.text] = parts_of(segment.text)
            for part in read_before[segment.text]:
                if part.kind in _COUNTED:
                    found.setdefault(part.kind, set()).add(part.canonical[0])
                for key in part.canonical:
                    places = self.parts.setdefault(key, [])
                    if not places or places[-1] != position:
                        places.append(position)
            distinct.append(found)
        return distinct

    def _named_by_user(self, arguments: Any, position: int, evidence: Evidence) -> bool:
        distinctive = [leaf for leaf in _leaves(arguments) if evidence(leaf)]
        return bool(distinctive) and all(
            any(self.user_positions[group] < position for group in self._user_places(leaf))
            for leaf in distinctive)

    def _user_places(self, value: Any) -> Iterable[int]:
        if isinstance(value, str):
            return self.user_index.places_of_text(squash(value)).keys()
        return self.user_index.places_of_number(as_decimal(value)).keys()

    def places(self, value: Any, keys: Sequence[str],
               spelled: Sequence[Spelled] = ()) -> set[int]:
        """The pieces ``value`` is written in, whole or in another spelling (``keys``: its
        ``canonical_of_value``; ``spelled``: the conversation's tokens it holds across
        separators)."""
        if isinstance(value, str):  # spelled in words: by what it spells (``keys``) only
            found = (set() if whole_in_words(fold(value)) is not None
                     else set(self.index.places_of_text(squash(value)).values()))
        else:
            found = set(self.index.places_of_number(as_decimal(value)).values())
        for key in keys:
            found.update(self.parts.get(key, ()))
        for token in spelled:  # the value is a token spelled across separators
            if token.whole:
                found.update(self.parts.get(token.canonical, ()))
        return found

    def is_echo(self, position: int, value: Any, keys: Sequence[str]) -> bool:
        """Whether the tool result at ``position`` holds ``value`` because its call's own
        arguments hold it (``echoes``)."""
        echoed = self.echo_texts.get(position)
        return echoed is not None and echoed.repeat(value, keys)

    def composed_by_user(self, value: Any, keys: Sequence[str]) -> bool:
        """A string none of the user's messages holds whole, whose every piece the user
        wrote (``keys``: its canonical spellings): a date from its year, month and day;
        else every word and number of it (at least two). Never a value spelled in words:
        its words are digits, not values ("two hundred" is not made of "two" and
        "hundred" written for other numbers)."""
        if not isinstance(value, str) or whole_in_words(fold(value)) is not None:
            return False
        for key in keys:
            if key.startswith(DATE + ":"):
                year, month, day = key.removeprefix(DATE + ":").split("-")
                months = {str(int(month))} | _MONTH_NAMES.get(int(month), set())
                return (year in self.user_words and str(int(day)) in self.user_words
                        and bool(months & self.user_words))
        tokens = _tokens(value)
        return len(tokens) >= 2 and all(token in self.user_words for token in tokens)


def _counted(distinct: Mapping[str, set[str]]) -> tuple[tuple[str, int], ...]:
    return tuple((kind, len(values)) for kind, values in distinct.items())


def _whole_results(pieces: Sequence[_Piece], reads: Sequence[Read],
                   distinct: Sequence[Mapping[str, set[str]]]) -> list[Read]:
    """Each tool result whole (the ``reads`` variable): every label any of its pieces has,
    and the distinct values counted over all of them."""
    results: list[Read] = []
    merged: dict[str, set[str]] = {}
    for position, piece in enumerate(pieces):
        if piece.result < 0:
            continue
        read = reads[position]
        if piece.result == len(results):  # its first piece
            merged = {}
            results.append(replace(read, item=-1))
        first = results[-1]
        for kind, values in distinct[position].items():
            merged.setdefault(kind, set()).update(values)
        labels = first.labels + tuple(label for label in read.labels
                                      if label not in first.labels)
        results[-1] = replace(first, labels=labels, counts=_counted(merged))
    return results


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
    from callgate_rules.provenance.text_values import MONTHS

    names: dict[int, set[str]] = {}
    for name, number in MONTHS.items():
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


@dataclass(frozen=True)
class LabelledRecord:
    """A record a look-up found, with the labels its look-up gives it and the look-up's key:
    a value of the call equal to one of its leaves, or to the key, carries the labels."""

    record: Mapping[str, Any]
    key: Any
    labels: tuple[str, ...]


def _keys_of(value: Any, canonical: Sequence[str] | None = None) -> list[str]:
    """How a leaf is compared with a value: its squashed text, and its canonical spellings
    (``canonical``: ``canonical_of_value(value)`` when the caller has it)."""
    keys = ["s:" + squash(value)] if isinstance(value, str) else []
    if isinstance(value, str) or isinstance(value, int | float) and not isinstance(value, bool):
        keys.extend(canonical_of_value(value) if canonical is None else canonical)
    return keys


class _RecordKeys:
    """The leaves of the records looked up for a call, and the labels of labelled ones."""

    def __init__(self, records: Sequence[Mapping[str, Any]],
                 labelled: Sequence[LabelledRecord]) -> None:
        self.keys = {key for leaf in _leaves(list(records)) for key in _keys_of(leaf)}
        self.labels: dict[str, list[str]] = {}
        for found in labelled:
            for leaf in [*_leaves(found.record), found.key]:
                for key in _keys_of(leaf):
                    given = self.labels.setdefault(key, [])
                    given.extend(label for label in found.labels if label not in given)

    def hold(self, keys: Iterable[str]) -> bool:
        return any(key in self.keys for key in keys)

    def labels_of(self, keys: Iterable[str]) -> list[str]:
        labels: list[str] = []
        for key in keys:
            labels.extend(label for label in self.labels.get(key, ()) if label not in labels)
        return labels


def _describe(index: ReadsIndex, places: Iterable[int], value: Any, keys: Sequence[str],
              records: _RecordKeys, record_keys: Sequence[str]) -> dict[str, Any]:
    """What a value (or a part) is told by the pieces it appears in, and by the records
    (``record_keys``: how it is compared with their leaves)."""
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
    composed = USER not in sources and index.composed_by_user(value, keys)
    if composed:
        sources.append(USER)
    if records.hold(record_keys):
        sources.append(RECORD)
    labels.extend(label for label in records.labels_of(record_keys) if label not in labels)
    return {"sources": sorted(sources, key=lambda kind: _ORDER.get(kind, 9)) + tools,
            "labels": labels, "turns": turns, "reads": reads, "echoes": echoes,
            "latest_turn": index.last_turn in turns and index.last_turn > 0,
            "composed": composed}


def origin_of(value: Any, index: ReadsIndex, evidence: Evidence,
              records: _RecordKeys) -> dict[str, Any]:
    """The ``origins`` entry of one argument leaf (see the module's docstring)."""
    keys = canonical_of_value(value)
    spelled: list[Spelled] = []
    if isinstance(value, str):  # "1-a-7-b-3-d"; "zulu one a seven b three d"
        folded = fold(value)
        spelled = spelled_in(folded, index.vocabulary)
        spelled += spelled_in_words(folded, index.vocabulary, spelled)
    if evidence(value):
        described = _describe(index, index.places(value, keys, spelled), value, keys,
                              records, _keys_of(value, keys))
        described["derived"] = _derived(value, keys, described, index, evidence, records)
    else:
        described = {"sources": ["indistinct"], "labels": [], "turns": [], "reads": [],
                     "echoes": [], "latest_turn": False, "composed": False, "derived": []}
    described["parts"] = (_parts_of(value, keys, spelled, index, records)
        if isinstance(value, str) else [])
    return described


def _number_of(value: Any, keys: Sequence[str]) -> Decimal | None:
    """A JSON number, or a string that is one number (``"1200.00"``), exactly."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = as_decimal(value)
        return number if number.is_finite() else None
    if isinstance(value, str) and len(keys) == 1 and keys[0].startswith(NUMBER + ":"):
        return Decimal(keys[0].removeprefix(NUMBER + ":"))
    return None


def _derived(value: Any, keys: Sequence[str], described: dict[str, Any], index: ReadsIndex,
             evidence: Evidence, records: _RecordKeys) -> list[dict[str, Any]]:
    """``origins.X.derived`` of a number written nowhere (see the module's docstring), and
    its operands' labels added to ``described``'s."""
    number = _number_of(value, keys)
    if number is None or described["sources"]:
        return []  # not a number, or found as written: an exact match wins
    operands: dict[str, dict[str, Any]] = {}

    def operand(written: Decimal, key: str) -> dict[str, Any] | None:
        """The operand's own origins; None when it has no source (only echoed) or is no
        evidence (fewer significant digits than a value needs to mean anything)."""
        if key not in operands:
            found = _describe(index, index.parts.get(key, ()), None, (key,), records, (key,))
            found.update(kind=NUMBER, text=plain(written), value=key)
            operands[key] = found
        found = operands[key]
        as_json = int(written) if written == written.to_integral_value() else float(written)
        return found if found["sources"] and evidence(as_json) else None

    derived: list[dict[str, Any]] = []
    labels: list[str] = described["labels"]
    for way in index.operands().derivations(number):
        first, second = (operand(way.first, way.first_key),
                         operand(way.second, way.second_key))
        if first is None or second is None:
            continue  # derived only from numbers whose origins are known
        combined = list(first["labels"])
        combined.extend(label for label in second["labels"] if label not in combined)
        labels.extend(label for label in combined if label not in labels)
        if len(derived) < MAX_DERIVED:
            derived.append({"operation": way.operation, "text": way.text, "labels": combined,
                            "operands": [first, second]})
    return derived


def _parts_of(value: str, keys: Sequence[str], spelled: Sequence[Spelled], index: ReadsIndex,
              records: _RecordKeys) -> list[dict[str, Any]]:
    """``origins.X.parts``: the values written inside a text, then those of the conversation
    it holds spelled across separators (``1-a-7-b-3-d``) and not written plainly too."""
    found = list(parts_of(value))
    written = {key for part in found for key in part.canonical}
    found.extend(TextPart(token.canonical.split(":", 1)[0], token.written, (token.canonical,))
                 for token in spelled if token.canonical not in written and not token.whole)
    parts = []
    for part in found:
        if part.canonical == keys:
            continue  # the value itself
        places: set[int] = set()
        for key in part.canonical:
            places.update(index.parts.get(key, ()))
        probe: Any = part.written if part.kind in (WORD, NAME) else None
        entry = _describe(index, places, probe, part.canonical, records, part.canonical)
        entry.update(part.as_variable())
        parts.append(entry)
    return parts


def trace_origins(arguments: Any, conversation: Conversation | None,
                  records: Sequence[Mapping[str, Any]], evidence: Evidence,
                  labeller: Labeller = no_labels,
                  labelled: Sequence[LabelledRecord] = ()) -> tuple[Any, list[dict[str, Any]]]:
    """The ``origins`` variable (the arguments' shape, each leaf its origins) and the
    ``reads`` variable (every tool result of the run so far, with its labels); ``labelled``:
    the looked-up records that carry labels (``labels.record_labels``)."""
    if isinstance(conversation, RecordedConversation) and conversation.origins is not None:
        return conversation.origins, list(conversation.reads or [])  # replayed: as it was
    record_keys = _RecordKeys(records, labelled)
    if (conversation is None or conversation.unreadable is not None or
            isinstance(conversation, RecordedConversation)):
        return unknown(arguments, record_keys), []  # replayed, but origins not recorded
    index = reads_index(conversation, labeller, evidence)

    def shaped(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {key: shaped(member) for key, member in value.items()}
        if isinstance(value, list):
            return [shaped(member) for member in value]
        return origin_of(value, index, evidence, record_keys)

    reads = [read.as_variable() for read in index.results]
    return shaped(arguments), reads


def unknown(arguments: Any, records: _RecordKeys | None = None) -> Any:
    """``origins`` without a conversation: every leaf's sources ``[unknown]``; its labels
    those of the labelled records it equals (they need no conversation)."""
    if isinstance(arguments, Mapping):
        return {key: unknown(member, records) for key, member in arguments.items()}
    if isinstance(arguments, list):
        return [unknown(member, records) for member in arguments]
    labels = [] if records is None else records.labels_of(_keys_of(arguments))
    return {"sources": ["unknown"], "labels": labels, "turns": [], "reads": [], "echoes": [],
            "latest_turn": False, "composed": False, "derived": [], "parts": []}
