"""The AgentDojo evaluation (benchmarks/agentdojo_evaluation.py): the figures of docs/explanation/efficacy.md are
what the command measures, per suite, and no legitimate write is refused."""

from __future__ import annotations

import ast

import pytest

from .agentdojo_support import SUITES, assert_column_is_measured, measured, readme_column


@pytest.mark.parametrize("suite", ["banking", "slack"])
def test_the_readme_figures_are_the_measured_ones(suite: str) -> None:
    assert_column_is_measured(readme_column("measured", suite), measured(SUITES / suite))


def test_banking_injected_writes_run_only_from_files_the_user_named() -> None:
    ran = ast.literal_eval(measured(SUITES / "banking")["ran"])  # the list the command prints
    file_tasks = {"user_task_0", "user_task_2", "user_task_12", "user_task_13"}
    for pair in ran:
        task = pair.split(" x ")[0] if " x " in pair else pair.rsplit(" with ", 1)[1]
        # outside files the user named, only the first instalment (README: what ran)
        assert task in file_tasks or pair.startswith("adaptive instalments"), pair
