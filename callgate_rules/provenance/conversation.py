"""A conversation as provenance reads it: pieces of text, each with the kind of place it came
from, and why nothing can be said when it could not be read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate_rules.errors import CallgateError

USER = "user"
SYSTEM = "system"
TOOL = "tool"
RECORD = "record"
UNKNOWN = "unknown"
INDISTINCT = "indistinct"  # too short or too common to be traced either way


class ConversationError(CallgateError, ValueError):
    """What the host passed as the conversation is not one at all (a string, a number, an
    object without a message list): a mistake in the host's code, raised to the host.

    A list of messages that holds something malformed is not this error: it is read as a
    conversation that cannot be read (``Conversation.unreadable``), whose values' origin is
    ``unknown``. A ``ValueError`` too, as before this class existed."""


@dataclass(frozen=True)
class Segment:
    """One piece of the conversation with its origin."""

    kind: str  # user, system or tool
    text: str
    tool: str | None = None  # for a tool result: the tool that produced it, when known
    # The user turn this piece belongs to or follows (1 = the first user message; 0 before
    # any), and for a tool result the arguments of the model's call it answers, as JSON
    # text when known: what ``origins`` tells echoes and "named by the user" with.
    turn: int = 0
    arguments: str | None = None


@dataclass(frozen=True)
class Conversation:
    """The readable pieces of a conversation, in order.

    ``unreadable`` says why, when part of it could not be read (malformed, too large or too
    deep): then nothing can be said about any value, as without a conversation. ``notes``
    records what was skipped or not trusted while reading, for the trace and the log.
    """

    segments: tuple[Segment, ...]
    unreadable: str | None = None
    notes: tuple[str, ...] = ()
    # The normalised text and its index, built on first use and kept for every argument.
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False,
                                   hash=False)

    @classmethod
    def of(cls, segments: Sequence[Segment], *, unreadable: str | None = None,
           notes: Sequence[str] = ()) -> Conversation:
        return cls(tuple(segments), unreadable, tuple(notes))


@dataclass(frozen=True)
class RecordedConversation(Conversation):
    """A conversation known only by what it told the decision at the time (the decision
    log's ``provenance``, ``origins`` and ``reads``): what ``callgate replay`` decides
    again with. ``trace_sources`` answers with ``sources``, ``trace_origins`` with
    ``origins`` and ``reads``, as they were recorded."""

    sources: Any = None
    origins: Any = None  # None: not recorded (a tool whose rules did not read origins)
    reads: Any = None
