"""The origins scenarios (benchmarks/agentdojo/banking/scenarios) through the simulator:
each step's route, deciding rule and writes as the file expects."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from callgate_rules.cli import main

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "agentdojo" / "banking"


def test_the_origins_scenarios_pass() -> None:
    result = CliRunner().invoke(main, [
        "simulate", str(SUITE / "contracts"), str(SUITE / "policies"),
        "--scenarios", str(SUITE / "scenarios")])
    assert result.exit_code == 0, result.output
    assert "4 passed, 0 failed" in result.output
