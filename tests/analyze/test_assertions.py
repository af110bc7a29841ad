"""PolicyAssertion documents, checked by ``callgate analyze check``: known answers on the
small refund policies, every counterexample replayed through Gate.check (which must let it
through by the route the analysis said) and the assertion evaluated on it by the gate's
own CEL (which must not be true); the parts not encoded reported, never assumed."""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("z3", reason="callgate analyze needs z3-solver (the 'analyze' extra)")

from callgate_rules.analysis import assertions  # noqa: E402
from callgate_rules.analysis.questions import Call, decided, outcome  # noqa: E402
from callgate_rules.cli import main  # noqa: E402
from callgate_rules.documents.compiler import compile_paths, load  # noqa: E402
from callgate_rules.documents.model import GateConfig  # noqa: E402
from callgate_rules.errors import ConfigError  # noqa: E402

DATA = Path(__file__).parent.parent / "data" / "analyze"
HEADER = {"apiVersion": "callgate/v1", "kind": "PolicyAssertion",
          "metadata": {"name": "refund-invariants", "version": "1.0.0",
                       "owner": "security@example.com",
                       "description": "What every refund the gate lets through must be."}}


def with_assertions(tmp_path: Path, base: str, *items: dict[str, object]) -> Path:
    target = tmp_path / base
    shutil.copytree(DATA / base, target)
    document = {**HEADER, "spec": {"assertions": list(items)}}
    (target / "policies" / "assertions.yaml").write_text(yaml.safe_dump(document,
                                                                         sort_keys=False))
    return target


def checked(directory: Path, timeout_ms: int = 10_000
            ) -> tuple[GateConfig, list[assertions.AssertionResult]]:
    parts = [directory / "contracts", directory / "policies"]
    config = load(parts)
    declared = assertions.read_assertions(compile_paths(parts), config)
    return config, assertions.check_assertions(config, declared, timeout_ms=timeout_ms)


def replay(config: GateConfig, result: assertions.AssertionResult) -> None:
    """The counterexample, through Gate.check: let through by the route the analysis said,
    and the assertion, evaluated on it, not true."""
    assert result.status == "broken" and result.call is not None, result
    assert result.call.valid, result.call
    gate = decided(config, result.call)
    assert gate is not None and outcome(gate[0]) == result.route, (gate, result)
    declared = next(a for a in assertions.read_assertions(
        compile_paths([Path(result.place.split(":")[0]).parent.parent / "contracts",
                       Path(result.place.split(":")[0]).parent]), config)
        if a.name == result.assertion)
    assert assertions.evaluate(config, declared, result.call, gate[0]) is not True
    assert result.confirmed


TENANT = {"name": "own-tenant-only", "tools": ["refund"],
          "expression": "record.tenant == actor.tenant"}
LARGE_CONFIRMED = {"name": "large-refunds-confirmed", "tools": ["*"],
                   "expression": 'args.amount <= 800 || route == "await_confirmation"'}


def test_the_base_policy_keeps_both_assertions(tmp_path: Path) -> None:
    _, results = checked(with_assertions(tmp_path, "base", TENANT, LARGE_CONFIRMED))
    assert [(r.assertion, r.tool, r.status) for r in results] == [
        ("refund-invariants/own-tenant-only", "refund", "holds"),
        ("refund-invariants/large-refunds-confirmed", "refund", "holds")]


def test_a_removed_tenant_check_breaks_the_tenant_assertion(tmp_path: Path) -> None:
    config, results = checked(with_assertions(tmp_path, "no_tenant_check", TENANT))
    (broken,) = results
    assert broken.status == "broken"
    assert broken.call is not None
    (order,) = broken.call.world["orders"]
    assert order["tenant"] != broken.call.actor["tenant"]
    assert broken.place.endswith("policies/assertions.yaml:13:17"), broken.place
    assert any(rule.startswith("refunds-access/agents-refund-own-tenant at ")
               and "access.yaml:17:7: allows the call" in rule for rule in broken.rules)
    replay(config, broken)


def test_a_raised_threshold_breaks_the_confirmation_assertion(tmp_path: Path) -> None:
    config, results = checked(with_assertions(tmp_path, "raised_threshold", LARGE_CONFIRMED))
    (broken,) = results
    assert broken.status == "broken" and broken.route == "execute"
    assert broken.call is not None and 800 < broken.call.arguments["amount"] <= 1000
    assert any(rule.startswith("refund/small-refunds-only at ") and "holds" in rule
               for rule in broken.rules)
    replay(config, broken)


def test_an_unencoded_assertion_is_unproved_and_named_with_its_place(tmp_path: Path) -> None:
    pattern = {"name": "order-ids-look-right", "tools": ["refund"],
               "expression": 'args.orderId.matches("^O-[0-9]+$")'}
    _, results = checked(with_assertions(tmp_path, "base", pattern))
    (unproved,) = results
    assert unproved.status == "unproved"
    assert [n.what for n in unproved.not_analysed] == ["function matches()"]
    assert unproved.not_analysed[0].place.endswith(
        "assertions.yaml:13:17 (expression 1:14: args.orderId.matches(\"^O-[0-9]+$\"))")
    (condition,) = unproved.conditions
    assert condition.startswith('args.orderId.matches("^O-[0-9]+$") is ')
    assert condition.endswith(("is false (function matches())",
                               "is an error (function matches())"))


def test_an_assertion_over_an_absent_field_is_broken_by_its_error(tmp_path: Path) -> None:
    """``args.note`` is not required: a call without it makes the expression an error,
    which is not true — so it breaks the assertion, as the gate's CEL says too."""
    contracts = tmp_path / "base" / "contracts" / "refund.yaml"
    target = with_assertions(tmp_path, "base", {
        "name": "noted", "tools": ["refund"], "expression": 'args.note != ""'})
    contracts.write_text(contracts.read_text().replace(
        "      amount: {type: integer, minimum: 1, maximum: 10000}",
        "      amount: {type: integer, minimum: 1, maximum: 10000}\n"
        "      note: {type: string, maxLength: 40}"))
    config, (result,) = checked(target)
    assert result.status == "broken"
    replay(config, result)


def test_the_command_prints_the_counterexample_as_a_case_that_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = with_assertions(tmp_path, "no_tenant_check", TENANT, LARGE_CONFIRMED)
    runner = CliRunner()
    text = runner.invoke(main, ["analyze", "check", str(target)])
    assert text.exit_code == 1, text.output
    assert "assertions.yaml:13:17: assertion broken: a call of refund the gate lets " \
           "through" in text.output
    assert ("assertions.yaml:17:17: assertion holds: every call of refund the gate lets "
            "through keeps refund-invariants/large-refunds-confirmed") in text.output
    assert "(confirmed)" in text.output
    shown = runner.invoke(main, ["analyze", "check", str(target), "--format", "json"])
    payload = json.loads(shown.output)
    cases = [a["policy_test_case"] for a in payload["assertions"] if a["status"] == "broken"]
    assert len(cases) == 1
    (target / "policies" / "tests").mkdir()
    (target / "policies" / "tests" / "counterexample_test.yaml").write_text(yaml.safe_dump({
        "apiVersion": "callgate/v1", "kind": "PolicyTest",
        "metadata": {"name": "counterexamples"}, "spec": {"cases": cases}}))
    monkeypatch.chdir(target)
    ran = runner.invoke(main, ["test"])
    assert ran.exit_code == 0 and "1 passed, 0 failed" in ran.output, ran.output
    holds = runner.invoke(main, ["analyze", "check", str(with_assertions(
        tmp_path / "again", "base", TENANT))])
    assert holds.exit_code == 0 and holds.output.startswith("no findings"), holds.output


def test_the_gate_and_lint_ignore_assertions_and_bad_ones_stop_analyze(tmp_path: Path) -> None:
    target = with_assertions(tmp_path, "base", TENANT)
    load([target / "contracts", target / "policies"])  # the gate loads beside it
    runner = CliRunner()
    linted = runner.invoke(main, ["lint", str(target / "contracts"), str(target / "policies")])
    assert linted.exit_code == 0, linted.output
    broken = with_assertions(tmp_path / "bad", "base",
                             {"name": "typo", "tools": ["refund"], "expresion": "true"},
                             {"name": "syntax", "tools": ["refund"], "expression": "args.("})
    with pytest.raises(ConfigError) as raised:
        checked(broken)
    shown = "\n".join(map(str, raised.value.findings))
    assert "assertions.yaml:10:5" in shown and "expresion" in shown
    failed = runner.invoke(main, ["analyze", "check", str(broken)])
    assert failed.exit_code == 2, failed.output
    linted = runner.invoke(main, ["lint", str(broken / "contracts"), str(broken / "policies")])
    assert linted.exit_code == 1, linted.output
    assert "assertions.yaml:10:5: error schema" in linted.output, linted.output
    syntax = with_assertions(tmp_path / "syntax", "base", {
        "name": "syntax", "tools": ["refund"], "expression": "args.("})
    linted = runner.invoke(main, ["lint", str(syntax / "contracts"), str(syntax / "policies")])
    assert linted.exit_code == 1, linted.output
    assert "assertions.yaml:13:22: error cel-syntax" in linted.output, linted.output
    unknown_tool = with_assertions(tmp_path / "tool", "base",
                                   {"name": "t", "tools": ["refnud"], "expression": "true"})
    failed = runner.invoke(main, ["analyze", "check", str(unknown_tool)])
    assert failed.exit_code == 2 and "refnud" in failed.output, failed.output
    no_variable = with_assertions(tmp_path / "var", "base",
                                  {"name": "t", "tools": ["refund"],
                                   "expression": "invoice.total > 0"})
    failed = runner.invoke(main, ["analyze", "check", str(no_variable)])
    assert failed.exit_code == 2 and "reads invoice" in failed.output, failed.output


def test_a_star_assertion_applies_only_to_tools_with_its_variables(tmp_path: Path) -> None:
    star = {"name": "star", "tools": ["*"], "expression": "invoice.total > 0"}
    _, results = checked(with_assertions(tmp_path, "base", star))
    assert results == []


# -- generated policies and assertions against brute force --------------------------------

COMPARISONS = st.builds(
    lambda left, op, right: f"{left} {op} {right}",
    st.sampled_from(["args.x", "args.y", "args.x + args.y"]),
    st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), st.integers(-1, 4).map(str))
ASSERTED = st.one_of(COMPARISONS, COMPARISONS.map(lambda c: f'{c} || route == "await_confirmation"'),
                     COMPARISONS.map(lambda c: f'{c} && route == "execute"'))
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
  rules:
    - {{name: a, effect: allow, tools: [t], when: '{allow}'}}
"""


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(COMPARISONS, st.sampled_from(["invalid_argument",
                                                         "confirmation_required"])),
                max_size=2),
       COMPARISONS, ASSERTED)
def test_generated_assertions_agree_with_brute_force(rules: list[tuple[str, str]], allow: str,
                                                     asserted: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch)
        (target / "contracts").mkdir()
        (target / "policies").mkdir()
        (target / "contracts" / "t.yaml").write_text(CONTRACT.format(rules="".join(
            f"\n    - {{name: r{i}, expression: '{text}', error_class: {cls}, "
            "message: refused}" for i, (text, cls) in enumerate(rules)) or " []"))
        (target / "policies" / "p.yaml").write_text(POLICY.format(allow=allow))
        (target / "policies" / "a.yaml").write_text(yaml.safe_dump({
            **HEADER, "spec": {"assertions": [{"name": "g", "tools": ["t"],
                                               "expression": asserted}]}}))
        config, (result,) = checked(target)
        declared = assertions.read_assertions(
            compile_paths([target / "contracts", target / "policies"]), config)[0]
        breaking = []
        for x, y in itertools.product(range(4), range(4)):
            call = Call("t", {"x": x, "y": y}, {"id": "u"}, {}, {})
            gate = decided(config, call)
            assert gate is not None
            if outcome(gate[0]) != "refused" and assertions.evaluate(
                    config, declared, call, gate[0]) is not True:
                breaking.append((x, y))
        assert result.status == ("broken" if breaking else "holds"), (breaking, result)
        if breaking:
            assert result.call is not None
            assert (result.call.arguments["x"], result.call.arguments["y"]) in breaking
            assert result.confirmed


def test_an_assertion_out_of_time_is_unknown_never_holds(tmp_path: Path) -> None:
    """With a 1 ms limit z3 answers some questions and runs out of time on others: an
    assertion it could not answer is ``unknown`` (exit 1), never ``holds``."""
    target = with_assertions(tmp_path, "no_tenant_check", TENANT, LARGE_CONFIRMED)
    config, results = checked(target, timeout_ms=1)
    for result in results:
        assert result.status in ("broken", "unknown", "holds"), result
        if result.status == "unknown":
            assert result.message.endswith(": timeout"), result.message
    assert results[0].status in ("broken", "unknown")
    shown = CliRunner().invoke(main, ["analyze", "check", str(target), "--timeout-ms", "1"])
    assert shown.exit_code == 1, shown.output
