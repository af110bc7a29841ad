"""callgate analyze: known answers on small policies, every counterexample replayed through
Gate.check, and hypothesis-generated policies against brute force over a small domain."""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("z3", reason="callgate analyze needs z3-solver (the 'analyze' extra)")

from callgate_rules.analysis import questions  # noqa: E402
from callgate_rules.cli import main  # noqa: E402
from callgate_rules.documents.compiler import load  # noqa: E402
from callgate_rules.documents.model import GateConfig  # noqa: E402
from callgate_rules.harness.world import WorldResolvers  # noqa: E402
from callgate_rules.pipeline.gate import Gate  # noqa: E402

DATA = Path(__file__).parent.parent / "data" / "analyze"


def configuration(path: Path) -> GateConfig:
    return load([path / "contracts", path / "policies"])


def route_of(config: GateConfig, call: questions.Call) -> str:
    gate = Gate(config, resolvers=WorldResolvers(call.world))
    decision = gate.check({"name": call.tool, "arguments": call.arguments},
                          actor=call.actor, session=call.session or None)
    return str(decision.route) if str(decision.route) in (
        "execute", "await_confirmation") else "refused"


def replayed(old: GateConfig, new: GateConfig, found: list[questions.ToolDiff]) -> int:
    """Every definite difference decides in both gates as the analysis said."""
    count = 0
    for tool in found:
        for difference in tool.differences:
            assert difference.definite and difference.call.valid
            assert route_of(old, difference.call) == difference.old_route, difference
            assert route_of(new, difference.call) == difference.new_route, difference
            count += 1
    return count


def test_a_raised_threshold_lets_larger_refunds_through_unconfirmed() -> None:
    old, new = configuration(DATA / "base"), configuration(DATA / "raised_threshold")
    found = questions.diff(old, new)
    (refund,) = found
    assert refund.status == "different"
    assert [(d.old_route, d.new_route) for d in refund.differences] == [
        ("await_confirmation", "execute")]
    amount = refund.differences[0].call.arguments["amount"]
    assert 500 < amount <= 1000
    assert any("small-refunds-only" in rule for rule in refund.differences[0].deciding)
    assert replayed(old, new, found) == 1
    reverse = questions.diff(new, old)
    assert [(d.old_route, d.new_route) for d in reverse[0].differences] == [
        ("execute", "await_confirmation")]
    assert replayed(new, old, reverse) == 1


def test_a_removed_tenant_check_lets_another_tenants_order_through() -> None:
    old, new = configuration(DATA / "base"), configuration(DATA / "no_tenant_check")
    found = questions.diff(old, new)
    differences = found[0].differences
    assert {(d.old_route, d.new_route) for d in differences} == {
        ("refused", "execute"), ("refused", "await_confirmation")}
    for difference in differences:
        (order,) = difference.call.world["orders"]
        assert order["tenant"] != difference.call.actor["tenant"]
    assert replayed(old, new, found) == 2


def test_a_configuration_is_equivalent_to_itself() -> None:
    base = configuration(DATA / "base")
    assert [t.status for t in questions.diff(base, base)] == ["equivalent"]


def test_a_new_allow_rule_shadowed_by_a_deny_changes_nothing() -> None:
    old, new = configuration(DATA / "base"), configuration(DATA / "shadowed_allow")
    assert [t.status for t in questions.diff(old, new)] == ["equivalent"]
    report = questions.check(new)
    assert [(f.kind, f.subject) for f in report.findings] == [
        ("shadowed-allow", "refunds-access/viewers-refund")]


def test_check_finds_an_always_true_rule_and_an_unusable_tool() -> None:
    assert questions.check(configuration(DATA / "base")).findings == []
    dead = questions.check(configuration(DATA / "always_true_rule")).findings
    assert [(f.kind, f.subject) for f in dead] == [("dead-rule", "refund/positive-amount")]
    never = questions.check(configuration(DATA / "never_true_rule")).findings
    assert [(f.kind, f.subject) for f in never] == [
        ("uncallable", "refund"), ("never-holds", "refund/huge-amounts-only")]


def test_the_command_prints_text_and_json_with_exit_codes() -> None:
    runner = CliRunner()
    same = runner.invoke(main, ["analyze", "diff", str(DATA / "base"), str(DATA / "base")])
    assert same.exit_code == 0, same.output
    assert "refund: equivalent" in same.output
    changed = runner.invoke(main, ["analyze", "diff", str(DATA / "base"),
                                   str(DATA / "raised_threshold"), "--format", "json"])
    assert changed.exit_code == 1, changed.output
    payload = json.loads(changed.output)
    case = payload["tools"][0]["differences"][0]["policy_test_case"]
    assert case["expect"] == {"route": "return_result",
                              "rule": "refunds-access/agents-refund-own-tenant"}
    found = runner.invoke(main, ["analyze", "check", str(DATA / "always_true_rule")])
    assert found.exit_code == 1 and "dead-rule" in found.output
    missing = runner.invoke(main, ["analyze", "check", str(DATA)])
    assert missing.exit_code == 2 and "contracts/" in missing.output


def test_the_printed_policy_test_cases_pass_against_new(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case the analysis prints, pasted into a PolicyTest beside NEW, passes."""
    for old, new in (("base", "raised_threshold"), ("base", "no_tenant_check"),
                     ("no_tenant_check", "base")):
        shown = CliRunner().invoke(main, ["analyze", "diff", str(DATA / old), str(DATA / new),
                                          "--format", "json"])
        cases = [d["policy_test_case"] for tool in json.loads(shown.output)["tools"]
                 for d in tool["differences"]]
        assert cases
        target = tmp_path / f"{old}-{new}"
        shutil.copytree(DATA / new, target)
        (target / "policies" / "tests").mkdir()
        (target / "policies" / "tests" / "analyzed_test.yaml").write_text(yaml.safe_dump({
            "apiVersion": "callgate/v1", "kind": "PolicyTest",
            "metadata": {"name": "analyzed"}, "spec": {"cases": cases}}))
        monkeypatch.chdir(target)
        ran = CliRunner().invoke(main, ["test"])
        assert ran.exit_code == 0, ran.output
        assert f"{len(cases)} passed, 0 failed" in ran.output


def test_the_reference_configuration_reports_what_it_does_not_analyse() -> None:
    repo = Path(__file__).parent.parent.parent
    report = questions.check(configuration(repo))
    places = [n.place for n in report.not_analysed]
    assert any("sendPayment.yaml" in p and "provenance.recipientIban" in p for p in places)
    assert all(":" in p for p in places)


# -- generated policies against brute force ----------------------------------------------

DOMAIN = range(0, 4)
OPERATORS = ["<", "<=", ">", ">=", "==", "!="]
comparison = st.builds(
    lambda left, op, right: f"{left} {op} {right}",
    st.sampled_from(["args.x", "args.y", "args.x + args.y", "args.x - args.y"]),
    st.sampled_from(OPERATORS), st.integers(-1, 5).map(str) | st.just("args.y"))
rule = st.tuples(comparison, st.sampled_from(["invalid_argument", "confirmation_required"]),
                 st.sampled_from(["enforce", "enforce", "warn"]))
policy = st.tuples(st.lists(rule, max_size=3), st.lists(comparison, min_size=1, max_size=2),
                   st.lists(comparison, max_size=1))

CONTRACT = """apiVersion: callgate/v1
kind: ToolContract
metadata: {{name: t, version: "1", owner: o@example.com, description: A tool.}}
spec:
  effect: write
  arguments:
    type: object
    required: [x, y]
    properties:
      x: {{type: integer, minimum: 0, maximum: 3}}
      y: {{type: integer, minimum: 0, maximum: 3}}
  rules:{rules}
  timeout: 5s
  idempotency: key
  examples:
    - arguments: {{x: 1, y: 1}}
"""
POLICY = """apiVersion: callgate/v1
kind: AccessPolicy
metadata: {{name: p, version: "1", owner: o@example.com, description: Access.}}
spec:
  actor: {{type: object, required: [id], properties: {{id: {{type: string}}}}}}
  rules:{rules}
"""


def write(directory: Path, drawn: tuple[Any, ...]) -> GateConfig:
    rules, allows, denies = drawn
    contract_rules = "".join(
        f"\n    - {{name: r{i}, expression: '{text}', error_class: {cls}, mode: {mode}, "
        f"message: refused}}" for i, (text, cls, mode) in enumerate(rules)) or " []"
    access = "".join(f"\n    - {{name: a{i}, effect: allow, tools: [t], when: '{text}'}}"
                     for i, text in enumerate(allows))
    access += "".join(f"\n    - {{name: d{i}, effect: deny, tools: [t], when: '{text}'}}"
                      for i, text in enumerate(denies))
    (directory / "contracts").mkdir(parents=True)
    (directory / "policies").mkdir()
    (directory / "contracts" / "t.yaml").write_text(CONTRACT.format(rules=contract_rules))
    (directory / "policies" / "p.yaml").write_text(POLICY.format(rules=access))
    return configuration(directory)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy, policy)
def test_generated_policies_agree_with_brute_force(old_drawn: Any, new_drawn: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        old = write(Path(scratch) / "old", old_drawn)
        new = write(Path(scratch) / "new", new_drawn)
        found = questions.diff(old, new)
        replayed(old, new, found)
        pairs = set()
        for x, y in itertools.product(DOMAIN, DOMAIN):
            call = questions.Call("t", {"x": x, "y": y}, {"id": "u"}, {}, {})
            before, after = route_of(old, call), route_of(new, call)
            if before != after:
                pairs.add((before, after))
        assert {(d.old_route, d.new_route) for d in found[0].differences} == pairs
        assert found[0].status == ("different" if pairs else "equivalent")


def test_a_question_out_of_time_is_reported_never_equivalent() -> None:
    """With a 1 ms limit z3 answers some questions and runs out of time on others: those
    are named as timeouts, and the tool is never called equivalent."""
    old, new = configuration(DATA / "base"), configuration(DATA / "no_tenant_check")
    (refund,) = questions.diff(old, new, timeout_ms=1)
    assert refund.status in ("unknown", "different")
    assert refund.unknown or refund.differences
    assert all(question.endswith(": timeout") for question in refund.unknown)
    shown = CliRunner().invoke(main, ["analyze", "diff", str(DATA / "base"),
                                      str(DATA / "no_tenant_check"), "--timeout-ms", "1"])
    assert shown.exit_code == 1
