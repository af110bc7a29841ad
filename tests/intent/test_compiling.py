"""Reading an intent: every problem at once, each naming its field (and line, from YAML),
hostile inputs refused whole with a clear error, never a traceback or a hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.intent import IntentError, compile_intent

REPO = Path(__file__).resolve().parents[2]
CONFIG = load([REPO / "examples" / "banking" / "contracts",
               REPO / "examples" / "banking" / "policies",
               REPO / "examples" / "intents" / "routing.yaml"])


def problems(written: object) -> list[str]:
    with pytest.raises(IntentError) as error:
        compile_intent(written, CONFIG)  # type: ignore[arg-type]
    return error.value.problems


def test_the_example_document_and_its_spec_read_the_same() -> None:
    text = (REPO / "examples" / "intents" / "pay-the-rent.yaml").read_text()
    whole = compile_intent(text, CONFIG)
    assert whole.request is not None and whole.tools["sendMoney"].calls == 1
    import yaml
    assert compile_intent(yaml.safe_load(text)["spec"], CONFIG).as_data() == whole.as_data()


def test_schema_problems_name_the_field_and_line() -> None:
    found = problems("tools:\n  sendMoney:\n    calls: -1\n    argumnts: {}\n")
    assert any(p.startswith("intent:3:") and "tools.sendMoney.calls" in p for p in found)
    assert any(p.startswith("intent:4:") and "unknown field 'argumnts'" in p for p in found)


def test_the_envelope_is_checked() -> None:
    found = problems({"apiVersion": "callgate/v2", "kind": "RunIntent", "spec": {"tools": {}},
                      "extra": 1})
    assert "apiVersion must be 'callgate/v1'" in found[0]
    assert any("unknown field 'extra'" in p for p in found)
    assert problems({"kind": "RunIntent", "apiVersion": "callgate/v1"})[-1].endswith(
        "a RunIntent document needs a spec")


def test_conditions_must_compile_and_read_only_args() -> None:
    found = problems({"tools": {"sendMoney": {"when": ["args.amount <", "now > args.x"]}}})
    assert any("tools.sendMoney.when[0]" in p for p in found)
    assert any("tools.sendMoney.when[1]" in p and "reads now" in p for p in found)


def test_a_schema_and_a_total_are_checked() -> None:
    found = problems({"tools": {"sendMoney": {"arguments": {
        "subject": {"schema": {"type": "string", "pattern": "(a+)+\\1"}},
        "amount": {"schema": {"type": "nonsense"}}}}},
        "totals": {"t": {"tools": ["sendMoney", "nope"], "argument": "subject.x",
                         "at_most": 1}}})
    assert any("subject.schema" in p and "pattern" in p for p in found)
    assert any("amount.schema" in p and "not a valid JSON Schema" in p for p in found)
    assert any("totals.t.tools[1]" in p and "no tool named 'nope'" in p for p in found)
    assert any("totals.t.argument" in p and "no argument 'subject.x'" in p for p in found)


def banking_masking(argument: str, tmp_path: Path) -> GateConfig:
    """The banking example, sendMoney masking ``argument``."""
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    for path in (REPO / "examples" / "banking" / "contracts").iterdir():
        text = path.read_text()
        if path.name == "sendMoney.yaml":
            text = text.replace("  idempotency: key\n",
                                f"  idempotency: key\n  mask: [{argument}]\n")
        (contracts / path.name).write_text(text)
    return load([contracts, REPO / "examples" / "banking" / "policies"])


def test_a_masked_argument_cannot_be_totalled(tmp_path: Path) -> None:
    config = banking_masking("amount", tmp_path)
    with pytest.raises(IntentError, match="a total cannot be kept over a masked value"):
        compile_intent({"tools": {}, "totals": {"t": {"tools": ["sendMoney"],
                                                       "argument": "amount", "at_most": 5}}},
                       config)


@pytest.mark.parametrize("hostile", [
    "tools: {}\nrequest: '" + "x" * 300_000 + "'\n",  # larger than an intent may be
    "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
    "tools: " + "[" * 5000 + "]" * 5000 + "\n",  # deeper than YAML is read
    "tools: {a: 1\n",  # not YAML
    "- one\n- two\n",  # not a mapping
    "tools: {}\n---\ntools: {}\n",  # two documents
    42,
])
def test_hostile_intents_are_refused_whole(hostile: object) -> None:
    assert problems(hostile)


def test_big_but_bounded_sets_are_refused_by_the_schema() -> None:
    found = problems({"tools": {"sendMoney": {"arguments": {
        "recipient": {"one_of": [str(n) for n in range(2000)]}}}}})
    assert any("one_of" in p for p in found)


def test_what_would_break_a_run_later_is_refused_now() -> None:
    found = problems("tools:\n  sendMoney:\n    arguments:\n      amount: {maximum: .nan}\n"
                     "totals:\n  t: {tools: [sendMoney], argument: amount, at_most: .inf}\n")
    assert any("tools.sendMoney.arguments.amount.maximum: not a finite number" in p
               for p in found)
    assert any("totals.t.at_most: not a finite number" in p for p in found)
    found = problems({"tools": {"sendMoney": {"arguments": {"subject": {"schema": {
        "$ref": "#/$defs/nope"}}}}}})
    assert any("subject.schema.$ref" in p and "no $ref" in p for p in found)


def test_a_masked_arguments_value_is_never_written(tmp_path: Path) -> None:
    from callgate_rules.intent import leaves, widenings
    config = banking_masking("subject", tmp_path)
    bound = compile_intent({"tools": {"sendMoney": {"arguments": {"subject": {
        "equals": "my password is hunter2"}}}}}, config)
    left = leaves(bound, "sendMoney", {"subject": "the attacker's hunter3"}, None)
    assert left == ("subject is ***, the request says ***",)
    wider = compile_intent({"tools": {"sendMoney": {"arguments": {"subject": {
        "one_of": ["my password is hunter2", "hunter3"]}}}}}, config)
    assert widenings(wider, bound) == [
        "widens sendMoney's subject: allows a masked value, which the bound does not"]
