"""A synchronous resolver that hangs never holds a decision past its contract's deadline
(issue #37, item 8).

Before: a resolver hanging 12 s under a contract whose timeout is 5 s held the decision for
the whole 12 s. Now the decision returns ``transient`` at the deadline, the late answer is
dropped, and the look-ups abandoned that way are bounded and counted
(``callgate_rules.pipeline.lookups``). Each hanging resolver here waits on an event the test
sets, so "returned before the resolver answered" is a fact the test observes, not a timing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.pipeline import lookups
from callgate_rules.pipeline.execute import keeps_deadline
from callgate_rules.pipeline.gate import Gate
from callgate_rules.taxonomy import ErrorClass, Route

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
CALL = {"name": "slow", "arguments": {"ticketId": "T-1"}}
ACTOR = {"id": "U-1"}
TICKET = [{"id": "T-1", "tenant": "acme"}]

DOCUMENTS = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: slow, version: "1", owner: t@example.com, description: a slow look-up}
spec:
  effect: read
  timeout: 300ms
  arguments: {type: object, properties: {ticketId: {type: string}}}
  lookups: [{name: ticket, collection: tickets, key: args.ticketId}]
  examples: [{arguments: {ticketId: T-1}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: slow-access, version: "1", owner: t@example.com, description: anyone}
spec:
  rules: [{name: anyone, effect: allow, tools: [slow], when: "true"}]
"""
ROUTING = Path(__file__).resolve().parents[2] / "policies" / "routing.yaml"


@pytest.fixture
def config(tmp_path: Path) -> GateConfig:
    (tmp_path / "slow.yaml").write_text(DOCUMENTS)
    (tmp_path / "routing.yaml").write_text(ROUTING.read_text())
    return load([tmp_path])


class Hanging:
    """A resolver that answers only once ``release`` is set (or after ``hold`` seconds)."""

    def __init__(self, hold: float = 12.0) -> None:
        self.release = threading.Event()
        self.hold = hold
        self.calls = 0
        self.answered = threading.Event()

    def __call__(self, field: str, value: Any) -> list[dict[str, Any]]:
        self.calls += 1
        self.release.wait(self.hold)
        self.answered.set()
        return TICKET


@pytest.fixture
def bound() -> Iterator[None]:
    """Restore the process-wide bound after a test changes it."""
    before = lookups.abandoned().limit
    yield
    lookups.set_abandoned_limit(before)


def test_a_hanging_resolver_is_abandoned_at_the_deadline(config: GateConfig,
                                                         bound: None) -> None:
    hanging = Hanging()
    before = lookups.abandoned()
    gate = Gate(config, resolvers={"tickets": hanging})
    decision = gate.check(CALL, actor=ACTOR, now=NOW)
    # the decision came back while the resolver was still holding its answer
    assert not hanging.answered.is_set()
    assert (decision.route, decision.error_class) == (Route.RETRY, ErrorClass.TRANSIENT)
    assert "took too long" in decision.agent_message
    during = gate.abandoned_lookups
    assert (during.in_flight, during.total) == (before.in_flight + 1, before.total + 1)
    hanging.release.set()
    assert hanging.answered.wait(5)
    # the late answer is dropped; the count of look-ups still running goes back down
    for _ in range(100):
        if lookups.abandoned().in_flight == before.in_flight:
            break
        threading.Event().wait(0.01)
    assert lookups.abandoned().in_flight == before.in_flight
    assert decision.route == Route.RETRY


def test_past_the_bound_a_look_up_fails_fast_without_calling(config: GateConfig,
                                                             bound: None) -> None:
    lookups.set_abandoned_limit(lookups.abandoned().in_flight + 1)
    hanging = Hanging()
    gate = Gate(config, resolvers={"tickets": hanging})
    first = gate.check(CALL, actor=ACTOR, now=NOW)
    assert first.error_class == ErrorClass.TRANSIENT and hanging.calls == 1
    refused_before = lookups.abandoned().refused
    second = gate.check(CALL, actor=ACTOR, now=NOW)
    assert (second.route, second.error_class) == (Route.RETRY, ErrorClass.TRANSIENT)
    assert hanging.calls == 1  # not started: the bound of abandoned look-ups is reached
    assert lookups.abandoned().refused == refused_before + 1
    assert "still running" in str(second.log)
    hanging.release.set()
    assert hanging.answered.wait(5)
    for _ in range(100):
        if lookups.abandoned().in_flight < lookups.abandoned().limit:
            break
        threading.Event().wait(0.01)
    third = gate.check(CALL, actor=ACTOR, now=NOW)
    assert third.route == Route.EXECUTE and hanging.calls == 2


def test_an_answer_in_time_decides(config: GateConfig) -> None:
    answering = Hanging()
    answering.release.set()
    gate = Gate(config, resolvers={"tickets": answering})
    assert gate.check(CALL, actor=ACTOR, now=NOW).route == Route.EXECUTE


def test_a_resolver_that_keeps_the_deadline_runs_in_the_calling_thread(
        config: GateConfig) -> None:
    threads: list[int] = []

    @keeps_deadline
    def in_memory(field: str, value: Any) -> list[dict[str, Any]]:
        threads.append(threading.get_ident())
        return TICKET

    def plain(field: str, value: Any) -> list[dict[str, Any]]:
        threads.append(threading.get_ident())
        return TICKET

    assert Gate(config, resolvers={"tickets": in_memory}).check(
        CALL, actor=ACTOR, now=NOW).route == Route.EXECUTE
    assert Gate(config, resolvers={"tickets": plain}).check(
        CALL, actor=ACTOR, now=NOW).route == Route.EXECUTE
    assert threads[0] == threading.get_ident() != threads[1]


def test_a_resolver_raising_in_time_is_still_its_own_failure(config: GateConfig) -> None:
    def broken(field: str, value: Any) -> list[dict[str, Any]]:
        raise TimeoutError("the records service said it timed out")

    decision = Gate(config, resolvers={"tickets": broken}).check(CALL, actor=ACTOR, now=NOW)
    assert (decision.route, decision.error_class) == (Route.RETRY, ErrorClass.TRANSIENT)
    assert "could not be read right now" in decision.agent_message


def test_a_lazy_answer_is_read_under_the_deadline(config: GateConfig) -> None:
    release = threading.Event()

    def trickling(field: str, value: Any) -> Iterator[dict[str, Any]]:
        release.wait(12)
        yield from TICKET

    decision = Gate(config, resolvers={"tickets": trickling}).check(CALL, actor=ACTOR,
                                                                   now=NOW)
    assert not release.is_set()
    assert decision.error_class == ErrorClass.TRANSIENT
    release.set()


def test_the_bound_is_a_count() -> None:
    with pytest.raises(ValueError, match="a count"):
        lookups.set_abandoned_limit(-1)
