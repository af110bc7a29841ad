"""The short cut for the commonest model output (``propose._chat_message``: an OpenAI Chat
message with one function call, decoded into a fixed shape, and its colons counted instead
of a second reading) reads exactly what the general reading does: the same calls, and the
same refusal, word for word, when an object repeats a key."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.documents.model import InputLimits
from callgate_rules.pipeline import propose
from callgate_rules.pipeline.outcome import Rejection

LIMITS = InputLimits()
texts = st.text(alphabet=st.sampled_from(['a', ':', '"', '\\', ' ', 'é', '{', '}']), max_size=6)
scalars = st.none() | st.booleans() | st.integers(-5, 5) | texts
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=2)
                      | st.lists(st.tuples(st.sampled_from(["k", "a:b", "role"]), inner),
                                 max_size=2).map(lambda pairs: ("object", pairs)), max_leaves=4)


def spelled(value: Any, escape_colons: bool) -> str:
    """``value`` as JSON text; ``("object", pairs)`` is an object written pair by pair, so
    a key may repeat."""
    if isinstance(value, tuple):
        return "{" + ", ".join(f"{spelled(key, escape_colons)}: {spelled(item, escape_colons)}"
                               for key, item in value[1]) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(spelled(item, escape_colons) for item in value) + "]"
    text = json.dumps(value)
    return text.replace(":", "\\u003a") if escape_colons and isinstance(value, str) else text


def message(role: Any, content: Any, call_id: Any, name: Any, arguments: Any,
            repeated: str | None, extra: bool) -> tuple[Any, ...]:
    function = [("name", name), ("arguments", arguments)]
    item = [("id", call_id), ("type", "function"), ("function", ("object", function))]
    top = [("role", role), ("content", content), ("tool_calls", [("object", item)])]
    if extra:
        top.append(("refusal", None))
    for members in (function, item, top):
        if repeated is not None and members[0][0] == repeated:
            members.append(members[0])
    return ("object", top)


def general(text: str) -> Any:
    """What the gate read before the short cut: the whole text, then its calls."""
    value = propose.read_json(text, "model output is")
    return propose._one_chat_call(value) or propose._calls_in(value, LIMITS.max_calls, 0)


def outcome(reading: Any, text: str) -> Any:
    try:
        return reading(text)
    except Rejection as rejection:
        return ("refused", rejection.error_class, rejection.detail)


@settings(max_examples=500, deadline=None)
@given(role=values, content=values, call_id=values, name=values,
       arguments=values | st.builds(lambda v, e: spelled(v, e), values, st.booleans()),
       repeated=st.sampled_from([None, None, "name", "id", "role"]), extra=st.booleans(),
       escape_colons=st.booleans())
def test_the_short_cut_reads_what_the_general_reading_reads(
        role: Any, content: Any, call_id: Any, name: Any, arguments: Any,
        repeated: str | None, extra: bool, escape_colons: bool) -> None:
    text = spelled(message(role, content, call_id, name, arguments, repeated, extra),
                   escape_colons)
    assert outcome(lambda t: propose.read(t, LIMITS), text) == outcome(general, text)


def test_a_repeated_member_of_the_commonest_shape_is_refused() -> None:
    arguments = json.dumps({"ticketId": "T-1001", "dueAt": "2026-12-15T09:00:00Z"})
    text = spelled(message("assistant", None, "call_1", "readTicket", arguments, "name",
                           False), False)
    assert '"name": "readTicket", "arguments"' in text and text.count('"name"') == 2
    found = outcome(lambda t: propose.read(t, LIMITS), text)
    assert found == ("refused", "malformed", "model output is ambiguous: the key 'name' "
                     "appears twice in one object")


def test_the_commonest_shape_takes_the_short_cut() -> None:
    arguments = json.dumps({"ticketId": "T-1001", "dueAt": "2026-12-15T09:00:00Z"})
    text = json.dumps({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "createFollowUp", "arguments": arguments}}]})
    assert propose._chat_message(text) == [propose.ProposedCall(
        "createFollowUp", arguments, "call_1", "openai-chat")]
    assert propose._chat_message(text.replace('"role"', '"role": 1, "role"')) is None


flat_values = st.lists(st.tuples(st.sampled_from(["a", "b", "a:b"]), scalars | st.floats()
                                 | values), max_size=4).map(lambda pairs: ("object", pairs))


@settings(max_examples=500, deadline=None)
@given(value=flat_values | values, escape_colons=st.booleans())
def test_a_flat_object_reads_as_the_general_reading_reads_it(value: Any,
                                                            escape_colons: bool) -> None:
    """``read_flat_object`` answers for objects of plain values only, and then as
    ``read_json`` does, refusals included; msgspec refuses NaN and infinities for it."""
    text = spelled(value, escape_colons).replace('"NaN"', "NaN")

    def general(text: str) -> Any:
        return propose.read_json(text, "arguments are", finite=True)

    try:
        flat = propose.read_flat_object(text, "arguments are")
    except Rejection as rejection:
        assert outcome(general, text) == ("refused", rejection.error_class, rejection.detail)
        return
    if flat is not None:
        assert outcome(general, text) == flat
        assert all(not isinstance(item, dict | list) for item in flat.values())
        assert all(item == item and item not in (float("inf"), float("-inf"))
                   for item in flat.values() if isinstance(item, float))
