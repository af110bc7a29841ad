"""``callgate analyze diff|check --format sarif``: valid SARIF 2.1.0 (the OASIS schema in
tests/data/, as tests/authoring/test_lint_ci.py uses it), one result per difference, finding,
assertion not proved and part not analysed, each at the file, line and column of its rule
or assertion; the exit codes are the text output's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft4Validator

pytest.importorskip("z3", reason="callgate analyze needs z3-solver (the 'analyze' extra)")

from callgate_rules.cli import main  # noqa: E402

TESTS = Path(__file__).parent.parent
DATA = TESTS / "data" / "analyze"
REPO = TESTS.parent


def sarif(monkeypatch: pytest.MonkeyPatch, cwd: Path, *arguments: str
          ) -> tuple[int, dict[str, Any]]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["analyze", *arguments, "--format", "sarif"])
    log = json.loads(result.output)
    schema = json.loads((TESTS / "data" / "sarif-schema-2.1.0.json").read_text("utf-8"))
    assert [e.message for e in Draft4Validator(schema).iter_errors(log)] == []
    assert log["version"] == "2.1.0"
    return result.exit_code, log


def located(result: dict[str, Any]) -> tuple[str, int, int]:
    physical = result["locations"][0]["physicalLocation"]
    region = physical.get("region", {})
    return (physical["artifactLocation"]["uri"], region.get("startLine", 0),
            region.get("startColumn", 0))


def test_a_diff_is_one_error_per_difference_at_the_rule_that_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, log = sarif(monkeypatch, DATA, "diff", "base", "raised_threshold")
    assert code == 1
    (run,) = log["runs"]
    (result,) = run["results"]
    assert result["ruleId"] == "await_confirmation-to-execute"
    assert result["level"] == "error"
    assert located(result) == ("raised_threshold/contracts/refund.yaml", 33, 7)
    assert "refund/small-refunds-only: fails in OLD, holds in NEW" in result["message"]["text"]
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == [
        "await_confirmation-to-execute"]
    code, log = sarif(monkeypatch, DATA, "diff", "base", "base")
    assert (code, log["runs"][0]["results"]) == (0, [])


def test_check_gives_findings_assertions_and_notes(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "config"
    shutil.copytree(DATA / "always_true_rule", target)
    (target / "policies" / "assertions.yaml").write_text(yaml.safe_dump({
        "apiVersion": "callgate/v1", "kind": "PolicyAssertion",
        "metadata": {"name": "inv", "version": "1", "owner": "o@example.com",
                     "description": "Invariants."},
        "spec": {"assertions": [
            {"name": "small", "tools": ["refund"], "expression": "args.amount <= 10"},
            {"name": "pattern", "tools": ["refund"],
             "expression": 'args.orderId.matches("^O-")'}]}}))
    code, log = sarif(monkeypatch, tmp_path, "check", "config")
    assert code == 1
    results = {(r["ruleId"], r["level"]): located(r) for r in log["runs"][0]["results"]}
    assert results[("dead-rule", "warning")][0] == "config/contracts/refund.yaml"
    assert results[("assertion-broken", "error")] == ("config/policies/assertions.yaml", 10, 17)
    assert results[("assertion-unproved", "warning")] == (
        "config/policies/assertions.yaml", 14, 17)
    assert results[("not-analysed", "note")] == ("config/policies/assertions.yaml", 14, 17)


def test_the_reference_configuration_has_only_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    code, log = sarif(monkeypatch, REPO, "check")
    assert code == 0
    results = log["runs"][0]["results"]
    assert results and {r["level"] for r in results} == {"note"}
    assert ("contracts/sendPayment.yaml", 49, 7) in [located(r) for r in results]


def test_a_usage_error_prints_no_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)
    result = CliRunner().invoke(main, ["analyze", "check", "base/contracts",
                                       "--format", "sarif"])
    assert result.exit_code == 2 and "not a configuration directory" in result.output


def test_timeouts_and_an_added_tool_are_valid_results(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    code, log = sarif(monkeypatch, DATA, "diff", "base", "no_tenant_check", "--timeout-ms",
                      "1")
    assert code == 1
    assert {r["ruleId"] for r in log["runs"][0]["results"]} <= {
        "unknown", "refused-to-execute", "refused-to-await_confirmation"}
    shutil.copytree(DATA / "base", tmp_path / "new")
    shutil.copy(DATA / "base" / "contracts" / "refund.yaml",
                tmp_path / "new" / "contracts" / "refund2.yaml")
    refund2 = tmp_path / "new" / "contracts" / "refund2.yaml"
    refund2.write_text(refund2.read_text().replace("name: refund\n", "name: refund2\n"))
    monkeypatch.chdir(tmp_path)
    shutil.copytree(DATA / "base", tmp_path / "old")
    code, log = sarif(monkeypatch, tmp_path, "diff", "old", "new")
    assert code == 1
    (added,) = log["runs"][0]["results"]
    assert added["ruleId"] == "tool-added"
    assert located(added) == ("new/contracts/refund2.yaml", 1, 1)
    code, log = sarif(monkeypatch, tmp_path, "check", "new", "--timeout-ms", "1")
    assert code in (0, 1)
