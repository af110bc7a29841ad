"""Enforcement modes: a rule in warn or audit mode is evaluated but never changes the route."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callgate_rules import Gate, Route, WorldResolvers
from tests.conftest import Reference, load_yaml

SHADOW_RULE = """\
    - name: no-follow-ups-on-billing
      expression: ticket.team != "billing"
      error_class: conflict
      message: Billing tickets get no follow-ups this week.
      mode: {mode}
  verify:"""


def gate_with(tmp_path: Path, mode: str) -> Gate:
    contracts, policies = Reference.copy(tmp_path)
    path = contracts / "createFollowUp.yaml"
    path.write_text(path.read_text().replace("  verify:", SHADOW_RULE.format(mode=mode), 1))
    world = load_yaml(Reference.world_file)
    return Gate.from_paths(contracts, policies, resolvers=WorldResolvers(world))


@pytest.mark.parametrize("mode", ["warn", "audit"])
def test_shadow_rule_does_not_change_the_route(mode: str, tmp_path: Path,
                                               dana: dict[str, Any], now: Any) -> None:
    gate = gate_with(tmp_path, mode)
    call = {"name": "createFollowUp", "arguments": {
        "ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}}
    decision = gate.check(call, actor=dana, now=now)
    assert decision.route == Route.EXECUTE and decision.error_class is None
    [shadow] = decision.log["shadow"]
    assert shadow == {"rule": "createFollowUp/no-follow-ups-on-billing", "mode": mode,
                      "error_class": "conflict",
                      "message": "Billing tickets get no follow-ups this week."}
    # warn: the decision carries the warning; audit: only the log and counters do
    assert [w.rule for w in decision.warnings] == (
        ["createFollowUp/no-follow-ups-on-billing"] if mode == "warn" else [])


def test_shadow_verdicts_are_counted(tmp_path: Path, dana: dict[str, Any], now: Any) -> None:
    from collections import Counter

    from callgate_rules.decision_log import count

    gate = gate_with(tmp_path, "audit")
    call = {"name": "createFollowUp", "arguments": {
        "ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}}
    counters: Counter[str] = Counter()
    count(counters, gate.check(call, actor=dana, now=now).log)
    assert counters["shadow_audit"] == 1
