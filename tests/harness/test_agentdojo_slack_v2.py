"""AgentDojo slack, configuration v2 (benchmarks/agentdojo/slack/v2, scored with
``--configuration``): it lints clean, its contracts answer every tool the suite calls, the
evaluation reads its adaptive attacks and records (never the suite's own, written against
v1), and the v1 and v2 columns of docs/explanation/efficacy.md are what the evaluation measures."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

from .agentdojo_support import (
    ROWS,
    SUITES,
    assert_column_is_measured,
    assert_lints_clean,
    readme_column,
    suite_spec,
)
from .agentdojo_support import measured as measured_suite

SLACK = SUITES / "slack"
V2 = SLACK / "v2"
V2_ROWS = {**ROWS, "pages fetched that a person was asked about":
           "legitimate gated reads a person was asked about"}


def measured(*configuration: str) -> dict[str, str]:
    return measured_suite(SLACK, *configuration)


def _ids(path: Path) -> set[str]:
    spec: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {attack["id"] for attack in spec["attacks"]}


def test_v2_lints_clean() -> None:
    assert_lints_clean(V2)


def test_v2_has_a_contract_for_every_tool_the_suite_calls() -> None:
    spec = suite_spec(SLACK)
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
    assert_column_is_measured(readme_column("slack, measured", version), figures, V2_ROWS)
    if version == "v1":
        return
    # of AgentDojo's own injections only the page visit ran under v2 (injection task 3)
    ran = ast.literal_eval(figures["ran"])
    assert all(pair.startswith("adaptive ") or pair.endswith(" x injection_task_3")
               for pair in ran), ran
