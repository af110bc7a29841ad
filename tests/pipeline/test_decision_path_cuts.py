"""The cheaper ways the decision path and the write's route step take (issue 32), each held
to the general way it specialises: ``lookups.ask`` asking one field straight away,
``Decision.replaced`` (``replace`` with a dict), ``Router.ended``'s scan of what execution
traced, and the request IDs drawn for decisions without one."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate_rules import Gate
from callgate_rules.documents.compiler import load
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.harness.simulator import Simulator, faults_by_tool
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline import lookups, route
from callgate_rules.pipeline.decision import FROM_RECORD, Decision
from callgate_rules.store import MemoryStore
from callgate_rules.taxonomy import Route
from tests.conftest import CONTRACTS, POLICIES, Calls

CONFIG = load([CONTRACTS, POLICIES])

_VALUES = st.one_of(st.none(), st.integers(), st.text(max_size=5))


class _Recorded:
    """A resolver that keeps the deadline itself and answers from a table, by field."""

    callgate_keeps_deadline = True

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def __call__(self, field: str, key: Any) -> Any:
        return self.answers.get(field, ())


@given(answer=st.one_of(_VALUES, st.lists(st.dictionaries(st.text(max_size=3), _VALUES),
                                          max_size=3)),
       key=_VALUES)
def test_one_field_is_asked_as_resolve_asks_it(answer: Any, key: Any) -> None:
    resolver = _Recorded({"id": answer})
    asked = lookups.ask(resolver, ("id",), key, started=0.0, timeout=5.0)
    assert asked is lookups.resolve(resolver, ("id",), key)


def test_several_fields_are_still_merged_by_resolve() -> None:
    shared = {"id": "T-1"}
    resolver = _Recorded({"id": [shared], "number": [shared, {"id": "T-2"}]})
    asked = lookups.ask(resolver, ("id", "number"), "x", started=0.0, timeout=5.0)
    assert asked == lookups.resolve(resolver, ("id", "number"), "x") == [shared, {"id": "T-2"}]


def _handled(world: dict[str, Any], faults: dict[str, Any], dana: dict[str, Any]) -> Decision:
    simulator = Simulator(world, faults_by_tool(faults))
    clock = FakeClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    gate = Gate(CONFIG, resolvers=WorldResolvers(world), executors=simulator.executors(),
                finder=simulator.find, store=MemoryStore(), clock=clock, sleep=clock.sleep,
                rng=random.Random(7), secret=b"test-secret")
    return gate.handle(Calls.follow_up(), actor=dana, request_id="r1")


@pytest.mark.parametrize(("faults", "reconciled"), [
    ({}, False),
    ({"createFollowUp": {"timeout_after_applying": 1, "fail_before_sending": 1}}, True),
    ({"createFollowUp": {"corrupt_result": True}}, False),
], ids=["executed", "retried-and-reconciled", "to-review"])
def test_what_ended_counts_is_what_the_trace_shows(reference_world: dict[str, Any],
                                                    dana: dict[str, Any],
                                                    faults: dict[str, Any],
                                                    reconciled: bool) -> None:
    """Steps 1–4 neither reconcile nor send: the scan of the executed entries alone says
    what a scan of the whole trace says."""
    decision = _handled(reference_world, faults, dana)
    counted = decision.counted()
    assert counted["reconciled"] == any(entry.step == "reconcile" for entry in decision.trace)
    assert counted["unknown_outcome"] == any("unknown_outcome" in entry.result
                                             for entry in decision.trace)
    assert counted["reconciled"] is reconciled


def test_replaced_is_replace(reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    decision = _handled(reference_world, {}, dana)
    changes = {"route": Route.REFUSE, "agent_message": "a", "user_message": "u",
               "trace": (), "log": FROM_RECORD, "extra": None, "versions": None,
               "operation_id": "op_1"}
    replaced, replace = decision.replaced(changes), decision.replace(**changes)
    assert replaced == replace and replaced.fields() == replace.fields()
    assert replaced.agent_message == "a" and replaced.versions == {}
    for wrong in (decision.replaced, lambda changes: decision.replace(**changes)):
        with pytest.raises(TypeError, match="no field colour"):
            wrong({"colour": "red"})


def test_request_ids_are_a_process_prefix_and_a_count() -> None:
    drawn = [next(route._REQUEST_IDS) for _ in range(3)]
    assert all(re.fullmatch("[0-9a-f]{32}", drawn_id) for drawn_id in drawn)
    assert len({drawn_id[:16] for drawn_id in drawn}) == 1
    counts = [int(drawn_id[16:], 16) for drawn_id in drawn]
    assert counts == list(range(counts[0], counts[0] + 3))
