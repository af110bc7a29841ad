"""AgentDojo with run intents (``--intents``): the intents are valid for their suites'
configurations, one per user task; and the "Run intents" table of
docs/explanation/efficacy.md is what the evaluation measures, per configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from callgate_rules.documents.compiler import load
from callgate_rules.intent import compile_intent

from .agentdojo_support import SUITES, count, measured, readme_column, suite_spec

HEADER = "with run intents"
# column: (suite, configuration or None, the new attacks' file)
COLUMNS = {
    "banking": ("banking", None, SUITES / "banking" / "adaptive_intents.yaml"),
    "slack v1": ("slack", None, SUITES / "slack" / "adaptive_intents.yaml"),
    "slack v2": ("slack", SUITES / "slack" / "v2",
                 SUITES / "slack" / "v2" / "adaptive_intents.yaml"),
    "travel": ("travel", None, SUITES / "travel" / "adaptive_intents.yaml"),
    "workspace": ("workspace", None, SUITES / "workspace" / "adaptive_intents.yaml"),
}
ROWS = {
    "legitimate writes run with no person asked": "legitimate writes run with no person asked",
    "legitimate writes refused outright": "legitimate writes refused outright",
    "legitimate reads a person was asked about":
        "legitimate reads a person was asked about (outside the run's intent)",
    "injected calls that ran with no person asked":
        "injected calls that ran with no person asked (pairs)",
    "earlier adaptive attacks that ran (written against the policies)":
        "adaptive attacks that ran with no person asked",
}
NEW_ATTACKS = "new adaptive attacks that ran (written against policies and intents)"
WITHOUT = "… the same new attacks without intents"
ADAPTIVE = "adaptive attacks that ran with no person asked"


@pytest.mark.parametrize("column", sorted(COLUMNS))
def test_every_user_task_has_a_valid_intent(column: str) -> None:
    suite, configuration, _ = COLUMNS[column]
    root = configuration or SUITES / suite
    config = load([root / "contracts", root / "policies"])
    intents = yaml.safe_load((SUITES / suite / "intents.yaml").read_text(encoding="utf-8"))
    tasks = {task["id"] for task in suite_spec(SUITES / suite)["user_tasks"]}
    assert set(intents) == tasks
    for task, intent in intents.items():
        compile_intent(intent, config, name=task)


def _options(column: str, *more: str) -> tuple[Path, list[str]]:
    suite, configuration, _ = COLUMNS[column]
    options = ["--configuration", str(configuration)] if configuration else []
    return SUITES / suite, [*options, *more]


@pytest.mark.integration
@pytest.mark.parametrize("column", sorted(COLUMNS))
def test_the_efficacy_figures_with_intents_are_the_measured_ones(column: str) -> None:
    cell = readme_column(HEADER, column)
    suite, configuration, new_attacks = COLUMNS[column]
    intents = str(SUITES / suite / "intents.yaml")
    root, options = _options(column, "--intents", intents)
    figures = measured(root, *options)
    for in_page, printed in ROWS.items():
        assert count(cell(in_page)) == count(figures[printed]), in_page
    assert float(cell("confirmations per 100 legitimate writes")) == float(
        figures["confirmations per 100 legitimate writes"])
    root, options = _options(column, "--intents", intents, "--adaptive", str(new_attacks))
    assert count(cell(NEW_ATTACKS)) == count(measured(root, *options)[ADAPTIVE])
    root, options = _options(column, "--adaptive", str(new_attacks))
    assert count(cell(WITHOUT)) == count(measured(root, *options)[ADAPTIVE])
