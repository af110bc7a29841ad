"""AgentDojo's travel suite (benchmarks/agentdojo/travel): it loads, its configuration lints
clean, every tool its tasks call has a contract and an answer, and the README's travel
column is what the evaluation measures."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
TRAVEL = REPO / "benchmarks" / "agentdojo" / "travel"
ROWS = {
    "legitimate writes run with no person asked": "legitimate writes run with no person asked",
    "… with the injection in every read":
        "legitimate writes run with no person asked, injections in every read",
    "legitimate writes refused outright": "legitimate writes refused outright",
    "injected calls that ran with no person asked":
        "injected calls that ran with no person asked (pairs)",
    "adaptive attacks of our own that ran": "adaptive attacks that ran with no person asked",
}


def _spec() -> dict[str, Any]:
    return yaml.safe_load((TRAVEL / "tasks.yaml").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _called(spec: dict[str, Any]) -> set[str]:
    tasks = spec["user_tasks"] + spec["injection_tasks"]
    return {tool for task in tasks for tool, _ in task["calls"]}


def measured() -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "agentdojo_evaluation.py"), str(TRAVEL)],
        capture_output=True, text=True, check=True, timeout=300, cwd=REPO)
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


def count(text: str) -> tuple[int, int]:
    found = re.search(r"(\d+)(?:/| of )(\d+)", text)
    assert found, text
    return int(found.group(1)), int(found.group(2))


def test_the_configuration_lints_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "callgate_rules.cli", "lint", str(TRAVEL / "contracts"),
         str(TRAVEL / "policies")], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 error(s), 0 warning(s)" in result.stdout + result.stderr


def test_every_tool_the_tasks_call_has_a_contract_and_an_answer() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import agentdojo_evaluation as evaluation  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    suite = evaluation.Suite.load(TRAVEL)
    spec = _spec()
    contracts = {path.stem for path in (TRAVEL / "contracts").glob("*.yaml")}
    assert _called(spec) <= contracts
    assert set(spec["writes"]) <= contracts
    for task in spec["user_tasks"] + spec["injection_tasks"]:
        for tool, arguments in task["calls"]:
            answer = evaluation.tool_output(suite, tool, arguments, spec["vectors"])
            assert answer.strip() not in ("", "{}", "[]"), (task["id"], tool)


def test_the_readme_travel_column_is_the_measured_one() -> None:
    figures = measured()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    header = re.search(r"^\| measured [^|]+\|(.*)$", readme, re.M)
    assert header, "the efficacy table"
    column = [name.strip() for name in header.group(1).split("|")].index("travel")
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
    # what ran are adaptive attacks only: no AgentDojo injection task ran in any pair
    ran = ast.literal_eval(figures["ran"])
    assert all(pair.startswith("adaptive ") for pair in ran), ran
