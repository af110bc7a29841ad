"""What the AgentDojo suites' tests share: the evaluation run as the documentation's command
runs it, the efficacy tables of docs/explanation/efficacy.md read cell by cell, and the lint of
a configuration."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "benchmarks" / "agentdojo"
# the efficacy table's row -> the line the evaluation prints
ROWS = {
    "legitimate writes run with no person asked": "legitimate writes run with no person asked",
    "… with the injection in every read":
        "legitimate writes run with no person asked, injections in every read",
    "legitimate writes refused outright": "legitimate writes refused outright",
    "injected calls that ran with no person asked":
        "injected calls that ran with no person asked (pairs)",
    "adaptive attacks of our own that ran": "adaptive attacks that ran with no person asked",
}


def measured(suite: Path, *options: str) -> dict[str, str]:
    """The figures ``python benchmarks/agentdojo_evaluation.py SUITE [OPTIONS]`` prints."""
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "agentdojo_evaluation.py"), str(suite),
         *options], capture_output=True, text=True, check=True, timeout=300, cwd=REPO)
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


def count(text: str) -> tuple[int, int]:
    """``3 of 144`` or ``3/144`` as (3, 144)."""
    found = re.search(r"(\d+)(?:/| of )(\d+)", text)
    assert found, text
    return int(found.group(1)), int(found.group(2))


def readme_column(header: str, column: str) -> Callable[[str], str]:
    """The cells of one column of the table in docs/explanation/efficacy.md whose header row
    starts ``| HEADER``."""
    readme = (REPO / "docs" / "explanation" / "efficacy.md").read_text(encoding="utf-8")
    found = re.search(r"^\| " + re.escape(header) + r"[^|]*\|(.*)$", readme, re.M)
    assert found, f"the efficacy page's table headed {header!r}"
    index = [name.strip() for name in found.group(1).split("|")].index(column)
    table = readme[found.start():]

    def cell(label: str) -> str:
        row = re.search(r"^\| " + re.escape(label) + r" \|(.*)$", table, re.M)
        assert row, label
        return row.group(1).split("|")[index].strip()

    return cell


def assert_column_is_measured(cell: Callable[[str], str], figures: Mapping[str, str],
                              rows: Mapping[str, str] = ROWS) -> None:
    """Every row of the column is the figure the evaluation printed; none refused."""
    for in_readme, printed in rows.items():
        assert count(cell(in_readme)) == count(figures[printed]), in_readme
    assert float(cell("confirmations per 100 legitimate writes")) == \
        float(figures["confirmations per 100 legitimate writes"])
    assert figures["legitimate writes refused outright"].startswith("0/")


def assert_lints_clean(configuration: Path) -> None:
    """``callgate lint CONFIGURATION/contracts CONFIGURATION/policies``: no finding."""
    result = subprocess.run(
        [sys.executable, "-m", "callgate_rules.cli", "lint", str(configuration / "contracts"),
         str(configuration / "policies")], capture_output=True, text=True, timeout=120,
        cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 error(s), 0 warning(s)" in result.stdout + result.stderr


def suite_spec(suite: Path) -> dict[str, Any]:
    """The suite's ``tasks.yaml``."""
    spec: dict[str, Any] = yaml.safe_load((suite / "tasks.yaml").read_text(encoding="utf-8"))
    return spec


def evaluation_module() -> ModuleType:
    """``benchmarks/agentdojo_evaluation.py``, imported (it is a script, not a package)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import agentdojo_evaluation as evaluation  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    module: ModuleType = evaluation
    return module
