"""The reference configuration keeps the standards it asks of its users."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from callgate_rules.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_reference_yaml_is_in_canonical_layout() -> None:
    result = CliRunner().invoke(main, ["fmt", "--check", str(REPO / "contracts"),
                                       str(REPO / "policies")])
    assert result.exit_code == 0, result.output
