"""``unread-field`` findings of ``callgate analyze check``: a tool whose rules never read the
field that ties its record to the actor (``tenant``), where another rule of the
configuration compares it; an argument no schema keyword and no rule of its tool bounds,
where another tool's rule checks it. Known answers, each call replayed through Gate.check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("z3", reason="callgate analyze needs z3-solver (the 'analyze' extra)")

from callgate_rules.analysis import questions, unread  # noqa: E402
from callgate_rules.cli import main  # noqa: E402
from callgate_rules.documents.compiler import load  # noqa: E402
from callgate_rules.documents.model import GateConfig  # noqa: E402

DATA = Path(__file__).parent.parent / "data" / "analyze"
REPO = Path(__file__).parent.parent.parent

CANCEL = """apiVersion: callgate/v1
kind: ToolContract
metadata: {{name: cancel, version: "1.0.0", owner: o@example.com, description: Cancel.}}
spec:
  effect: write
  arguments:
    type: object
    required: [orderId]
    properties:
      orderId: {{type: string, maxLength: 20}}
  lookups:
    - name: order
      collection: orders
      key: args.orderId
      field: id
      schema:
        type: object
        required: [id, tenant, total]
        properties:
          id: {{type: string}}
          tenant: {{type: string}}
          total: {{type: integer, minimum: 0}}
  rules:{rules}
  timeout: 5s
  idempotency: key
  examples:
    - arguments: {{orderId: O-1}}
"""
CREDIT = """apiVersion: callgate/v1
kind: ToolContract
metadata: {name: credit, version: "1.0.0", owner: o@example.com, description: Credit.}
spec:
  effect: write
  arguments:
    type: object
    required: [customer, amount]
    properties:
      customer: {type: string, maxLength: 20}
      amount: {type: integer}
  timeout: 5s
  idempotency: key
  examples:
    - arguments: {customer: C-1, amount: 5}
"""
ACCESS = """
    - name: agents-cancel
      effect: allow
      tools: [cancel, credit]
      when: actor.role == "agent"
"""


def configuration(tmp_path: Path, cancel_rules: str = " []", credit: bool = True
                  ) -> GateConfig:
    target = tmp_path / "config"
    shutil.copytree(DATA / "base", target)
    (target / "contracts" / "cancel.yaml").write_text(CANCEL.format(rules=cancel_rules))
    if credit:
        (target / "contracts" / "credit.yaml").write_text(CREDIT)
    access = target / "policies" / "access.yaml"
    access.write_text(access.read_text() + ACCESS)
    return load([target / "contracts", target / "policies"])


def replayed(config: GateConfig, finding: questions.Finding) -> None:
    assert finding.call is not None and finding.call.valid
    decided = questions.decided(config, finding.call)
    assert decided is not None and questions.outcome(decided[0]) == finding.route, finding
    assert finding.gate == decided


def test_a_lookup_whose_tenant_no_rule_reads_is_found_and_replayed(tmp_path: Path) -> None:
    config = configuration(tmp_path, credit=False)
    found, unknown = unread.unread_fields(config, timeout_ms=10_000)
    assert unknown == []
    (finding,) = found
    assert (finding.kind, finding.tool, finding.subject) == (
        "unread-field", "cancel", "cancel: order.tenant")
    assert finding.place.endswith("cancel.yaml:12:7")
    assert "refunds-access/agents-refund-own-tenant" in finding.message
    assert finding.call is not None
    (order,) = finding.call.world["orders"]
    assert order["tenant"] != finding.call.actor["tenant"]
    replayed(config, finding)


def test_a_rule_that_reads_the_tenant_is_enough_even_when_it_lets_some_through(
        tmp_path: Path) -> None:
    """Reading the field is a decision someone made (supervisors may cross tenants):
    no finding, though such calls exist."""
    rules = ("\n    - {name: own-tenant, expression: 'order.tenant == actor.tenant || "
             "actor.role == \"supervisor\"', error_class: forbidden, "
             "message: not yours}")
    found, _ = unread.unread_fields(configuration(tmp_path, rules, credit=False),
                                    timeout_ms=10_000)
    assert found == []


def test_an_unbounded_argument_another_tool_checks_is_found_and_replayed(
        tmp_path: Path) -> None:
    rules = ("\n    - {name: own-tenant, expression: 'order.tenant == actor.tenant', "
             "error_class: forbidden, message: not yours}")
    config = configuration(tmp_path, rules)
    found, _ = unread.unread_fields(config, timeout_ms=10_000)
    (finding,) = found
    assert (finding.tool, finding.subject) == ("credit", "credit: args.amount")
    assert "refund/within-order-total" in finding.message
    assert finding.call is not None and finding.call.arguments["amount"] >= unread.LARGE
    replayed(config, finding)


def test_a_bound_in_the_schema_is_enough(tmp_path: Path) -> None:
    rules = ("\n    - {name: own-tenant, expression: 'order.tenant == actor.tenant', "
             "error_class: forbidden, message: not yours}")
    config_dir = tmp_path / "bounded"
    configuration(config_dir, rules)
    credit = config_dir / "config" / "contracts" / "credit.yaml"
    credit.write_text(credit.read_text().replace("amount: {type: integer}",
                                                 "amount: {type: integer, maximum: 500}"))
    config = load([config_dir / "config" / "contracts", config_dir / "config" / "policies"])
    assert unread.unread_fields(config, timeout_ms=10_000)[0] == []


def test_the_command_reports_it_and_the_reference_configuration_has_none(
        tmp_path: Path) -> None:
    configuration(tmp_path, credit=False)
    shown = CliRunner().invoke(main, ["analyze", "check", str(tmp_path / "config")])
    assert shown.exit_code == 1, shown.output
    assert "unread-field: no enforced rule of cancel reads order.tenant" in shown.output
    assert "expect: {route: return_result, rule: refunds-access/agents-cancel}" in shown.output
    config = load([REPO / "contracts", REPO / "policies"])
    assert unread.unread_fields(config, timeout_ms=10_000) == ([], [])
