"""The run-history scenarios of examples/banking through the simulator: each asserts its
routes and writes step by step; on SQLite (a file per scenario), and on PostgreSQL
shared by all of them (skipped without ``CALLGATE_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import os
import uuid

import pytest

from callgate_rules.harness.scenarios import load_config_for, load_scenarios, run_scenarios

from .test_history import BANKING

SCENARIOS = BANKING / "scenarios"


def run(store_url: str | None) -> None:
    config = load_config_for(str(BANKING / "contracts"), str(BANKING / "policies"))
    scenarios = load_scenarios([SCENARIOS])
    results = run_scenarios(scenarios, config, store_url)
    assert len(results) == 6
    assert [failure for result in results for failure in result.failures] == []
    by_name = {result.name: result for result in results}
    split = by_name["three instalments of 600 under a 1,000 limit per payment"]
    assert [step.decision.route for step in split.steps] == [
        "return_result", "return_result", "await_confirmation", "return_result",
        "await_confirmation"]
    assert split.writes == 3


def test_the_history_scenarios_pass_on_sqlite() -> None:
    run(None)


def test_the_history_scenarios_pass_on_one_shared_postgres_store() -> None:
    url = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set; the shared-store run needs a "
                    "PostgreSQL server")
    import psycopg

    schema = f"callgate_scenarios_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in url else "?"
    try:
        run(f"{url}{separator}schema={schema}")
    finally:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
