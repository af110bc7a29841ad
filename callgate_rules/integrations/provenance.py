"""Where an argument value came from: the user's words, instructions, tool results, records.

The same well-formed call is legitimate or an attack depending on where a value came from:
the user typed the account number, or it appeared only inside a document the agent read.
Given the conversation that led to a proposal, ``trace_sources`` finds, for every leaf of
the arguments, the kinds of places it appears in:

- ``user`` — the user's own messages;
- ``system`` — system or developer instructions;
- ``tool`` (and ``tool:NAME``) — tool results (and which tool produced them);
- ``record`` — the records looked up for this call;
- ``unknown`` — the host passed no conversation, so nothing can be said;
- ``indistinct`` — the value is too short or too common (``1``, ``yes``, ``EUR``) for a
  match to mean anything, so it is neither traced nor counted as made up.

An empty list means *nowhere*: the model produced the value.

Matching tolerates the ordinary ways a value is re-written — case, white space inside
identifiers (``DE89 3704 0044`` vs ``de8937040044``), number formatting (``1,000.00`` vs
``1000``), a value embedded in a longer text — but a short or common value (``1``, ``yes``,
``the``) never counts as evidence: see ``Thresholds``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

USER = "user"
SYSTEM = "system"
TOOL = "tool"
RECORD = "record"
UNKNOWN = "unknown"
INDISTINCT = "indistinct"  # too short or too common to be traced either way

DEFAULT_COMMON_VALUES = frozenset({
    "yes", "no", "ok", "okay", "true", "false", "null", "none", "the", "and", "for", "you",
    "this", "that", "with", "from", "to", "of", "in", "on", "it", "is", "a", "an", "n/a",
    "test", "hello", "thanks", "please", "eur", "usd", "gbp",
})


@dataclass(frozen=True)
class Thresholds:
    """What counts as evidence. A string must have at least ``min_string_length``
    characters (ignoring white space) and not be a common word; a number must have at least
    ``min_number_digits`` significant digits. Booleans and null never count."""

    min_string_length: int = 4
    min_number_digits: int = 3
    common_values: frozenset[str] = DEFAULT_COMMON_VALUES


@dataclass(frozen=True)
class Segment:
    """One piece of the conversation with its origin."""

    kind: str  # user, system or tool
    text: str
    tool: str | None = None


@dataclass(frozen=True)
class Conversation:
    segments: tuple[Segment, ...]
    _folded: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def of(cls, segments: Sequence[Segment]) -> Conversation:
        return cls(tuple(segments), tuple(_fold(s.text) for s in segments))


# Reading the conversation -----------------------------------------------------------------


def read_conversation(value: Any) -> Conversation:
    """The OpenAI Chat Completions message list, an OpenAI Responses ``input`` list, or an
    Anthropic request (``{"system": ..., "messages": [...]}``) or its message list."""
    segments: list[Segment] = []
    tool_names: dict[str, str] = {}  # call id → tool name, to name a tool result's source
    if isinstance(value, Mapping):
        if "system" in value:
            segments.extend(_text_segments(SYSTEM, value["system"]))
        value = value.get("messages", value.get("input", []))
    if not isinstance(value, list):
        raise ValueError("a conversation must be a list of messages (OpenAI or Anthropic "
                         "format) or an object with messages/input")
    for message in value:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        kind = message.get("type")
        if kind == "function_call":  # Responses: the model's own call
            tool_names[str(message.get("call_id"))] = str(message.get("name"))
            continue
        if kind == "function_call_output":
            segments.append(Segment(TOOL, _as_text(message.get("output")),
                                    tool_names.get(str(message.get("call_id")))))
            continue
        if role in ("system", "developer"):
            segments.extend(_text_segments(SYSTEM, message.get("content")))
        elif role == "user":
            segments.extend(_user_content(message.get("content"), tool_names))
        elif role == "tool":  # Chat Completions tool result
            segments.append(Segment(TOOL, _as_text(message.get("content")),
                                    tool_names.get(str(message.get("tool_call_id")))))
        elif role == "assistant":
            _remember_calls(message, tool_names)  # the model's words are never evidence
    return Conversation.of(segments)


def _remember_calls(message: Mapping[str, Any], tool_names: dict[str, str]) -> None:
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
            tool_names[str(call.get("id"))] = str(call["function"].get("name"))
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                tool_names[str(block.get("id"))] = str(block.get("name"))


def _user_content(content: Any, tool_names: Mapping[str, str]) -> Iterator[Segment]:
    """Anthropic puts tool results inside user messages: those are not the user's words."""
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                yield Segment(TOOL, _as_text(block.get("content")),
                              tool_names.get(str(block.get("tool_use_id"))))
            else:
                yield from _text_segments(USER, [block])
    else:
        yield from _text_segments(USER, content)


def _text_segments(kind: str, content: Any) -> Iterator[Segment]:
    text = _as_text(content)
    if text:
        yield Segment(kind, text)


def _as_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, Mapping) and "content" in block:
                parts.append(_as_text(block["content"]))
            elif isinstance(block, str):
                parts.append(block)
            else:
                parts.append(json.dumps(block, ensure_ascii=False, default=str))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, default=str)


# Matching ---------------------------------------------------------------------------------------


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _squash(folded: str) -> str:
    return folded.replace(" ", "")


# A number as people write it: digit groups joined by one separator (1,000.00; 1 000,00;
# 1'000), or plain digits with decimals. ", " ends a number: "0042, 1,200.50" is two.
_NUMBER = re.compile(
    r"(?<![\w.,])[-+]?(?:\d{1,3}(?:[ ,.'\u00a0\u202f]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?)"
    r"(?![\w])")


def _numbers_in(text: str) -> Iterator[Decimal]:
    """Every number written in ``text``, read with both decimal conventions where they
    differ (``1,000.00`` and ``1.000,00`` are both 1000)."""
    for match in _NUMBER.finditer(text):
        raw = re.sub(r"[\s'\u00a0\u202f]", "", match.group(0))
        yield from _readings(raw)


def _readings(raw: str) -> Iterator[Decimal]:
    options = {raw.replace(",", ""), raw.replace(".", "").replace(",", ".")}
    for option in options:
        try:
            yield Decimal(option)
        except InvalidOperation:
            continue


def _significant_digits(number: Decimal) -> int:
    """Digits as the number is written plainly: 1000 → 4, 250.5 → 4, 0.05 → 1."""
    plain = format(abs(number).normalize(), "f").replace(".", "").lstrip("0")
    return len(plain)


def is_evidence(value: Any, thresholds: Thresholds) -> bool:
    """Whether ``value`` is distinctive enough for a match to mean anything."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            return False
        return _significant_digits(number) >= thresholds.min_number_digits
    if isinstance(value, str):
        # the length as written: NFKC may expand one character into several ("¼" → "1⁄4")
        length = len("".join(value.split()))
        return (min(length, len(_squash(_fold(value)))) >= thresholds.min_string_length
                and _fold(value) not in thresholds.common_values)
    return False


def _pattern(value: str) -> re.Pattern[str]:
    """The value's characters with any white space between them, not inside a longer word:
    ``DE89 3704 0044`` in a message matches the argument ``de8937040044`` and vice versa."""
    chars = _squash(_fold(value))
    body = r"\s*".join(re.escape(c) for c in chars)
    start = r"(?<![^\W_])" if chars[:1].isalnum() else ""
    end = r"(?![^\W_])" if chars[-1:].isalnum() else ""
    return re.compile(start + body + end)


def _found_in(value: Any, folded: str) -> bool:
    if isinstance(value, str):
        return _pattern(value).search(folded) is not None
    number = Decimal(str(value))
    return any(candidate == number for candidate in _numbers_in(folded))


def sources_of(value: Any, conversation: Conversation | None,
               records: Sequence[Mapping[str, Any]], thresholds: Thresholds) -> list[str]:
    """The kinds of places one leaf value appears in, most trustworthy first."""
    if conversation is None:
        return [UNKNOWN]
    if not is_evidence(value, thresholds):
        return [INDISTINCT]
    found: list[str] = []
    tools: list[str] = []
    for segment, folded in zip(conversation.segments, conversation._folded, strict=True):
        if not _found_in(value, folded):
            continue
        if segment.kind == TOOL:
            if TOOL not in found:
                found.append(TOOL)
            if segment.tool and f"{TOOL}:{segment.tool}" not in tools:
                tools.append(f"{TOOL}:{segment.tool}")
        elif segment.kind not in found:
            found.append(segment.kind)
    if any(_equal_leaf(value, leaf) for record in records for leaf in _leaves(record)):
        found.append(RECORD)
    order = {USER: 0, SYSTEM: 1, RECORD: 2, TOOL: 3}
    return sorted(found, key=lambda kind: order.get(kind, 9)) + tools


def _equal_leaf(value: Any, leaf: Any) -> bool:
    if isinstance(value, str) and isinstance(leaf, str):
        return _squash(_fold(value)) == _squash(_fold(leaf))
    if isinstance(value, int | float) and isinstance(leaf, int | float) \
            and not isinstance(value, bool) and not isinstance(leaf, bool):
        return Decimal(str(value)) == Decimal(str(leaf))
    return False


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def trace_sources(arguments: Any, conversation: Conversation | None,
                  records: Sequence[Mapping[str, Any]], thresholds: Thresholds) -> Any:
    """The ``provenance`` variable: the arguments' shape, each leaf replaced by its sources."""
    if isinstance(arguments, Mapping):
        return {key: trace_sources(value, conversation, records, thresholds)
                for key, value in arguments.items()}
    if isinstance(arguments, list):
        return [trace_sources(value, conversation, records, thresholds) for value in arguments]
    return sources_of(arguments, conversation, records, thresholds)


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
