"""AgentDojo's travel suite (benchmarks/agentdojo/travel): it loads, its configuration lints
clean, every tool its tasks call has a contract and an answer, and the efficacy page's travel
column is what the evaluation measures."""

from __future__ import annotations

import ast

from .agentdojo_support import (
    SUITES,
    assert_column_is_measured,
    assert_lints_clean,
    evaluation_module,
    measured,
    readme_column,
    suite_spec,
)

TRAVEL = SUITES / "travel"


def test_the_configuration_lints_clean() -> None:
    assert_lints_clean(TRAVEL)


def test_every_tool_the_tasks_call_has_a_contract_and_an_answer() -> None:
    evaluation = evaluation_module()
    suite, spec = evaluation.Suite.load(TRAVEL), suite_spec(TRAVEL)
    contracts = {path.stem for path in (TRAVEL / "contracts").glob("*.yaml")}
    tasks = spec["user_tasks"] + spec["injection_tasks"]
    assert {tool for task in tasks for tool, _ in task["calls"]} <= contracts
    assert set(spec["writes"]) <= contracts
    for task in tasks:
        for tool, arguments in task["calls"]:
            answer = evaluation.tool_output(suite, tool, arguments, spec["vectors"])
            assert answer.strip() not in ("", "{}", "[]"), (task["id"], tool)


def test_the_readme_travel_column_is_the_measured_one() -> None:
    figures = measured(TRAVEL)
    assert_column_is_measured(readme_column("measured", "travel"), figures)
    # what ran are adaptive attacks only: no AgentDojo injection task ran in any pair
    ran = ast.literal_eval(figures["ran"])
    assert all(pair.startswith("adaptive ") for pair in ran), ran
