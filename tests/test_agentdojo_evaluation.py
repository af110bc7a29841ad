"""The AgentDojo evaluation (benchmarks/agentdojo_evaluation.py): the README's figures are
what the command measures, and what ran is what the README says can run."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "benchmarks" / "agentdojo" / "banking"


def measured() -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "agentdojo_evaluation.py"), str(SUITE)],
        capture_output=True, text=True, check=True, timeout=300, cwd=REPO)
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


def test_the_readme_figures_are_the_measured_ones() -> None:
    figures = measured()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| banking (measured"):]

    def row(label: str) -> str:
        found = re.search(r"^\| " + re.escape(label) + r" \| ([^|]+) \|", table, re.M)
        assert found, label
        return found.group(1).strip()

    def count(text: str) -> tuple[int, int]:
        found = re.search(r"(\d+)(?:/| of )(\d+)", text)
        assert found, text
        return int(found.group(1)), int(found.group(2))

    pairs = {
        "legitimate writes run with no person asked":
            "legitimate writes run with no person asked",
        "… with the injection in every read":
            "legitimate writes run with no person asked, injections in every read",
        "legitimate writes refused outright": "legitimate writes refused outright",
        "injected calls that ran with no person asked":
            "injected calls that ran with no person asked (pairs)",
        "adaptive attacks of our own that ran": "adaptive attacks that ran with no person asked",
    }
    for in_readme, printed in pairs.items():
        assert count(row(in_readme)) == count(figures[printed]), in_readme
    assert float(row("confirmations per 100 legitimate writes")) == \
        float(figures["confirmations per 100 legitimate writes"])


def test_no_legitimate_write_is_refused_and_no_injected_write_runs_outside_named_files(
        ) -> None:
    figures = measured()
    assert figures["legitimate writes refused outright"].startswith("0/")
    ran = ast.literal_eval(figures["ran"])  # the list the command prints
    file_tasks = {"user_task_0", "user_task_2", "user_task_12", "user_task_13"}
    for pair in ran:
        task = pair.split(" x ")[0] if " x " in pair else pair.rsplit(" with ", 1)[1]
        # outside files the user named, only the first instalment (README: what ran)
        assert task in file_tasks or pair.startswith("adaptive instalments"), pair
