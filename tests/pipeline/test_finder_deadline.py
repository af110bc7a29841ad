"""A synchronous finder that hangs never holds a decision past its contract's deadline
(issue #37, item 4: "every outbound dependency has a total deadline … finders").

A finder is the host's look-up by operation ID (``Gate(finder=...)``), asked when a write's
outcome is unknown. Before, the gate called it in the calling thread and waited for as long
as it took. Now it is held to the contract's timeout as a resolver is
(``lookups.find``): the decision returns at the deadline — the write to a person, its
receipt in review (the outcome is still unknown; it is never sent again) — the late answer
is dropped, and the finders abandoned that way count among the abandoned look-ups, under
the same bound. Each hanging finder waits on an event the test sets, so "returned before
the finder answered" is a fact the test observes, not a timing.
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
from callgate_rules.errors import ConnectionLost
from callgate_rules.pipeline import lookups
from callgate_rules.pipeline.execute import ExecutionRequest, keeps_deadline
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store.base import ReceiptState
from callgate_rules.taxonomy import ErrorClass, Route

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ACTOR = {"id": "U-1"}

DOCUMENTS = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: archive, version: "1", owner: t@example.com, description: a lost answer}
spec:
  effect: write
  idempotency: key
  timeout: 300ms
  arguments: {type: object, properties: {folderId: {type: string}}}
  examples: [{arguments: {folderId: F-1}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: archive-access, version: "1", owner: t@example.com, description: anyone}
spec:
  rules: [{name: anyone, effect: allow, tools: [archive], when: "true"}]
"""
ROUTING = Path(__file__).resolve().parents[2] / "policies" / "routing.yaml"


@pytest.fixture
def config(tmp_path: Path) -> GateConfig:
    (tmp_path / "archive.yaml").write_text(DOCUMENTS)
    (tmp_path / "routing.yaml").write_text(ROUTING.read_text())
    return load([tmp_path])


def lost_answer(request: ExecutionRequest) -> Any:
    """Sent, and the connection broke before the answer: the outcome is unknown."""
    raise ConnectionLost("the connection broke after sending")


class HangingFinder:
    """A finder that answers ``found`` only once ``release`` is set (or after ``hold``)."""

    def __init__(self, hold: float = 12.0) -> None:
        self.release = threading.Event()
        self.answered = threading.Event()
        self.hold = hold
        self.calls = 0
        self.threads: list[str] = []

    def __call__(self, tool: str, operation_id: str) -> Any:
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        self.release.wait(self.hold)
        self.answered.set()
        return {"id": "A-1", "operation_id": operation_id}


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'receipts.sqlite3'}"


@pytest.fixture
def bound() -> Iterator[None]:
    """Restore the process-wide bound after a test changes it."""
    before = lookups.abandoned().limit
    yield
    lookups.set_abandoned_limit(before)


def call(folder: str) -> dict[str, Any]:
    return {"name": "archive", "arguments": {"folderId": folder}}


def settle(in_flight: int) -> None:
    """Wait until the abandoned look-ups still running are back to ``in_flight``."""
    for _ in range(500):
        if lookups.abandoned().in_flight == in_flight:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{lookups.abandoned()} never went back to {in_flight} in flight")


def test_a_hanging_finder_is_abandoned_at_the_deadline(config: GateConfig, store: str,
                                                       bound: None) -> None:
    finder = HangingFinder()
    before = lookups.abandoned()
    gate = Gate(config, executors={"archive": lost_answer}, finder=finder,
                sleep=lambda seconds: None, store=store)
    decision = gate.handle(call("F-1"), actor=ACTOR, request_id="r-finder-1", now=NOW)
    # the decision came back while the finder still held its answer
    assert not finder.answered.is_set() and finder.calls == 1
    assert finder.threads[0] != threading.current_thread().name  # called in another thread
    assert (decision.route, decision.error_class) == (Route.REVIEW,
                                                      ErrorClass.RECONCILE_FAILED)
    assert "given up" in str(decision.log["detail"])
    during = gate.abandoned_lookups
    assert (during.in_flight, during.total) == (before.in_flight + 1, before.total + 1)
    finder.release.set()
    assert finder.answered.wait(5)
    settle(before.in_flight)
    # the late answer decided nothing: the outcome stays with a person, never confirmed
    assert decision.operation_id is not None
    receipt = gate.store.get(decision.operation_id)
    assert receipt is not None and receipt.state == ReceiptState.IN_REVIEW
    item = next(item for item in gate.store.list_reviews()
                if item.operation_id == decision.operation_id)
    assert "did not say in time whether it happened" in item.summary


def test_past_the_bound_a_finder_is_not_asked(config: GateConfig, store: str,
                                              bound: None) -> None:
    before = lookups.abandoned()
    lookups.set_abandoned_limit(before.in_flight + 1)
    finder = HangingFinder()
    gate = Gate(config, executors={"archive": lost_answer}, finder=finder,
                sleep=lambda seconds: None, store=store)
    first = gate.handle(call("F-2"), actor=ACTOR, request_id="r-finder-2", now=NOW)
    assert first.error_class == ErrorClass.RECONCILE_FAILED and finder.calls == 1
    second = gate.handle(call("F-3"), actor=ACTOR, request_id="r-finder-3", now=NOW)
    assert (second.route, second.error_class) == (Route.REVIEW, ErrorClass.RECONCILE_FAILED)
    assert finder.calls == 1  # not started: the bound of abandoned look-ups is reached
    assert lookups.abandoned().refused == before.refused + 1
    assert "still running" in str(second.log["detail"])
    finder.release.set()
    settle(before.in_flight)


def test_a_finder_that_keeps_the_deadline_is_called_in_the_calling_thread(
        config: GateConfig, store: str) -> None:
    found: list[str] = []

    @keeps_deadline
    def finder(tool: str, operation_id: str) -> Any:
        found.append(threading.current_thread().name)
        return {"id": "A-1", "operation_id": operation_id}

    gate = Gate(config, executors={"archive": lost_answer}, finder=finder,
                sleep=lambda seconds: None, store=store)
    decision = gate.handle(call("F-4"), actor=ACTOR, request_id="r-finder-4", now=NOW)
    # reconciliation found the operation: a late confirmation, asked without a thread hop
    assert (decision.route, decision.error_class) == (Route.RETURN_RESULT, None)
    assert found == [threading.current_thread().name]


def test_a_finder_that_answers_in_time_confirms_the_write(config: GateConfig,
                                                          store: str) -> None:
    finder = HangingFinder(hold=0.0)
    gate = Gate(config, executors={"archive": lost_answer}, finder=finder,
                sleep=lambda seconds: None, store=store)
    decision = gate.handle(call("F-5"), actor=ACTOR, request_id="r-finder-5", now=NOW)
    assert (decision.route, decision.error_class) == (Route.RETURN_RESULT, None)
    assert decision.result == {"id": "A-1", "operation_id": decision.operation_id}
