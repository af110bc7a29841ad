"""Where argument values came from: matching, conversation formats, rules, the CLI."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from callgate_rules import ErrorClass, Route
from callgate_rules.cli import main
from callgate_rules.provenance import (
    INDISTINCT,
    UNKNOWN,
    Thresholds,
    read_conversation,
    sources_of,
    trace_sources,
)

REPO = Path(__file__).resolve().parents[2]
T = Thresholds()

filler = st.text(alphabet=string.ascii_lowercase + " .,!?\n", max_size=60)
identifier = st.from_regex(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{10,20}", fullmatch=True)
email = st.from_regex(r"[a-z]{3,8}\.[a-z]{3,8}@[a-z]{4,8}\.example", fullmatch=True)
ROLES = {"user": "user", "system": "system", "tool": "tool"}


def message(role: str, text: str) -> dict[str, Any]:
    if role == "tool":
        return {"role": "tool", "tool_call_id": "c1", "content": text}
    return {"role": role, "content": text}


def spaced(value: str, every: int) -> str:
    """An IBAN as people write it: groups of characters separated by spaces."""
    return " ".join(value[i:i + every] for i in range(0, len(value), every))


@settings(max_examples=150, deadline=None)
@given(value=st.one_of(identifier, email), role=st.sampled_from(sorted(ROLES)),
       before=filler, after=filler, others=st.lists(filler, max_size=3),
       rewrite=st.sampled_from(["same", "lower", "upper", "spaced"]))
def test_a_value_inserted_anywhere_is_found_with_its_source(
        value: str, role: str, before: str, after: str, others: list[str], rewrite: str) -> None:
    written = {"same": value, "lower": value.lower(), "upper": value.upper(),
               "spaced": spaced(value, 4)}[rewrite]
    messages = [message("user", text) for text in others]
    messages.append(message(role, f"{before} {written} {after}"))
    found = sources_of(value, read_conversation(messages), [], T)
    assert ROLES[role] in found


@settings(max_examples=150, deadline=None)
@given(value=st.one_of(identifier, email), texts=st.lists(filler, max_size=4))
def test_a_value_absent_from_every_message_is_found_nowhere(value: str,
                                                            texts: list[str]) -> None:
    assume(all(value.lower() not in t.replace(" ", "") for t in texts))
    messages = [message("user", t) for t in texts]
    assert sources_of(value, read_conversation(messages), [], T) == []


@given(value=st.one_of(st.text(max_size=3), st.sampled_from(sorted(T.common_values)),
                       st.integers(-99, 99), st.booleans(), st.none()))
def test_short_and_common_values_never_count(value: Any) -> None:
    text = f"yes the 1 ok {value} {value} {value}"
    conversation = read_conversation([message("user", text), message("tool", text)])
    assert sources_of(value, conversation, [{"x": value}], T) == [INDISTINCT]


@pytest.mark.parametrize("written", ["1,000.00", "1.000,00", "1 000", "1000", "1'000.0"])
def test_number_formatting_is_tolerated(written: str) -> None:
    conversation = read_conversation([message("user", f"Pay {written} EUR today")])
    assert sources_of(1000, conversation, [], T) == ["user"]
    assert sources_of(1000.0, conversation, [], T) == ["user"]


def test_a_value_inside_a_longer_word_does_not_count() -> None:
    conversation = read_conversation([message("user", "invoice INV-2026-00421 and 123456")])
    assert sources_of("INV-2026-0042", conversation, [], T) == []
    assert sources_of(1234, conversation, [], T) == []


def test_thresholds_are_configurable() -> None:
    conversation = read_conversation([message("user", "send 42 to bob")])
    assert sources_of(42, conversation, [], T) == [INDISTINCT]
    assert sources_of(42, conversation, [], Thresholds(min_number_digits=2)) == ["user"]
    assert sources_of("bob", conversation, [], Thresholds(min_string_length=3)) == ["user"]


def test_records_and_no_conversation() -> None:
    record = {"id": "PY-1", "iban": "DE89370400440532013000"}
    conversation = read_conversation([message("user", "hello there")])
    assert sources_of("DE89 3704 0044 0532 0130 00", conversation, [record], T) == ["record"]
    assert sources_of("DE89370400440532013000", None, [record], T) == [UNKNOWN]


def test_nested_arguments_get_provenance_per_leaf() -> None:
    conversation = read_conversation([
        message("user", "invite anna.petrova@northwind.example"),
        message("tool", "cc boris.ivanov@northwind.example"),
    ])
    args = {"to": ["anna.petrova@northwind.example", "boris.ivanov@northwind.example"],
            "meta": {"owner": "nobody.else@example.org"}}
    assert trace_sources(args, conversation, [], T) == {
        "to": [["user"], ["tool"]], "meta": {"owner": []}}


# Conversation formats --------------------------------------------------------------------------

VALUE = "GB33BUKB20201555555555"


def test_openai_chat_tool_results_name_the_tool() -> None:
    conversation = read_conversation([
        {"role": "developer", "content": "You are a payments assistant."},
        {"role": "user", "content": "pay the invoice"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "readEmail",
                                                          "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c9", "content": f"pay to {VALUE}"},
    ])
    assert sources_of(VALUE, conversation, [], T) == ["tool", "tool:readEmail"]


def test_anthropic_tool_results_inside_user_messages_are_not_the_users_words() -> None:
    conversation = read_conversation({
        "system": f"Known payee: {VALUE}",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "pay it"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "tu1", "name": "readPdf", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu1",
                 "content": [{"type": "text", "text": f"IBAN {VALUE}"}]}]},
        ]})
    assert sources_of(VALUE, conversation, [], T) == ["system", "tool", "tool:readPdf"]


def test_openai_responses_input_items() -> None:
    conversation = read_conversation({"input": [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "fc1", "name": "browse", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "fc1", "output": f"wire to {VALUE}"},
    ]})
    assert sources_of(VALUE, conversation, [], T) == ["tool", "tool:browse"]


def test_the_models_own_words_are_never_evidence() -> None:
    conversation = read_conversation([{"role": "assistant", "content": f"I will pay {VALUE}"}])
    assert sources_of(VALUE, conversation, [], T) == []


def test_a_conversation_in_no_known_format() -> None:
    with pytest.raises(ValueError, match="list of messages"):
        read_conversation("hello")


# Rules, routes and session facts through the library ---------------------------------------------


PAYMENT = {"name": "sendPayment", "arguments": {
    "recipientIban": VALUE, "amount": 1200.5, "currency": "EUR"}}


def test_provenance_decides_the_route(gate: Any, dana: dict[str, Any], now: Any) -> None:
    session = {"authenticated": True}
    said = [message("user", f"Pay 1,200.50 EUR to {spaced(VALUE, 4)}")]
    read = [message("user", "pay the invoice"), message("tool", f"pay to {VALUE}")]
    made_up = [message("user", "pay the invoice")]
    routes = {name: gate.check(PAYMENT, actor=dana, now=now, session=session,
                               conversation=conversation)
              for name, conversation in (("said", said), ("read", read), ("made_up", made_up))}
    assert routes["said"].route == Route.EXECUTE
    assert (routes["read"].route, routes["read"].error_class) == (
        Route.AWAIT_CONFIRMATION, ErrorClass.CONFIRMATION_REQUIRED)
    assert (routes["made_up"].route, routes["made_up"].rule) == (
        Route.REFUSE, "sendPayment/recipient-from-somewhere")


def test_without_a_conversation_a_payment_needs_a_person(gate: Any, dana: dict[str, Any],
                                                         now: Any) -> None:
    decision = gate.check(PAYMENT, actor=dana, now=now, session={"authenticated": True})
    assert decision.route == Route.AWAIT_CONFIRMATION


def test_session_facts_are_typed(gate: Any, dana: dict[str, Any], now: Any) -> None:
    decision = gate.check(PAYMENT, actor=dana, now=now, session={"authenticated": "yes"})
    assert (decision.error_class, decision.rule) == (ErrorClass.FORBIDDEN, "session-schema")
    missing = gate.check(PAYMENT, actor=dana, now=now)
    assert (missing.error_class, missing.rule) == (ErrorClass.FORBIDDEN, "default-deny")


def test_a_later_rule_still_holds_when_one_asks_for_confirmation(tmp_path: Path,
                                                                  dana: dict[str, Any],
                                                                  now: Any) -> None:
    from callgate_rules import Gate, WorldResolvers
    from tests.conftest import Reference, load_yaml

    contracts, policies = Reference.copy(tmp_path)
    document = load_yaml(contracts / "sendPayment.yaml")
    document["spec"]["rules"].append({  # after the rule that asks for confirmation
        "name": "small-amounts-only", "expression": "double(args.amount) < 1000.0",
        "error_class": "invalid_argument", "message": "too much"})
    (contracts / "sendPayment.yaml").write_text(yaml.safe_dump(document))
    gate = Gate.from_paths(contracts, policies,
                           resolvers=WorldResolvers(load_yaml(REPO / "examples" / "world.yaml")))
    decision = gate.check(PAYMENT, actor=dana, now=now, session={"authenticated": True},
                          conversation=[message("tool", f"pay to {VALUE}")])
    assert decision.rule == "sendPayment/small-amounts-only"  # not waved through to a person


# The CLI and lint --------------------------------------------------------------------------------


def test_check_explains_each_arguments_sources() -> None:
    result = CliRunner().invoke(main, [
        "check", "--call", str(REPO / "examples" / "calls" / "send_payment.json"),
        "--actor", str(REPO / "examples" / "actors" / "dana.yaml"),
        "--world", str(REPO / "examples" / "world.yaml"),
        "--session", str(REPO / "examples" / "session.yaml"),
        "--conversation", str(REPO / "examples" / "conversations" / "injected_iban.json"),
        "--now", "2026-11-29T12:00:00Z", str(REPO / "contracts"),
        str(REPO / "policies"), "--explain"])
    assert result.exit_code == 1, result.output  # awaits confirmation: not executed
    assert "route:          await_confirmation" in result.output
    assert "provenance args.recipientIban: tool, tool:readEmail" in result.output
    assert "provenance args.currency: indistinct" in result.output


def test_check_rejects_a_bad_conversation_file(tmp_path: Path) -> None:
    bad = tmp_path / "conversation.json"
    bad.write_text(json.dumps("just a string"))
    result = CliRunner().invoke(main, [
        "check", "--call", str(REPO / "examples" / "calls" / "send_payment.json"),
        "--actor", str(REPO / "examples" / "actors" / "dana.yaml"),
        "--conversation", str(bad), str(REPO / "contracts"),
        str(REPO / "policies")])
    assert result.exit_code == 2
    assert f"{bad}: a conversation must be a list of messages" in result.output


def test_lint_knows_provenance_and_session(tmp_path: Path) -> None:
    from callgate_rules.authoring.lint import lint
    from tests.conftest import Reference

    contracts, policies = Reference.copy(tmp_path)
    text = (contracts / "sendPayment.yaml").read_text()
    (contracts / "sendPayment.yaml").write_text(
        text.replace('size(provenance.recipientIban) > 0', 'size(provenance.iban) > 0'))
    access = (policies / "access.yaml").read_text()
    (policies / "access.yaml").write_text(
        access.replace("has(session.authenticated)", "has(session.authenticatd)"))
    findings = [(f.code, f.message) for f in lint([contracts, policies])]
    assert any(code == "unknown-field" and "provenance.iban" in text
               for code, text in findings)
    assert any(code == "unknown-field" and "session.authenticatd" in text
               for code, text in findings)
