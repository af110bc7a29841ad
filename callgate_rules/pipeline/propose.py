"""Step 1 — PROPOSE: accept the model's raw output in the formats of the big APIs.

Recognised shapes (a JSON text, bytes, or the decoded object):

- OpenAI Chat Completions: a completion (``choices[0].message``), an assistant message with
  ``tool_calls``, the ``tool_calls`` list, or one item ``{"type": "function", "function":
  {"name", "arguments"}}`` — arguments as a JSON string;
- OpenAI Responses: a response with ``output``, or ``{"type": "function_call", "name",
  "arguments", "call_id"}`` items;
- Anthropic Messages: a message with ``content`` blocks, or ``{"type": "tool_use", "name",
  "input", "id"}`` blocks;
- plain ``{"name": ..., "arguments": ...}`` with arguments as a JSON string or an object.

This step only finds the calls; ``parse`` bounds them and takes exactly one.

A JSON text is read by ``read_json``: what ``json.loads`` reads, except that an object
repeating a key is ``malformed`` (decoders disagree on which of the two it means, so the
text does not say which call it is: ``{"name": "readTicket", ..., "name": "deleteTicket"}``
must not quietly become the second tool), and, for the arguments, a number JSON cannot
carry (``NaN``, ``Infinity``, a literal beyond a double's range) is ``NonFiniteNumber``,
which ``parse`` makes ``invalid_argument`` for the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple, TypeGuard

import msgspec

from callgate_rules.canonical import (
    FAST_REFUSALS,
    REFUSED,
    RepeatedKey,
    may_repeat_a_key,
    read_fast,
    unique_keys,
)
from callgate_rules.documents.model import InputLimits
from callgate_rules.pipeline.decision import RawTraceEntry
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.taxonomy import ErrorClass


class ProposedCall(NamedTuple):  # a tuple: made for every call, at a third of a dataclass's cost
    name: Any  # not yet checked: the model may send anything
    arguments: Any  # a JSON string or an already decoded value
    call_id: str | None
    format: str  # one of FORMATS


FORMATS = ("openai-chat", "openai-responses", "anthropic", "plain")


# ``ProposedCall(*fields)`` is ``_new_tuple(ProposedCall, fields)`` without the Python-level
# ``__new__`` a NamedTuple has: one C call
_new_tuple = tuple.__new__


def read(output: Any, limits: InputLimits) -> list[ProposedCall]:
    """Every call in ``output``; raises ``Rejection(malformed)`` when there is none."""
    # ``type(output) is str`` first: the commonest output, told apart without a call
    if type(output) is not str and isinstance(output, (bytes, bytearray)):  # noqa: UP038
        if len(output) > limits.max_bytes:
            raise _too_large(len(output), limits)
        try:
            output = output.decode("utf-8")
        except UnicodeDecodeError:
            raise Rejection(ErrorClass.MALFORMED, "model output is not UTF-8") from None
    if type(output) is str or isinstance(output, str):
        size = len(output) if output.isascii() else len(output.encode("utf-8", "surrogatepass"))
        if size > limits.max_bytes:
            raise _too_large(size, limits)
        chat = _chat_message(output)
        if chat is not None:
            return chat
        output = read_json(output, "model output is")
    calls = _one_chat_call(output) or _calls_in(output, limits.max_calls, 0)
    if calls is None:
        raise Rejection(
            ErrorClass.MALFORMED,
            "no tool call found: expected OpenAI tool_calls, an OpenAI Responses "
            "function_call, an Anthropic tool_use block, or {\"name\", \"arguments\"}",
        )
    if not calls:
        raise Rejection(ErrorClass.MALFORMED, "the message holds no tool call")
    return calls


# A decision reads two JSON texts, msgspec first (``canonical.read_fast``): whatever it
# refuses goes to ``json.loads``, which then decides, so a text means exactly what it means
# to ``json`` (tests/pipeline/test_json_decoding.py holds the two to that).


def entry(calls: list[ProposedCall]) -> RawTraceEntry:
    """The trace entry of what was proposed: the format, and how many calls."""
    if len(calls) == 1:
        return _ONE_CALL_IN.get(calls[0].format) or _proposed(calls[0].format, 1)
    return _proposed(calls[0].format, len(calls))


def _proposed(format: str, calls: int) -> RawTraceEntry:
    return ("propose", "format", format, "1 call" if calls == 1 else f"{calls} calls")


_ONE_CALL_IN = {format: _proposed(format, 1) for format in FORMATS}  # the commonest, made once


class NonFiniteNumber(ValueError):
    """A number JSON cannot carry, read from the arguments: NaN, ±Infinity, or a literal
    beyond a double's range (which Python reads as infinity). Never compared with a bound:
    NaN passes every comparison's negation, so ``NaN > 10000`` would not refuse it."""

    def __init__(self, field: str, value: float) -> None:
        super().__init__(f"{field}: {value}")
        self.field = field
        self.value = value


def read_json(text: str, what: str, *, finite: bool = False) -> Any:
    """The model's JSON text as the gate reads it (see the module's docstring): malformed
    when it is not JSON or an object repeats a key; with ``finite``, ``NonFiniteNumber``
    for the first number JSON cannot carry. ``what`` names the text with its verb."""
    value = read_fast(text)
    if value is REFUSED:
        value = _decode_exact(text, what)
        if finite:  # msgspec refuses every text that holds such a number: only here
            refuse_non_finite(value)
    if may_repeat_a_key(text, value):
        _refuse_repeated_key(text, what)
    return value


# An object of plain values (no object or list inside): the commonest arguments.
_decode_flat = msgspec.json.Decoder(dict[str, str | int | float | bool | None]).decode


def read_flat_object(text: str, what: str) -> dict[str, Any] | None:
    """``read_json(text, what, finite=True)`` for a text that is one object of plain values,
    ``None`` for any other text (which ``read_json`` then reads). Its value is within every
    bound but the length of the whole text: nested once, and, as msgspec reads it, no NaN
    or infinity and no lone surrogate in any string (it refuses such texts)."""
    if type(text) is not str:  # msgspec takes no str subclass
        return None
    try:
        value = _decode_flat(text)
    except FAST_REFUSALS:  # another shape (a ValidationError is a DecodeError), or not JSON
        return None
    if may_repeat_a_key(text, value):
        _refuse_repeated_key(text, what)
    return value


def _refuse_repeated_key(text: str, what: str) -> None:
    """``malformed`` when an object of ``text`` (which ``may_repeat_a_key`` could not
    clear) repeats a key."""
    key = _repeated_key(text)
    if key is not None:
        raise Rejection(ErrorClass.MALFORMED, f"{what} ambiguous: the key {key[:100]!r} "
                        "appears twice in one object")


class _ChatFunction(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    name: Any
    arguments: Any


class _ChatItem(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    id: Any
    type: Literal["function"]
    function: _ChatFunction


class _ChatMessage(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The commonest model output, an OpenAI Chat assistant message with one function call,
    exactly: these members, each once, no others. Every field is required, so a text that
    decodes to it has at least these eight members (``_CHAT_MEMBERS``). Not tracked by the
    garbage collector (``gc=False``): decoded JSON holds no cycle, and these live for one
    reading."""

    role: Any
    content: Any
    tool_calls: tuple[_ChatItem]


_CHAT_MEMBERS = 3 + 3 + 2
_decode_chat = msgspec.json.Decoder(_ChatMessage).decode


def _chat_message(text: str) -> list[ProposedCall] | None:
    """``read_json`` and then ``_calls_in`` for a text of exactly ``_ChatMessage``'s shape,
    the shape checked and the value built by msgspec in one pass; ``None`` for any other
    text, which the general reading then reads (and refuses, if it must, as it always has).

    No key repeats: the text's colons number its members plus the colons inside its strings
    (as in ``may_repeat_a_key``). The eight required members and the colons of the
    arguments string (when no ``\\u003a`` escape spells one) are a part of that count;
    equal to all of it, they leave no member to repeat a key, nor any other object."""
    if type(text) is not str:  # msgspec takes no str subclass
        return None
    try:
        message = _decode_chat(text)
    except FAST_REFUSALS:  # another shape (a ValidationError is a DecodeError), or not JSON
        return None
    item = message.tool_calls[0]
    function = item.function
    arguments = function.arguments
    accounted = (_CHAT_MEMBERS + arguments.count(":") if type(arguments) is str
        else _CHAT_MEMBERS)
    if text.count(":") != accounted or "u003" in text:
        return None  # strings or objects not counted here: the general proof decides
    call_id = item.id
    return [_new_tuple(ProposedCall, (function.name, arguments,
                                      call_id if type(call_id) is str else None, "openai-chat"))]


def decode_json(text: str, what: str) -> Any:
    """``json.loads`` with every way it can fail turned into ``malformed``; ``what`` names
    the text with its verb ("arguments are")."""
    value = read_fast(text)
    return _decode_exact(text, what) if value is REFUSED else value


def _decode_exact(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise Rejection(
            ErrorClass.MALFORMED,
            f"{what} not valid JSON: {error.msg} at line {error.lineno} column {error.colno}",
        ) from None
    except RecursionError:
        raise Rejection(ErrorClass.MALFORMED, f"{what} nested too deeply") from None
    except ValueError as error:  # e.g. an integer literal of thousands of digits
        raise Rejection(ErrorClass.MALFORMED, f"{what} not readable: {error}") from None


def _repeated_key(text: str) -> str | None:
    """The first key an object of ``text`` (valid JSON) repeats, or ``None``."""
    try:
        json.loads(text, object_pairs_hook=unique_keys)
    except RepeatedKey as repeated:
        return str(repeated.args[0])
    except (ValueError, RecursionError):
        return None  # read once already; the first reading decided how it fails
    return None


def refuse_non_finite(value: Any) -> None:
    """Raise ``NonFiniteNumber`` for the first non-finite number in ``value`` (arguments),
    naming its field; iteratively, as a hostile value may nest deeply."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise NonFiniteNumber(".".join(path) or "arguments", item)
        if isinstance(item, dict):
            stack.extend((child, (*path, str(key))) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((child, (*path, str(index)))
                         for index, child in reversed(list(enumerate(item))))


def _too_large(size: int, limits: InputLimits) -> Rejection:
    return Rejection(
        ErrorClass.MALFORMED,
        f"model output is {size} bytes, more than the limit of {limits.max_bytes}",
        extra={"bound": "max_bytes"},
    )


# How deep the formats nest their calls (a list of choices, a message, its tool_calls, a
# call); an object nested deeper than this holds no call the gate reads, and is not walked.
_MAX_NESTING = 8


def _calls_in(value: Any, max_calls: int = 1 << 62, depth: int = 0) -> list[ProposedCall] | None:
    """The calls in ``value``, ``[]`` for a recognised message with none, ``None`` if unknown.
    An already-decoded object is bounded as a text is: no deeper than the formats nest, and
    reading stops past ``max_calls`` calls (``malformed``, as parse would say)."""
    if depth > _MAX_NESTING:
        return None
    if isinstance(value, list):
        found: list[ProposedCall] = []
        recognised = False
        last = len(value) - 1
        for index, item in enumerate(value):
            calls = _calls_in(item, max_calls, depth + 1)
            if calls is not None:
                recognised = True
                found.extend(calls)
                if len(found) > max_calls and index < last:  # the count, were it read whole
                    raise Rejection(ErrorClass.MALFORMED, f"the message holds more than "
                                    f"{max_calls} calls, the limit",
                                    extra={"bound": "max_calls"})
        return found if recognised else None
    # isinstance(x, dict) first: decoded JSON is a dict, and the Mapping check is slower.
    if not (isinstance(value, dict) or isinstance(value, Mapping)):
        return None
    get = value.get
    # Containers: a completion, a response, a message.
    choices = get("choices")
    if isinstance(choices, list) and choices:
        first = choices[0]
        return (_calls_in(first.get("message"), max_calls, depth + 1)
            if _is_mapping(first) else None)
    if "tool_calls" in value:
        tool_calls = value["tool_calls"]
        return (_calls_in(tool_calls, max_calls, depth + 1) or []
            if isinstance(tool_calls, list) else None)
    if isinstance(get("output"), list) and "name" not in value:
        return _calls_in(value["output"], max_calls, depth + 1) or []
    if isinstance(get("content"), list) and get("role") == "assistant":
        return _calls_in(value["content"], max_calls, depth + 1) or []
    # Single calls.
    kind = get("type")
    function = get("function")
    if kind == "function" and _is_mapping(function):
        return [_new_tuple(ProposedCall, (function.get("name"), function.get("arguments"),
                                          _str_or_none(get("id")), "openai-chat"))]
    if kind == "function_call":
        return [_new_tuple(ProposedCall, (get("name"), get("arguments"),
                                          _str_or_none(get("call_id") or get("id")),
                                          "openai-responses"))]
    if kind == "tool_use":
        return [_new_tuple(ProposedCall, (get("name"), get("input"), _str_or_none(get("id")),
                                          "anthropic"))]
    if kind in ("text", "message", "reasoning", "thinking"):
        return []  # a recognised block that is not a call
    if "name" in value and ("arguments" in value or "input" in value):
        arguments = value["arguments"] if "arguments" in value else value["input"]
        return [_new_tuple(ProposedCall, (value["name"], arguments, _str_or_none(get("id")),
                                          "plain"))]
    return None


def _one_chat_call(value: Any) -> list[ProposedCall] | None:
    """``_calls_in`` for the commonest output, an OpenAI Chat message with one function
    call, found with a fraction of its look-ups; ``None`` for any other shape, which
    ``_calls_in`` then reads. (Every test below is one ``_calls_in`` makes, in its order.)"""
    if type(value) is not dict or "choices" in value:
        return None
    tool_calls = value.get("tool_calls")
    if type(tool_calls) is not list or len(tool_calls) != 1:
        return None
    item = tool_calls[0]
    if (type(item) is not dict or "choices" in item or "tool_calls" in item
            or isinstance(item.get("output"), list) or isinstance(item.get("content"), list)
            or item.get("type") != "function"):
        return None
    function = item.get("function")
    if type(function) is not dict:
        return None
    call_id = item.get("id")
    return [_new_tuple(ProposedCall, (function.get("name"), function.get("arguments"),
                                      call_id if isinstance(call_id, str) else None,
                                      "openai-chat"))]


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, dict) or isinstance(value, Mapping)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
