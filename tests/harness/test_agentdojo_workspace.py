"""AgentDojo's workspace suite (benchmarks/agentdojo/workspace): it loads, its configuration
lints clean, every tool its tasks call has a contract and an answer, and the efficacy page's
workspace column is what the evaluation measures."""

from __future__ import annotations

import ast

import pytest

from .agentdojo_support import (
    SUITES,
    assert_column_is_measured,
    assert_lints_clean,
    evaluation_module,
    measured,
    readme_column,
    suite_spec,
)

WORKSPACE = SUITES / "workspace"


@pytest.fixture(scope="module")
def figures() -> dict[str, str]:
    """The evaluation as docs/explanation/efficacy.md's command runs it (once for the module: 560 pairs)."""
    return measured(WORKSPACE)


def test_the_configuration_lints_clean() -> None:
    assert_lints_clean(WORKSPACE)


def test_the_suite_is_agentdojos_and_every_tool_it_calls_is_answered() -> None:
    evaluation = evaluation_module()
    suite, spec = evaluation.Suite.load(WORKSPACE), suite_spec(WORKSPACE)
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
    assert_column_is_measured(readme_column("measured", "workspace"), figures)


def test_injected_calls_ran_only_from_the_users_own_feedback_sheet(
        figures: dict[str, str]) -> None:
    """docs/explanation/efficacy.md: the pairs that ran all read feedback.xlsx alone, a file the user owns that
    holds customers' words — the one injection place the policy trusts."""
    ran = ast.literal_eval(figures["ran"])
    pairs = [pair for pair in ran if not pair.startswith("adaptive ")]
    assert pairs, "the efficacy page names the pairs that ran"
    assert {pair.split(" x ")[0] for pair in pairs} == {"user_task_28"}
