"""The index answers what a plain search answers, on a conversation that grows.

A run proposes again and again on one conversation that grows by appending; the pieces read
for an earlier proposal are normalised once and reused (``matching.TEXTS``), short values and
record strings are normalised once (``squash``, ``fold``), and one index serves every
argument. Whatever was reused, each answer must be the plain one: the value searched in
each piece on its own with the regular expression the matcher replaced
(``tests.provenance.test_provenance_hardening.Reference``), origin by origin.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.provenance import (
    SYSTEM,
    TOOL,
    USER,
    Thresholds,
    read_conversation,
    trace_sources,
)
from callgate_rules.provenance.matching import squash
from tests.provenance.test_provenance_hardening import Reference

LENIENT = Thresholds(min_string_length=1, common_values=frozenset())
WORDS = st.text(alphabet="ab1. -", min_size=0, max_size=12)
MESSAGE = st.tuples(st.sampled_from(["user", "system", "readEmail", "searchDocs"]), WORDS)


def as_messages(turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Chat Completions messages: a tool's result follows the model's call to that tool."""
    messages: list[dict[str, Any]] = []
    for number, (origin, text) in enumerate(turns):
        if origin in ("user", "system"):
            messages.append({"role": origin, "content": text})
            continue
        call = f"call_{number}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call, "type": "function", "function": {"name": origin, "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": call, "content": text})
    return messages


def plain_sources(value: str, turns: list[tuple[str, str]]) -> set[str]:
    found: set[str] = set()
    for origin, text in turns:
        if text and Reference.found(value, text):
            if origin == "user":
                found.add(USER)
            elif origin == "system":
                found.add(SYSTEM)
            else:
                found |= {TOOL, f"{TOOL}:{origin}"}
    return found


@settings(max_examples=150, deadline=None)
@given(turns=st.lists(MESSAGE, min_size=1, max_size=8),
       values=st.lists(st.text(alphabet="ab1.-", min_size=1, max_size=5), min_size=1,
                       max_size=4))
def test_every_proposal_of_a_growing_conversation_gets_the_plain_answers(
        turns: list[tuple[str, str]], values: list[str]) -> None:
    values = [value for value in values if squash(value)]
    arguments = {f"v{number}": value for number, value in enumerate(values)}
    for length in range(1, len(turns) + 1):  # one proposal per turn, as a run makes them
        conversation = read_conversation(as_messages(turns[:length]))
        sources = trace_sources(arguments, conversation, [], LENIENT)
        for name, value in arguments.items():
            assert set(sources[name]) == plain_sources(value, turns[:length]), (value, length)


@settings(max_examples=100, deadline=None)
@given(records=st.lists(st.dictionaries(st.sampled_from(["id", "name", "iban"]),
                                        st.text(alphabet="aB1 -", max_size=8), max_size=3),
                        max_size=3),
       value=st.text(alphabet="aB1 -", min_size=1, max_size=8))
def test_a_record_holds_a_value_exactly_when_a_record_string_squashes_to_it(
        records: list[dict[str, str]], value: str) -> None:
    conversation = read_conversation([{"role": "user", "content": "nothing here"}])
    for _ in range(2):  # the second time, every string comes from the normalisation cache
        sources = trace_sources({"v": value}, conversation, records, LENIENT)["v"]
        held = any(squash(text) == squash(value) for record in records
                   for text in record.values())
        assert ("record" in sources) == (held and bool(squash(value))), (value, records)
