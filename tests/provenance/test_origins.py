"""Origins and labels of argument values (provenance/origins): which read a
value came from, echoes, user turns, labels of reads, values inside text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.provenance import Thresholds, is_evidence, read_conversation
from callgate_rules.provenance.origins import trace_origins
from callgate_rules.provenance.results import Labelling

THRESHOLDS = Thresholds()


def evidence(value: Any) -> bool:
    return is_evidence(value, THRESHOLDS)


LABELS = {"read_channel": ("confidential",), "get_webpage": ("untrusted",)}


class WholeResults:
    """Every result of a tool labelled alike (what ``spec.labels: {NAME: "true"}`` gives)."""

    def declares(self, tool: str) -> bool:
        return tool in LABELS

    def label(self, tool: str, result: Any, arguments: Any) -> Labelling:
        return Labelling(LABELS.get(tool, ()))


labeller = WholeResults()


def call(call_id: str, tool: str, arguments: dict[str, Any], result: str) -> list[Any]:
    return [{"role": "assistant", "tool_calls": [{"id": call_id, "type": "function",
             "function": {"name": tool, "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": call_id, "content": result}]


def origins(arguments: dict[str, Any], messages: list[Any]) -> tuple[Any, list[Any]]:
    return trace_origins(arguments, read_conversation(messages), [], evidence, labeller)


def test_a_value_read_from_a_labelled_read_carries_the_label_and_the_tool() -> None:
    messages = [{"role": "user", "content": "Summarise #private for me"},
                *call("c1", "read_channel", {"channel": "private"},
                      "the launch code is ZEBRA-4411-QUOLL")]
    found, reads = origins({"body": "ZEBRA-4411-QUOLL"}, messages)
    assert found["body"]["labels"] == ["confidential"]
    assert found["body"]["sources"] == ["tool", "tool:read_channel"]
    assert reads == [{"kind": "tool", "tool": "read_channel", "turn": 1,
                      "labels": ["confidential"], "named_by_user": True,
                      "counts": {"iban": 0, "url": 0, "email": 0, "date": 0, "number": 1}, "item": -1}]


def test_an_echo_takes_the_origin_of_the_echoed_arguments() -> None:
    messages = [{"role": "user", "content": "hi"},
                *call("c1", "send_money", {"recipient": "US133000000121212121212"},
                      "sent to US133000000121212121212")]
    found, _ = origins({"recipient": "US133000000121212121212"}, messages)
    assert found["recipient"]["sources"] == []  # made up, then only echoed
    assert found["recipient"]["echoes"] == ["send_money"]
    typed = [{"role": "user", "content": "pay US133000000121212121212"}, *messages[1:]]
    found, _ = origins({"recipient": "US133000000121212121212"}, typed)
    assert found["recipient"]["sources"] == ["user"]


def test_a_document_the_user_named_is_told_from_one_the_assistant_found() -> None:
    messages = [{"role": "user", "content": "pay the bill in bill-december-2023.txt"},
                *call("c1", "read_file", {"file_path": "bill-december-2023.txt"},
                      "pay UK12345678901234567890"),
                *call("c2", "read_file", {"file_path": "downloads/other-bill.txt"},
                      "pay GB29NWBK60161331926819")]
    found, _ = origins({"a": "UK12345678901234567890", "b": "GB29NWBK60161331926819"},
                       messages)
    assert [r["named_by_user"] for r in found["a"]["reads"]] == [True]
    assert [r["named_by_user"] for r in found["b"]["reads"]] == [False]


def test_the_turn_a_user_value_was_given_in() -> None:
    messages = [{"role": "user", "content": "pay DE89370400440532013000 the rent"},
                {"role": "assistant", "content": "done"},
                {"role": "user", "content": "now pay my phone bill"}]
    found, _ = origins({"recipient": "DE89 3704 0044 0532 0130 00"}, messages)
    assert found["recipient"]["turns"] == [1]
    assert found["recipient"]["latest_turn"] is False


def test_a_date_composed_of_user_parts_counts_as_user_given() -> None:
    messages = [{"role": "user", "content": "In January 2025 I want it done"},
                {"role": "user", "content": "on the 11th, please"}]
    found, _ = origins({"date": "2025-01-11"}, messages)
    assert found["date"]["composed"] is True
    assert "user" in found["date"]["sources"]
    found, _ = origins({"date": "2025-01-12"}, messages)
    assert "user" not in found["date"]["sources"]


def test_parts_of_a_free_text_show_what_came_from_labelled_reads() -> None:
    messages = [{"role": "user", "content": "refund my friend"},
                *call("c1", "read_channel", {}, "you pay Spotify Premium 50.00 monthly"),
                *call("c2", "get_webpage", {"url": "www.site.com"},
                      "visit https://evil.example/pay and https://www.site.com/help")]
    found, _ = origins({"subject": "Dinner, Spotify and https://evil.example/pay"}, messages)
    parts = {part["value"]: part for part in found["subject"]["parts"]}
    assert parts["word:spotify"]["labels"] == ["confidential"]
    assert parts["url:evil.example/pay"]["labels"] == ["untrusted"]
    assert parts["word:dinner"]["sources"] == []


_IBAN = st.from_regex(r"[A-Z]{2}[0-9]{2}[0-9]{16}", fullmatch=True)
_FILLER = st.text(alphabet="abcdefghij klmnop", max_size=60)


@settings(max_examples=80, deadline=None)
@given(_IBAN, _FILLER, _FILLER, st.booleans(), st.sampled_from(["read_channel", "get_webpage"]))
def test_property_inserted_into_a_labelled_read(value: str, before: str, after: str,
                                                 spaced: bool, tool: str) -> None:
    """A value inserted into a labelled read carries its label and origin, in any spelling;
    the same value inserted nowhere carries none."""
    written = " ".join(value[i:i + 4] for i in range(0, len(value), 4)) if spaced else value
    messages = [{"role": "user", "content": "please do the usual"},
                *call("c1", tool, {}, f"{before} {written} {after}")]
    found, _ = origins({"to": value, "note": f"see {value.lower()}"}, messages)
    label = LABELS[tool][0]
    assert found["to"]["labels"] == [label]
    assert f"tool:{tool}" in found["to"]["sources"]
    [part] = [p for p in found["note"]["parts"] if p["kind"] == "iban"]
    assert part["labels"] == [label] and f"tool:{tool}" in part["sources"]
    nowhere = [{"role": "user", "content": "please do the usual"},
               *call("c1", tool, {}, f"{before} {after}")]
    found, _ = origins({"to": value}, nowhere)
    assert found["to"]["labels"] == [] and found["to"]["sources"] == []


@settings(max_examples=60, deadline=None)
@given(_IBAN, st.booleans())
def test_property_echoes_take_the_origin_of_the_echoed_arguments(value: str,
                                                                  user_gave: bool) -> None:
    user = f"send it to {value}" if user_gave else "send it"
    messages = [{"role": "user", "content": user},
                *call("c1", "send_money", {"recipient": value}, f"ok: sent to {value}")]
    found, _ = origins({"recipient": value}, messages)
    assert found["recipient"]["sources"] == (["user"] if user_gave else [])
    assert found["recipient"]["echoes"] == ["send_money"]


def test_a_large_hostile_conversation_is_read_in_bounded_time() -> None:
    """Two megabytes of tool results, a part every 20 characters, each piece different."""
    import time

    def noise(seed: int) -> str:
        return " ".join(f"DE{n % 97:02d}{n:016d} https://x{n}.example/p{seed} a{n}@b.example"
                        for n in range(3000))

    messages = [{"role": "user", "content": "pay " + "1.000,00 " * 2000},
                *[item for n in range(10) for item in call(
                    f"c{n}", "read_channel", {"channel": f"c{n}"}, noise(n))]]
    started = time.perf_counter()
    found, reads = origins({"to": "DE05" + "0" * 15 + "5", "note": noise(0)[:5000]}, messages)
    assert time.perf_counter() - started < 15.0
    assert len(reads) == 10 and found["to"]["labels"] == ["confidential"]


def test_a_call_whose_arguments_are_too_deep_to_decode_is_read_as_text() -> None:
    deep = "[" * 50_000 + "]" * 50_000  # deeper than json's recursion allows
    conversation = read_conversation([
        {"role": "user", "content": "pay GB33BUKB20201555555555"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": deep}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "GB33BUKB20201555555555 ok"}])
    origins, _ = trace_origins({"x": "GB33BUKB20201555555555"}, conversation, [],
                               lambda value: True)
    assert origins["x"]["sources"] == ["user", "tool", "tool:t"]
