"""Tool results as label expressions read them (JSON, bounded alias-free YAML, else text),
a result split into its items, and what a label gives where its expression cannot say."""

from __future__ import annotations

import json
import time
from typing import Any

from callgate_rules.cel.expression import compile_expression
from callgate_rules.documents.model import ResultLabel
from callgate_rules.provenance.labels import ContractLabels
from callgate_rules.provenance.results import (
    MAX_DEPTH,
    MAX_YAML_CHARACTERS,
    item_texts,
    parsed_result,
)


def test_json_then_yaml_then_text() -> None:
    assert parsed_result('{"a": [1, "x"]}') == {"a": [1, "x"]}
    assert parsed_result('"quoted"') == "quoted"  # a JSON scalar, as before
    assert parsed_result("- id_: '1'\n  sender: a@b.example\n- id_: '2'\n") == [
        {"id_": "1", "sender": "a@b.example"}, {"id_": "2"}]
    assert parsed_result("Transaction to GB33BUKB20201555555555 sent.") == \
        "Transaction to GB33BUKB20201555555555 sent."
    assert parsed_result("42") == 42  # JSON


def test_yaml_dates_stay_the_strings_written() -> None:
    assert parsed_result("date: 2024-05-15\nat: 2024-05-15 10:00:00\n") == {
        "date": "2024-05-15", "at": "2024-05-15 10:00:00"}


def test_an_alias_makes_the_result_text_so_nothing_expands() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 9)}]\n"
        for n in range(8))
    start = time.perf_counter()
    assert parsed_result(bomb) == bomb
    assert time.perf_counter() - start < 1.0


def test_only_yamls_plain_types() -> None:
    for text in ("data: !!binary aGVsbG8=", "s: !!set {a, b}", "when: !!timestamp 2024-05-15",
                 "x: !!python/object:os.system ls"):
        assert parsed_result(text) == text


def test_depth_and_size_are_bounded() -> None:
    deep_json = "[" * 100_000 + "]" * 100_000
    assert parsed_result(deep_json) == deep_json  # no RecursionError, the text
    over = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    assert parsed_result(over) == over
    within = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert isinstance(parsed_result(within), list)
    deep_yaml = "".join("  " * level + "a:\n" for level in range(200))
    assert parsed_result(deep_yaml) == deep_yaml
    flow = "a: " + "[" * 200 + "]" * 200
    assert parsed_result(flow) == flow
    large = "- x\n" * (MAX_YAML_CHARACTERS // 4 + 1)
    assert parsed_result(large) == large


def test_items_split_a_result_with_what_lies_outside() -> None:
    mails = [{"sender": "a@x.example", "body": "one", "attachments": [{"name": "plan.pdf"}]},
             {"sender": "b@y.example", "body": "two"}]
    result: dict[str, Any] = {"owner": "emma", "mails": mails}
    split = item_texts(result, [mails[0], mails[1], mails[0]["attachments"][0], "computed"])
    assert split.outside == "owner\nemma\nmails"
    assert split.items[0].split("\n") == ["sender", "a@x.example", "body", "one",
                                          "attachments"]
    assert split.items[2] == "name\nplan.pdf" and split.parents[2] == 0  # nested in mail 0
    assert split.items[3] == "computed" and split.parents[3] == -1


def label(name: str, each: str, where: str) -> ContractLabels:
    return ContractLabels({"read": (ResultLabel(name, each=compile_expression(each),
                                                where=compile_expression(where)),)})


def test_a_where_that_fails_gives_the_label_to_that_item() -> None:
    result = [{"sender": "a@corp.example"}, {"from": "x@y.example"}]
    labelling = label("untrusted", "result", '!item.sender.endsWith("@corp.example")').label(
        "read", result, {})
    assert labelling.labels == ()
    assert labelling.item_labels == ((), ("untrusted",))  # no `sender`: caution


def test_an_each_that_is_no_list_gives_the_label_to_the_whole_result() -> None:
    for result in ("just text", {"mails": 3}):
        labelling = label("untrusted", "result.mails", "true").label("read", result, {})
        assert labelling.labels == ("untrusted",) and labelling.items == ()


def test_each_over_a_map_takes_its_values() -> None:
    result = {"m1": {"sender": "a@corp.example"}, "m2": {"sender": "x@y.example"}}
    labelling = label("untrusted", "result", '!item.sender.endsWith("@corp.example")').label(
        "read", result, {})
    assert labelling.items == (result["m1"], result["m2"])
    assert labelling.item_labels == ((), ("untrusted",))


def test_a_labelled_json_result_round_trips() -> None:
    text = json.dumps([{"sender": "x@y.example", "body": "hi"}])
    assert parsed_result(text) == [{"sender": "x@y.example", "body": "hi"}]
