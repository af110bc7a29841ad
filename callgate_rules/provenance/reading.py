"""Reading a conversation in the model APIs' formats, within bounds.

Three formats: an OpenAI Chat Completions message list, an OpenAI Responses ``input`` list,
an Anthropic request (``{"system": ..., "messages": [...]}``) or its message list. What is
read: the user's messages, system and developer instructions, and tool results (with the
tool that produced them, found through the model's own calls). The model's words are never
evidence, and neither are the gate's own (a tool result carrying the gate's seal).

How a conversation that is not what it should be ends:

- not a conversation at all (a string, a number, an object without a message list):
  ``ConversationError``, a mistake in the host's code;
- an entry of the list that is not an object: skipped with a note; a role or item type
  this reader does not know (a reasoning item, an image): skipped, as before;
- a message of a known kind that is malformed (``tool_calls`` that is not a list, content
  of an unreadable value), or a conversation past the reading limits (characters, items,
  nesting): the whole conversation is *unreadable* and every value's origin is ``unknown``.
  Reading only part of it would call a value made up that may sit in the unread part.

Reading is iterative or bounded in depth everywhere, so its cost is linear in the size of
what it reads and stops at the limits, whatever the host passes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate_rules.provenance.conversation import (
    SYSTEM,
    TOOL,
    USER,
    Conversation,
    ConversationError,
    Segment,
)
from callgate_rules.provenance.seal import Sealer, default_sealer, split_seal


@dataclass(frozen=True)
class ReadingLimits:
    """How much of a conversation the gate reads before it stops and calls it unreadable:
    characters of text, items (messages, content blocks and JSON values together), and
    nesting depth of content."""

    max_characters: int = 8_000_000
    max_items: int = 100_000
    max_depth: int = 64


DEFAULT_LIMITS = ReadingLimits()
# A number written with more digits than this cannot be turned into text in bounded time
# (Python refuses past 4,300 digits by default, and is quadratic without that limit).
_MAX_INTEGER_BITS = 13_288  # 4,000 decimal digits
_NOT_A_CONVERSATION = ("a conversation must be a list of messages (OpenAI or Anthropic "
                       "format) or an object with messages/input")
_ABSENT = object()


class _Unreadable(Exception):
    """Raised inside the reader to stop at the first part it cannot read."""


def read_conversation(value: Any, *, sealer: Sealer | None = None,
                      limits: ReadingLimits = DEFAULT_LIMITS) -> Conversation:
    """The conversation ``value`` as pieces of text with their origins.

    ``sealer`` recognises the gate's own messages (by default ``default_sealer()``, the one
    the formats helpers seal with when the gate gives them none). Raises
    ``ConversationError`` when ``value`` is not a conversation at all; a conversation that
    cannot be read comes back with ``unreadable`` set instead; one already read, as it is."""
    if isinstance(value, Conversation):
        return value
    system, messages = _system_and_messages(value)
    reader = _Reader(limits, sealer if sealer is not None else default_sealer())
    if len(messages) >= limits.max_items:  # each message is an item: stop before reading
        return Conversation.of((), unreadable=reader.too_many())
    try:
        if system is not _ABSENT:
            reader.add(SYSTEM, reader.text(system, "the system prompt"))
        reader.count_item()
        for index, message in enumerate(messages):
            reader.message(index, message)
    except _Unreadable as problem:
        return Conversation.of((), unreadable=str(problem), notes=reader.notes)
    return Conversation.of(reader.segments, notes=reader.notes)


def _system_and_messages(value: Any) -> tuple[Any, Sequence[Any]]:
    system: Any = _ABSENT
    messages = value
    if isinstance(value, Mapping):
        if "system" in value:
            system = value["system"]
        messages = value.get("messages", value.get("input", []))
    if not isinstance(messages, list):
        raise ConversationError(f"{_NOT_A_CONVERSATION}, not {_describe(messages)}")
    return system, messages


def _describe(value: Any) -> str:
    return "nothing (null)" if value is None else f"a value of type {type(value).__name__}"


class _Reader:
    """One reading: the segments so far, the tools' names by call ID, and the budgets."""

    def __init__(self, limits: ReadingLimits, sealer: Sealer) -> None:
        self.limits = limits
        self.sealer = sealer
        self.segments: list[Segment] = []
        self.notes: list[str] = []
        self.tool_names: dict[str, str] = {}  # call ID → tool name, to name a result's source
        self.tool_arguments: dict[str, str] = {}  # call ID → the call's arguments, as text
        self.turn = 0  # user messages read so far
        self.characters = 0
        self.items = 0

    # -- messages ---------------------------------------------------------------------

    def message(self, index: int, message: Any) -> None:
        where = f"message {index}"
        self.count_item()
        if not isinstance(message, Mapping):
            self.notes.append(f"{where}: {_describe(message)}, not a message; skipped")
            return
        role, kind = message.get("role"), message.get("type")
        if kind == "function_call":  # Responses: the model's own call
            self.remember(message.get("call_id"), message.get("name"), message.get("arguments"))
        elif kind == "function_call_output":
            self.tool_result(message.get("output"), message.get("call_id"), where)
        elif role in ("system", "developer"):
            self.add(SYSTEM, self.text(message.get("content"), where))
        elif role == "user":
            self.user(message.get("content"), where)
        elif role == "tool":  # Chat Completions tool result
            self.tool_result(message.get("content"), message.get("tool_call_id"), where)
        elif role == "assistant":
            self.assistant(message, where)  # the model's words are never evidence

    def user(self, content: Any, where: str) -> None:
        """Anthropic puts tool results inside user messages: those are not the user's words."""
        if not isinstance(content, list) or not all(
                isinstance(block, Mapping) and block.get("type") == "tool_result"
                for block in content):
            self.turn += 1
        if not isinstance(content, list):
            self.add(USER, self.text(content, where))
            return
        for position, block in enumerate(content):
            at = f"{where}, block {position}"
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                self.count_item()
                self.tool_result(block.get("content"), block.get("tool_use_id"), at)
            else:
                self.add(USER, self.text([block], at))

    def assistant(self, message: Mapping[str, Any], where: str) -> None:
        calls = message.get("tool_calls")
        if calls:
            if not isinstance(calls, list | tuple):
                raise _Unreadable(f"{where}: tool_calls is {_describe(calls)}, not a list")
            for call in calls:
                self.count_item()
                if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
                    self.remember(call.get("id"), call["function"].get("name"),
                                  call["function"].get("arguments"))
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                self.count_item()
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    self.remember(block.get("id"), block.get("name"), block.get("input"))

    def tool_result(self, content: Any, call_id: Any, where: str) -> None:
        text = self.text(content, where)
        answers = call_id if isinstance(call_id, str) else ""
        if self.sealer.is_gates_own(text, answers):
            return  # the gate's own words: never evidence
        if split_seal(text) is not None:
            self.notes.append(f"{where}: carries a callgate seal that does not verify (another "
                              "secret, another call, or forged); read as a tool result")
        self.segments.append(Segment(TOOL, text, self.tool_names.get(answers), self.turn,
                                     self.tool_arguments.get(answers)))

    def remember(self, call_id: Any, name: Any, arguments: Any = None) -> None:
        if isinstance(call_id, str) and isinstance(name, str):
            self.tool_names[call_id] = name
            if isinstance(arguments, str):
                self.tool_arguments[call_id] = self.chars(arguments)
            elif isinstance(arguments, Mapping):
                self.tool_arguments[call_id] = self.json_text(arguments, "a call's input", 1)

    def add(self, kind: str, text: str) -> None:
        if text:
            self.segments.append(Segment(kind, text, None, self.turn))

    # -- content as text --------------------------------------------------------------

    def text(self, content: Any, where: str, depth: int = 0) -> str:
        """The text of a message's content: a string, a list of content blocks (their
        ``text``, or their own ``content``), or any other value as its JSON text."""
        if content is None:
            return ""
        if isinstance(content, str):
            return self.chars(content)
        if not isinstance(content, list):
            return self.json_text(content, where, depth)
        self.count_item()
        if depth >= self.limits.max_depth:
            raise self.too_deep(where)
        parts = []
        for block in content:
            self.count_item()
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(self.chars(block["text"]))
            elif isinstance(block, Mapping) and "content" in block:
                parts.append(self.text(block["content"], where, depth + 1))
            elif isinstance(block, str):
                parts.append(self.chars(block))
            else:
                parts.append(self.json_text(block, where, depth + 1))
        return "\n".join(parts)

    def json_text(self, value: Any, where: str, depth: int) -> str:
        """``value`` as JSON text, after checking (without recursion) that writing it stays
        within the limits: ``json.dumps`` itself recurses and refuses huge integers."""
        pending = [(value, depth)]
        while pending:
            item, level = pending.pop()
            self.count_item()
            if level > self.limits.max_depth:
                raise self.too_deep(where)
            if isinstance(item, dict):
                for key, member in item.items():
                    self.check_key(key, where)
                    pending.append((member, level + 1))
            elif isinstance(item, list | tuple):
                pending.extend((member, level + 1) for member in item)
            elif isinstance(item, int) and item.bit_length() > _MAX_INTEGER_BITS:
                raise _Unreadable(f"{where}: a number with more than 4,000 digits")
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError, OverflowError) as error:
            raise _Unreadable(
                f"{where}: content that cannot be read as text ({error})") from None
        return self.chars(text)

    def check_key(self, key: Any, where: str) -> None:
        if isinstance(key, int) and key.bit_length() > _MAX_INTEGER_BITS:
            raise _Unreadable(f"{where}: a number with more than 4,000 digits")
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise _Unreadable(f"{where}: an object key of type {type(key).__name__}")

    # -- budgets ----------------------------------------------------------------------

    def chars(self, text: str) -> str:
        self.characters += len(text)
        if self.characters > self.limits.max_characters:
            raise _Unreadable(f"the conversation is longer than "
                              f"{self.limits.max_characters:,} characters")
        return text

    def count_item(self) -> None:
        self.items += 1
        if self.items > self.limits.max_items:
            raise _Unreadable(self.too_many())

    def too_many(self) -> str:
        return (f"the conversation has more than {self.limits.max_items:,} messages, blocks "
                "and values")

    def too_deep(self, where: str) -> _Unreadable:
        return _Unreadable(f"{where}: content nested deeper than {self.limits.max_depth}")
