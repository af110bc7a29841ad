"""AgentDojo slack, configuration v2 (benchmarks/agentdojo/slack/v2, scored with
``--configuration``): it lints clean, its contracts answer every tool the suite calls, the
evaluation reads its adaptive attacks and records (never the suite's own, written against
v1), and the README's v1 and v2 columns are what the evaluation measures."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SLACK = REPO / "benchmarks" / "agentdojo" / "slack"
V2 = SLACK / "v2"
ROWS = {
    "legitimate writes run with no person asked": "legitimate writes run with no person asked",
    "… with the injection in every read":
        "legitimate writes run with no person asked, injections in every read",
    "legitimate writes refused outright": "legitimate writes refused outright",
    "pages fetched that a person was asked about":
        "legitimate gated reads a person was asked about",
    "injected calls that ran with no person asked":
        "injected calls that ran with no person asked (pairs)",
    "adaptive attacks of our own that ran": "adaptive attacks that ran with no person asked",
}


def measured(*configuration: str) -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "agentdojo_evaluation.py"), str(SLACK),
         *configuration], capture_output=True, text=True, check=True, timeout=300, cwd=REPO)
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


def count(text: str) -> tuple[int, int]:
    found = re.search(r"(\d+)(?:/| of )(\d+)", text)
    assert found, text
    return int(found.group(1)), int(found.group(2))


def _ids(path: Path) -> set[str]:
    spec: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {attack["id"] for attack in spec["attacks"]}


def test_v2_lints_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "callgate_rules.cli", "lint", str(V2 / "contracts"),
         str(V2 / "policies")], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 error(s), 0 warning(s)" in result.stdout + result.stderr


def test_v2_has_a_contract_for_every_tool_the_suite_calls() -> None:
    spec = yaml.safe_load((SLACK / "tasks.yaml").read_text(encoding="utf-8"))
    called = {tool for task in spec["user_tasks"] + spec["injection_tasks"]
              for tool, _ in task["calls"]}
    contracts = {path.stem for path in (V2 / "contracts").glob("*.yaml")}
    assert called | set(spec["writes"]) | set(spec["gated_reads"]) <= contracts
    assert contracts == {path.stem for path in (SLACK / "contracts").glob("*.yaml")}


def test_the_configuration_brings_its_own_attacks_and_records() -> None:
    v2, v1 = measured("--configuration", str(V2)), measured()
    ran_v2, ran_v1 = ast.literal_eval(v2["ran"]), ast.literal_eval(v1["ran"])
    adaptive_v2 = {pair.split()[1] for pair in ran_v2 if pair.startswith("adaptive ")}
    adaptive_v1 = {pair.split()[1] for pair in ran_v1 if pair.startswith("adaptive ")}
    assert adaptive_v2 <= _ids(V2 / "adaptive.yaml") and adaptive_v2
    assert adaptive_v1 <= _ids(SLACK / "adaptive.yaml")
    assert not adaptive_v2 & _ids(SLACK / "adaptive.yaml")
    # the default is v1, unchanged: its three-letter recipients (Bob, Eve) wait for a
    # person; v2 holds them in its records (world.yaml), so none does
    assert float(v1["confirmations per 100 legitimate writes"]) > 0
    assert float(v2["confirmations per 100 legitimate writes"]) == 0


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_readme_slack_columns_are_the_measured_ones(version: str) -> None:
    figures = measured(*(["--configuration", str(V2)] if version == "v2" else []))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    header = re.search(r"^\| slack, measured [^|]+\|(.*)$", readme, re.M)
    assert header, "the slack v1/v2 table"
    column = [name.strip() for name in header.group(1).split("|")].index(version)
    table = readme[header.start():]

    def cell(label: str) -> str:
        found = re.search(r"^\| " + re.escape(label) + r" \|(.*)$", table, re.M)
        assert found, label
        return found.group(1).split("|")[column].strip()

    for in_readme, printed in ROWS.items():
        assert count(cell(in_readme)) == count(figures[printed]), in_readme
    assert float(cell("confirmations per 100 legitimate writes")) == \
        float(figures["confirmations per 100 legitimate writes"])
    assert figures["legitimate writes refused outright"].startswith("0/")
    if version == "v1":
        return
    # of AgentDojo's own injections only the page visit ran under v2 (injection task 3)
    ran = ast.literal_eval(figures["ran"])
    assert all(pair.startswith("adaptive ") or pair.endswith(" x injection_task_3")
               for pair in ran), ran
