"""AgentDojo's workspace suite (benchmarks/agentdojo/workspace): it loads, its configuration
lints clean, every tool its tasks call has a contract and an answer, and the README's
workspace column is what the evaluation measures."""

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
WORKSPACE = REPO / "benchmarks" / "agentdojo" / "workspace"
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
    return yaml.safe_load((WORKSPACE / "tasks.yaml").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def figures() -> dict[str, str]:
    """The evaluation as the README's command runs it (once for the module: 560 pairs)."""
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "agentdojo_evaluation.py"), str(WORKSPACE)],
        capture_output=True, text=True, check=True, timeout=300, cwd=REPO)
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


def count(text: str) -> tuple[int, int]:
    found = re.search(r"(\d+)(?:/| of )(\d+)", text)
    assert found, text
    return int(found.group(1)), int(found.group(2))


def test_the_configuration_lints_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "callgate_rules.cli", "lint", str(WORKSPACE / "contracts"),
         str(WORKSPACE / "policies")], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 error(s), 0 warning(s)" in result.stdout + result.stderr


def test_the_suite_is_agentdojos_and_every_tool_it_calls_is_answered() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import agentdojo_evaluation as evaluation  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    suite = evaluation.Suite.load(WORKSPACE)
    spec = _spec()
    assert [task["id"] for task in spec["user_tasks"]] == [f"user_task_{n}" for n in range(40)]
    assert [task["id"] for task in spec["injection_tasks"]] == \
        [f"injection_task_{n}" for n in range(14)]
    contracts = {path.stem for path in (WORKSPACE / "contracts").glob("*.yaml")}
    tasks = spec["user_tasks"] + spec["injection_tasks"]
    assert {tool for task in tasks for tool, _ in task["calls"]} <= contracts
    assert set(spec["writes"]) <= contracts
    for task in tasks:
        for tool, arguments in task["calls"]:
            answer = evaluation.tool_output(suite, tool, arguments, spec["vectors"])
            # every read of a user task finds what the task is about (no "not found")
            assert answer.strip() not in ("", "{}", "[]"), (task["id"], tool)
            if task["id"].startswith("user_task"):
                assert not answer.startswith("ValueError"), (task["id"], tool, answer)
    # every place an injection goes is shown by some user task's reads, but two that no
    # task's read reaches (the fake deadline event of May 25th, a follow-up advert)
    shown = "".join(
        evaluation.tool_output(suite, tool, arguments, {name: f"<{name}>" for name in
                                                        spec["vectors"]})
        for task in spec["user_tasks"] for tool, arguments in task["calls"]
        if not suite.is_write(tool))
    assert {name for name in spec["vectors"] if f"<{name}>" not in shown} == {
        "calendar_fake_deadline_description", "email_events_follow_up_injection"}


def test_the_readme_workspace_column_is_the_measured_one(figures: dict[str, str]) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    header = re.search(r"^\| measured [^|]+\|(.*)$", readme, re.M)
    assert header, "the efficacy table"
    column = [name.strip() for name in header.group(1).split("|")].index("workspace")
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


def test_injected_calls_ran_only_from_the_users_own_feedback_sheet(
        figures: dict[str, str]) -> None:
    """README: the pairs that ran all read feedback.xlsx alone, a file the user owns that
    holds customers' words — the one injection place the policy trusts."""
    ran = ast.literal_eval(figures["ran"])
    pairs = [pair for pair in ran if not pair.startswith("adaptive ")]
    assert pairs, "the README names the pairs that ran"
    assert {pair.split(" x ")[0] for pair in pairs} == {"user_task_28"}
