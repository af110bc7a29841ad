"""Labels a look-up gives the records it finds (``lookups[].labels``): a value of the call
equal to a leaf of a labelled record, or to the look-up's key, carries the label in
``origins``; through Gate.check on a configuration compiled from YAML, with a real world."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callgate_rules import Gate, Route
from callgate_rules.cli import main
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.provenance import Thresholds, is_evidence, read_conversation
from callgate_rules.provenance.origins import LabelledRecord, trace_origins

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ACTOR = {"id": "u1", "role": "member"}
VERIFIED = "DE89370400440532013000"
UNVERIFIED = "GB33BUKB20201555555555"
SHARED = "FR1420041010050500013M02606"

PAY = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: send_money, version: "1.0.0", owner: t@example.com, description: Pay.}
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [recipient, amount, subject]
    properties: {recipient: {type: string}, amount: {type: number}, subject: {type: string}}
  lookups:
    - name: payee
      collection: payees
      key: args.recipient
      field: iban
      many: list
      labels:
        unverified: '!record.verified'
        shared: record.owner != actor.id
  rules:
    - name: no-unverified-payee
      expression: '!("unverified" in origins.recipient.labels)'
      error_class: confirmation_required
      message: This payee has not been verified yet.
  confirmation: {summary: "Pay {args.amount} to {args.recipient}"}
  examples: [{arguments: {recipient: DE89370400440532013000, amount: 10, subject: rent}}]
"""
POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: access, version: "1.0.0", owner: t@example.com, description: Everyone.}
spec:
  actor: {type: object, required: [id, role], properties: {id: {type: string}, role: {type: string}}}
  rules: [{name: members, effect: allow, tools: ["*"], when: actor.role == "member"}]
"""
WORLD = {"payees": [
    {"id": "p1", "iban": VERIFIED, "name": "Landlord", "verified": True, "owner": "u1",
     "note": "flat 4B rent"},
    {"id": "p2", "iban": UNVERIFIED, "name": "Mallory Trading", "verified": False,
     "owner": "u1"},
    {"id": "p3", "iban": SHARED, "name": "Family account", "verified": True, "owner": "u2"},
]}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("record-labels")
    (root / "contracts").mkdir()
    (root / "policies").mkdir()
    (root / "contracts" / "send_money.yaml").write_text(PAY)
    (root / "policies" / "access.yaml").write_text(POLICY)
    return root


@pytest.fixture(scope="module")
def gate(config: Path) -> Any:
    return Gate.from_paths(config / "contracts", config / "policies",
                           resolvers=WorldResolvers(WORLD))


def pay(gate: Any, recipient: str, conversation: Any = None) -> Any:
    return gate.check({"name": "send_money", "arguments": {
        "recipient": recipient, "amount": 100, "subject": "rent"}},
        actor=ACTOR, now=NOW, conversation=conversation)


def test_a_payee_labelled_unverified_waits_a_verified_one_runs(gate: Any) -> None:
    asked = [{"role": "user", "content": f"pay 100 to {UNVERIFIED} and {VERIFIED}"}]
    waits = pay(gate, UNVERIFIED, asked)
    assert (waits.route, waits.rule) == (Route.AWAIT_CONFIRMATION,
                                         "send_money/no-unverified-payee")
    assert pay(gate, VERIFIED, asked).route == Route.EXECUTE


def test_record_labels_need_no_conversation(gate: Any) -> None:
    """A record's label does not depend on the conversation: without one, origins are
    unknown, but the labels of the records looked up still hold."""
    assert pay(gate, UNVERIFIED).route == Route.AWAIT_CONFIRMATION
    assert pay(gate, VERIFIED).route == Route.EXECUTE


def test_what_a_labelled_record_gives_a_value() -> None:
    evidence = lambda value: is_evidence(value, Thresholds())  # noqa: E731
    records = WORLD["payees"]
    labelled = [LabelledRecord(records[1], "gb33 bukb 2020 1555 5555 55", ("unverified",)),
                LabelledRecord(records[2], SHARED, ("shared",))]
    conversation = read_conversation([{"role": "user", "content": "pay the usual"}])
    found, _ = trace_origins(
        {"to": UNVERIFIED, "spaced": "GB33 BUKB 2020 1555 5555 55", "name": "Mallory Trading",
         "subject": f"as agreed with Family account, {SHARED}", "other": VERIFIED,
         "never": "NL91ABNA0417164300"},
        conversation, records, evidence, labelled=labelled)
    assert found["to"]["labels"] == ["unverified"] and "record" in found["to"]["sources"]
    assert found["spaced"]["labels"] == ["unverified"]  # the key, in another spelling
    assert found["name"]["labels"] == ["unverified"]  # any leaf of the record
    assert found["other"]["labels"] == [] and "record" in found["other"]["sources"]
    assert found["never"]["labels"] == [] and found["never"]["sources"] == []
    [iban] = [p for p in found["subject"]["parts"] if p["kind"] == "iban"]
    assert iban["labels"] == ["shared"] and "record" in iban["sources"]


def test_a_record_label_that_fails_gives_the_label(config: Path, tmp_path: Path) -> None:
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "send_money.yaml").write_text(
        PAY.replace("'!record.verified'", "'!record.checks.passed'"))
    gate = Gate.from_paths(tmp_path / "contracts", config / "policies",
                           resolvers=WorldResolvers(WORLD))
    assert pay(gate, VERIFIED).route == Route.AWAIT_CONFIRMATION  # no `checks`: caution


def test_lint_checks_record_label_expressions(config: Path, tmp_path: Path) -> None:
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "send_money.yaml").write_text(
        PAY.replace("record.owner != actor.id", "recrod.owner != now"))
    result = CliRunner().invoke(main, ["lint", str(tmp_path / "contracts"),
                                       str(config / "policies")])
    found = [line for line in result.output.splitlines()
             if "lookups.payee.labels.shared" in line]
    assert any("recrod" in line and ":19:" in line for line in found), result.output
    assert any("'now'" in line for line in found), result.output  # only record, args, actor
