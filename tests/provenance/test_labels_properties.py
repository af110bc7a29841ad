"""Property tests for labels per item, and for echoes in ``provenance`` and ``origins``:
a value inserted into a labelled item carries its label and origin; inserted into an
unlabelled item of a read whose other items are labelled it carries no label (but its
origin); inserted nowhere it carries neither; a tool result that echoes its call's
arguments gives the value the sources of those arguments, in both variables."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.cel.expression import compile_expression
from callgate_rules.documents.model import ResultLabel
from callgate_rules.provenance import (
    Thresholds,
    is_evidence,
    read_conversation,
    trace_sources,
)
from callgate_rules.provenance.labels import ContractLabels
from callgate_rules.provenance.origins import trace_origins

THRESHOLDS = Thresholds()
INSIDE = "@bluesparrowtech.com"
LABELLER = ContractLabels({
    "get_received_emails": (ResultLabel("untrusted", each=compile_expression("result"),
                                        where=compile_expression(
                                            f'!item.sender.endsWith("{INSIDE}")')),),
    "read_channel": (ResultLabel("confidential", whole=compile_expression(
        'args.channel.startsWith("private")')),)})


def evidence(value: Any) -> bool:
    return is_evidence(value, THRESHOLDS)


def call(call_id: str, tool: str, arguments: dict[str, Any], result: str) -> list[Any]:
    return [{"role": "assistant", "tool_calls": [{"id": call_id, "type": "function",
             "function": {"name": tool, "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": call_id, "content": result}]


_IBAN = st.from_regex(r"[A-Z]{2}[0-9]{2}[0-9]{16}", fullmatch=True)
_WORDS = st.text(alphabet="abcdefghij klmnop", max_size=40)
_SENDER = st.sampled_from(["emma", "david.smith", "ops"])
_OUTSIDE = st.sampled_from(["@gmail.com", "@bluesparrow-support.example", "@example.org"])


def inbox(mails: list[dict[str, str]], as_yaml: bool) -> str:
    return yaml.safe_dump(mails, sort_keys=False) if as_yaml else json.dumps(mails)


@settings(max_examples=60, deadline=None)
@given(_IBAN, _WORDS, _SENDER, _OUTSIDE, st.integers(0, 3), st.integers(1, 4),
       st.booleans(), st.sampled_from(["labelled", "unlabelled", "nowhere"]))
def test_property_a_value_in_an_item_carries_that_items_labels(
        value: str, words: str, sender: str, outside: str, at: int, size: int,
        as_yaml: bool, where: str) -> None:
    mails = [{"sender": f"{sender}{n}{INSIDE}", "body": f"{words} note {n}"}
             for n in range(size)]
    mails.insert(min(at, size), {"sender": f"{sender}{outside}", "body": f"{words} hello"})
    target = min(at, size) if where == "labelled" else (min(at, size) + 1) % (size + 1)
    if where != "nowhere":
        mails[target]["body"] += f" pay {value} today"
    messages = [{"role": "user", "content": "check my inbox"},
                *call("c1", "get_received_emails", {}, inbox(mails, as_yaml))]
    found, reads = trace_origins({"to": value, "note": f"see {value.lower()}"},
                                 read_conversation(messages), [], evidence, LABELLER)
    [part] = [p for p in found["note"]["parts"] if p["kind"] == "iban"]
    expected = ["untrusted"] if where == "labelled" else []
    assert found["to"]["labels"] == expected and part["labels"] == expected
    origin = [] if where == "nowhere" else ["tool", "tool:get_received_emails"]
    assert found["to"]["sources"] == origin and part["sources"] == origin
    assert [read["item"] for read in found["to"]["reads"]] == (
        [] if where == "nowhere" else [target])
    assert [read["labels"] for read in reads] == [["untrusted"]]  # the read: all of them


@settings(max_examples=40, deadline=None)
@given(_IBAN, _WORDS, st.booleans())
def test_property_a_whole_label_and_an_item_label_together(value: str, words: str,
                                                           private: bool) -> None:
    messages = [{"role": "user", "content": "summarise"},
                *call("c1", "read_channel", {"channel": "private" if private else "general"},
                      f"{words} {value} {words}")]
    found, reads = trace_origins({"to": value}, read_conversation(messages), [], evidence,
                                 LABELLER)
    assert found["to"]["labels"] == (["confidential"] if private else [])
    assert found["to"]["sources"] == ["tool", "tool:read_channel"]
    assert reads[0]["item"] == -1


@settings(max_examples=60, deadline=None)
@given(_IBAN, st.integers(100, 10**6), st.booleans(), st.booleans())
def test_property_echoes_take_the_sources_of_the_arguments_echoed(
        iban: str, amount: int, user_gave: bool, read_elsewhere: bool) -> None:
    """In ``provenance`` and ``origins`` alike: a bank echoing the payment it made is no
    source; the values keep the sources they have elsewhere."""
    user = f"send {amount} to {iban}" if user_gave else "send the usual"
    messages: list[Any] = [{"role": "user", "content": user}]
    if read_elsewhere:
        messages += call("c0", "read_file", {"file_path": "bill.txt"},
                         f"Please pay {amount} to {iban}.")
    messages += call("c1", "send_money", {"recipient": iban, "amount": amount},
                     f"Transaction to {iban} for {amount} sent.")
    conversation = read_conversation(messages)
    expected = (["user"] if user_gave else []) + (
        ["tool", "tool:read_file"] if read_elsewhere else [])
    arguments = {"recipient": iban, "amount": amount}
    sources = trace_sources(arguments, conversation, [], THRESHOLDS)
    assert sources == {"recipient": expected, "amount": expected}
    found, _ = trace_origins(arguments, conversation, [], evidence, LABELLER)
    for leaf in ("recipient", "amount"):
        assert found[leaf]["sources"] == expected
        assert found[leaf]["echoes"] == ["send_money"]


def test_a_result_that_is_not_an_echo_still_counts() -> None:
    """Only the call's own arguments make an echo: the same IBAN in another call's result
    is a source."""
    iban = "DE89370400440532013000"
    messages = [{"role": "user", "content": "pay my landlord"},
                *call("c1", "get_payees", {"name": "landlord"}, f"Landlord: {iban}")]
    assert trace_sources({"to": iban}, read_conversation(messages), [], THRESHOLDS) == {
        "to": ["tool", "tool:get_payees"]}
