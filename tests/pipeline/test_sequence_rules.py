"""Sequence rules (an AccessPolicy's ``spec.sequences``): compiled to CEL over ``history``,
run through ``Gate.handle``, checked by lint where each part is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callgate_rules.authoring.lint import lint
from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.documents.sequences import condition
from callgate_rules.errors import ConfigError
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store import MemoryStore
from callgate_rules.taxonomy import ErrorClass, Route

from .test_history import BANKING, HOLDER, T0, Bank, gate_on, payment

POLICY = (BANKING / "policies" / "access.yaml").read_text()


@pytest.fixture(scope="module")
def config() -> GateConfig:
    return load([BANKING / "contracts", BANKING / "policies"])


def read(channel: str) -> dict[str, Any]:
    return {"name": "readChannel", "arguments": {"channel": channel}}


def mail(to: str) -> dict[str, Any]:
    return {"name": "sendEmail", "arguments": {"to": to, "subject": "Notes", "body": "See"}}


def steps(gate: Gate, *calls: dict[str, Any]) -> list[tuple[Route, str | None]]:
    run = Run(started_at=T0)
    return [(d.route, d.rule) for d in (
        gate.handle(call, actor=HOLDER, request_id=f"r{n}", run=run)
        for n, call in enumerate(calls))]


def test_an_outside_mail_after_a_private_read_waits_for_a_person(config: GateConfig) -> None:
    bank = Bank()
    gate = gate_on(config, MemoryStore(), bank, FakeClock(T0))
    assert steps(gate, read("private-board"), mail("friend@outside.example"),
                 mail("ops@bank.example")) == [
        (Route.RETURN_RESULT, "banking-access/account-holder"),
        (Route.AWAIT_CONFIRMATION, "sendEmail/private-reads-stay-inside"),
        (Route.RETURN_RESULT, "banking-access/account-holder")]
    assert [tool for tool, _ in bank.writes] == ["readChannel", "sendEmail"]


def test_an_outside_mail_after_a_public_read_goes(config: GateConfig) -> None:
    gate = gate_on(config, MemoryStore(), Bank(), FakeClock(T0))
    assert [route for route, _ in steps(gate, read("general"),
                                        mail("friend@outside.example"))] == [
        Route.RETURN_RESULT, Route.RETURN_RESULT]


def test_no_payment_follows_a_mail_read(config: GateConfig) -> None:
    bank = Bank()
    gate = gate_on(config, MemoryStore(), bank, FakeClock(T0))
    run = Run(started_at=T0)
    before = gate.handle(payment(10, "before"), actor=HOLDER, request_id="a", run=run)
    gate.handle({"name": "readInbox", "arguments": {}}, actor=HOLDER, request_id="b",
                run=run)
    after = gate.handle(payment(10, "after"), actor=HOLDER, request_id="c", run=run)
    assert before.route == Route.RETURN_RESULT
    assert (after.route, after.error_class, after.rule) == (
        Route.REFUSE, ErrorClass.FORBIDDEN, "banking-access/no-payment-after-a-mail-read")
    assert "may carry instructions" in after.agent_message
    assert [tool for tool, _ in bank.writes] == ["sendMoney", "readInbox"]


def test_the_compiled_condition_reads_as_written() -> None:
    assert condition(["readChannel"], 'h.args.channel == "x"', "args.to != \"\"") == (
        'history.exists(h, h.tool in ["readChannel"] && h.executed '
        '&& (h.args.channel == "x")) && (args.to != "")')
    assert condition(["b", "a"], None, None) == \
        'history.exists(h, h.tool in ["a", "b"] && h.executed)'


def write_project(tmp_path: Path, policy: str) -> Path:
    for contract in (BANKING / "contracts").glob("*.yaml"):
        (tmp_path / contract.name).write_text(contract.read_text())
    (tmp_path / "access.yaml").write_text(policy)
    return tmp_path


def findings(tmp_path: Path, policy: str) -> list[tuple[int, str, str, str]]:
    write_project(tmp_path, policy)
    return [(f.location.line, f.severity, f.code, f.message) for f in lint([tmp_path])
            if f.code != "no-routing-table"]


def line_of(text: str, marker: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if marker in line)


def test_lint_finds_a_mistaken_field_of_h_where_it_is_written(tmp_path: Path) -> None:
    policy = POLICY.replace("h.args.channel.startsWith", "h.arg.channel.startsWith")
    found = findings(tmp_path, policy)
    assert found, "h.arg is not a field of a history entry"
    assert {line for line, *_ in found} == {line_of(policy, "h.arg.channel")}
    assert any("args" in message for *_, message in found)


def test_lint_names_unknown_tools_and_variables(tmp_path: Path) -> None:
    policy = POLICY.replace("confirm: {tools: [sendEmail], where: '!args.to",
                            "confirm: {tools: [sendMail], where: '!arg.to")
    policy = policy.replace("forbid: {tools: [sendMoney, createPayee]}",
                            "forbid: {tools: [sendMoney], where: 'recipient != \"\"'}")
    found = findings(tmp_path, policy)
    codes = {(code, line) for line, _, code, _ in found}
    assert ("unknown-tool", line_of(policy, "sendMail")) in codes
    assert ("unknown-variable", line_of(policy, "recipient != ")) in codes


def test_a_where_that_does_not_parse_is_an_error_at_its_place(tmp_path: Path) -> None:
    policy = POLICY.replace("'!args.to.lowerAscii()", "'!args.to.lowerAscii(()")
    found = findings(tmp_path, policy)
    assert [(line, severity) for line, severity, *_ in found] == [
        (line_of(policy, "lowerAscii(()"), "error")]
    with pytest.raises(ConfigError):
        load(write_project(tmp_path, policy))


def test_forbid_and_confirm_together_is_a_schema_error(tmp_path: Path) -> None:
    policy = POLICY.replace("      forbid: {tools: [sendMoney, createPayee]}\n",
                            "      forbid: {tools: [sendMoney, createPayee]}\n"
                            "      confirm: {tools: [sendMoney]}\n")
    assert [code for _, _, code, _ in findings(tmp_path, policy)] == ["schema"]
