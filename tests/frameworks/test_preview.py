"""Gate.preview: check's decision plus, for a held write, the draft and token ``handle``
would give — with no side effects; and preview.approve, which confirms with that token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callgate_rules import Gate
from callgate_rules.harness.scenarios import FakeClock, Scenario, load_scenarios
from callgate_rules.harness.simulator import Simulator
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.preview import approve
from callgate_rules.store.base import ReceiptState
from callgate_rules.store.sqlite import SqliteStore
from callgate_rules.taxonomy import ErrorClass, Route
from tests.frameworks.conftest import DANA, NOW, REPO, WORLD

SCENARIOS = load_scenarios([REPO / "examples" / "scenarios"])
EMAIL = {"name": "sendEmail", "arguments": {"to": "anna.petrova@northwind.example",
                                            "subject": "Hi", "body": "Hello Anna"}}


def _config() -> Any:
    from callgate_rules import load
    return load([REPO / "contracts", REPO / "policies"])


CONFIG = _config()


def _gate(tmp_path: Path, simulator: Simulator, clock: Any = None) -> Gate:
    clock = clock or FakeClock(NOW)
    return Gate(CONFIG, resolvers=WorldResolvers(WORLD), executors=simulator.executors(),
                finder=simulator.find, store=SqliteStore(tmp_path / "r.sqlite3"),
                clock=clock, sleep=clock.sleep, secret=b"preview-secret")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_preview_shows_what_handle_holds_and_changes_nothing(scenario: Scenario,
                                                             tmp_path: Path) -> None:
    simulator = Simulator(scenario.world, scenario.faults)
    clock = FakeClock(scenario.now)
    gate = Gate(CONFIG, resolvers=WorldResolvers(scenario.world),
                executors=simulator.executors(), finder=simulator.find,
                store=SqliteStore(tmp_path / "r.sqlite3"), clock=clock, sleep=clock.sleep,
                secret=b"scenario-secret")
    for step in scenario.steps:
        if "propose" not in step:
            continue
        keywords = dict(actor=step.get("actor", scenario.actor),
                        request_id=str(step.get("request_id", scenario.name)),
                        session=step.get("session", scenario.session),
                        conversation=step.get("conversation", scenario.conversation))
        before = _world_and_store(gate, simulator)
        preview = gate.preview(step["propose"], **keywords)
        assert _world_and_store(gate, simulator) == before, "a preview changed something"
        decision = gate.handle(step["propose"], **keywords)
        if decision.route == Route.AWAIT_CONFIRMATION and decision.draft is not None:
            assert preview.needs_confirmation
            assert preview.draft == decision.draft
            assert preview.operation_id == decision.operation_id
            assert preview.confirmation_token == decision.confirmation_token
        elif preview.needs_confirmation:  # held before, or already run within the request
            assert decision.operation_id in (None, preview.operation_id)
        else:
            assert preview.draft is None and preview.confirmation_token is None


def _world_and_store(gate: Gate, simulator: Simulator) -> Any:
    """Everything a call could change: the destination, and every receipt and review."""
    receipts = [(r.operation_id, str(r.state)) for state in ReceiptState
                for r in gate.store.list_receipts(state=state, limit=1000)]
    return (simulator.write_count(), len(simulator.calls), len(simulator.finds),
            sorted(receipts), len(gate.store.list_reviews()))


def test_approve_confirms_with_the_previews_token_once(tmp_path: Path) -> None:
    simulator = Simulator(WORLD)
    gate = _gate(tmp_path, simulator)
    preview = gate.preview(EMAIL, actor=DANA, request_id="turn-1")
    assert preview.needs_confirmation and preview.confirmation_token
    assert "anna.petrova@northwind.example" in (preview.draft or "")
    assert gate.store.get(preview.operation_id or "") is None
    done = approve(gate, EMAIL, preview.confirmation_token, actor=DANA, request_id="turn-1",
                   confirmed_by="dana")
    assert done.route == Route.RETURN_RESULT and simulator.write_count() == 1
    again = approve(gate, EMAIL, preview.confirmation_token, actor=DANA, request_id="turn-1",
                    confirmed_by="dana")
    assert again.error_class == ErrorClass.DUPLICATE and simulator.write_count() == 1


def test_a_previews_token_confirms_only_its_own_arguments_and_actor(tmp_path: Path) -> None:
    simulator = Simulator(WORLD)
    gate = _gate(tmp_path, simulator)
    token = gate.preview(EMAIL, actor=DANA, request_id="turn-1").confirmation_token
    assert token is not None
    other = {"name": "sendEmail", "arguments": {**EMAIL["arguments"], "body": "Changed"}}
    moved = approve(gate, other, token, actor=DANA, request_id="turn-1", confirmed_by="dana")
    assert moved.error_class == ErrorClass.FORBIDDEN and simulator.write_count() == 0
    lee = {**DANA, "id": "U-8", "teams": ["onboarding"]}
    taken = approve(gate, EMAIL, token, actor=lee, request_id="turn-1", confirmed_by="lee")
    assert taken.error_class is not None and simulator.write_count() == 0
    forged = approve(gate, EMAIL, token[:-2] + "xx", actor=DANA, request_id="turn-1",
                     confirmed_by="dana")
    assert forged.error_class == ErrorClass.FORBIDDEN and simulator.write_count() == 0


def test_an_expired_previews_token_is_refused(tmp_path: Path) -> None:
    from datetime import timedelta
    simulator = Simulator(WORLD)
    clock = FakeClock(NOW)
    gate = _gate(tmp_path, simulator, clock)
    preview = gate.preview(EMAIL, actor=DANA, request_id="turn-1")
    assert preview.expires_at is not None and preview.confirmation_token is not None
    clock.now = preview.expires_at + timedelta(seconds=1)
    late = approve(gate, EMAIL, preview.confirmation_token, actor=DANA, request_id="turn-1",
                   confirmed_by="dana")
    assert late.error_class is not None and simulator.write_count() == 0


def test_a_refused_call_previews_as_check_decides_it(tmp_path: Path) -> None:
    simulator = Simulator(WORLD)
    gate = _gate(tmp_path, simulator)
    call = {"name": "sendEmail", "arguments": {"to": "billing@attacker.example",
                                               "subject": "x", "body": "y"}}
    preview = gate.preview(call, actor=DANA, request_id="turn-1")
    checked = gate.check(call, actor=DANA, request_id="turn-1")
    assert not preview.needs_confirmation and preview.confirmation_token is None
    assert (preview.decision.route, preview.decision.error_class,
            preview.decision.agent_message) == (checked.route, checked.error_class,
                                                checked.agent_message)
    refused = approve(gate, call, "not-a-token", actor=DANA, request_id="turn-1",
                      confirmed_by="dana")
    assert refused.route == Route.REFUSE and simulator.write_count() == 0
