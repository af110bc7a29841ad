"""Step 1 reads the commonest output, an OpenAI Chat message with one call, by a short cut;
on every output it accepts, the short cut must find what the full reading finds."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from callgate_rules.pipeline.propose import _calls_in, _one_chat_call

anything = st.none() | st.booleans() | st.integers() | st.text(max_size=3)
functions = st.fixed_dictionaries(
    {}, optional={"name": st.sampled_from(["createFollowUp", 5, None]),
                  "arguments": st.sampled_from(['{"a": 1}', {"a": 1}, None])})
items = st.fixed_dictionaries(
    {}, optional={
        "type": st.sampled_from(["function", "function_call", "tool_use", "text", None]),
        "function": functions | anything,
        "id": st.sampled_from(["call_1", 7, None]),
        "output": st.sampled_from([[], "done", None]),
        "content": st.sampled_from([[], "text", None]),
        "choices": st.sampled_from([[], None]),
        "tool_calls": st.sampled_from([[], None]),
        "name": st.sampled_from(["createFollowUp", None]),
        "arguments": st.sampled_from(["{}", None]),
    })
# Items of the shape the short cut takes, but for the odd key that sends them elsewhere.
near_items = st.fixed_dictionaries(
    {"type": st.just("function"), "function": functions},
    optional={"id": st.sampled_from(["call_1", 7]), "output": st.sampled_from([[], "x"]),
              "content": st.sampled_from([[], None]), "choices": st.just([]),
              "tool_calls": st.just([])})
messages = st.fixed_dictionaries(
    {}, optional={
        "role": st.sampled_from(["assistant", "user"]),
        "content": st.sampled_from([None, "hi", []]),
        "tool_calls": st.lists(items, max_size=2) | st.lists(near_items, min_size=1,
                                                             max_size=2) | anything,
        "choices": st.sampled_from([[], None, [{"message": {"tool_calls": []}}]]),
        "output": st.sampled_from([[], None]),
        "type": st.sampled_from(["message", None]),
    })


near_messages = st.fixed_dictionaries(
    {"tool_calls": st.lists(near_items, min_size=1, max_size=2)},
    optional={"role": st.just("assistant"), "choices": st.sampled_from([[], None])})


@settings(max_examples=600)
@given(messages | near_messages | items | st.lists(items, max_size=2))
def test_the_short_cut_finds_what_the_full_reading_finds(output: Any) -> None:
    found = _one_chat_call(output)
    event("short cut taken" if found is not None else "full reading")
    if found is not None:
        assert found == _calls_in(output)


def test_the_short_cut_takes_the_commonest_shape() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "createFollowUp", "arguments": "{}"}}]}
    assert _one_chat_call(message) == _calls_in(message)
    assert _one_chat_call(message) is not None
