"""The AgentDojo evaluation (benchmarks/agentdojo_evaluation.py): the README's figures are
what the command measures, per suite, and no legitimate write is refused."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUITES = REPO / "benchmarks" / "agentdojo"
COLUMNS = {"banking": 0, "slack": 1}  # the README table's columns of figures
ROWS = {
    "legitimate writes run with no person asked": "legitimate writes run with no person asked",
    "… with the injection in every read":
        "legitimate writes run with no person asked, injections in every read",
    "legitimate writes refused outright": "legitimate writes refused outright",
    "injected calls that ran with no person asked":
        "injected calls that ran with no person asked (pairs)",
    "adaptive attacks of our own that ran": "adaptive attacks that ran with no person asked",
}


def measured(suite: str) -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "agentdojo_evaluation.py"),
         str(SUITES / suite)], capture_output=True, text=True, check=True, timeout=300,
        cwd=REPO)
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


def count(text: str) -> tuple[int, int]:
    found = re.search(r"(\d+)(?:/| of )(\d+)", text)
    assert found, text
    return int(found.group(1)), int(found.group(2))


@pytest.mark.parametrize("suite", sorted(COLUMNS))
def test_the_readme_figures_are_the_measured_ones(suite: str) -> None:
    figures = measured(suite)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| measured 2026-12-01 | banking | slack |"):]

    def cell(label: str) -> str:
        found = re.search(r"^\| " + re.escape(label) + r" \|(.*)$", table, re.M)
        assert found, label
        return found.group(1).split("|")[COLUMNS[suite]].strip()

    for in_readme, printed in ROWS.items():
        assert count(cell(in_readme)) == count(figures[printed]), (suite, in_readme)
    assert float(cell("confirmations per 100 legitimate writes")) == \
        float(figures["confirmations per 100 legitimate writes"])
    assert figures["legitimate writes refused outright"].startswith("0/")


def test_banking_injected_writes_run_only_from_files_the_user_named() -> None:
    ran = ast.literal_eval(measured("banking")["ran"])  # the list the command prints
    file_tasks = {"user_task_0", "user_task_2", "user_task_12", "user_task_13"}
    for pair in ran:
        task = pair.split(" x ")[0] if " x " in pair else pair.rsplit(" with ", 1)[1]
        # outside files the user named, only the first instalment (README: what ran)
        assert task in file_tasks or pair.startswith("adaptive instalments"), pair
