"""The write path around the store: the executor's hand-off, the operation keys, and the
executed call's log record built when first read.

The executor runs on a long-lived thread of the calling thread's own (``execute._Hand``),
so that the caller can stop waiting at the timeout; these tests hold it to what the pool
it replaced did: a timeout is an unknown outcome and a later call is not held up by a hung
executor, exceptions come back classified, the caller's context is the executor's, and a
forked child never waits for a thread it does not have.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import random
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules import Gate, Route, keeps_deadline
from callgate_rules.canonical import (
    arguments_hash,
    canonical_json,
    normalise,
    operation_id,
    operation_keys,
)
from callgate_rules.documents.compiler import load
from callgate_rules.errors import OutcomeTimeout, Unavailable
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.harness.simulator import Simulator, faults_by_tool
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.execute import ExecutionRequest, Failed, Sent, send
from callgate_rules.store import MemoryStore
from callgate_rules.taxonomy import ErrorClass
from tests.conftest import CONTRACTS, POLICIES, Calls

CONFIG = load([CONTRACTS, POLICIES])
CONTRACT = CONFIG.contracts["createFollowUp"]
REQUEST = ExecutionRequest("createFollowUp", {"ticketId": "T-1"}, "op_1",
                           datetime(2026, 11, 29, 12, tzinfo=UTC), {"id": "U-7"})


def runner(request: ExecutionRequest) -> threading.Thread:
    """An executor that answers with the thread it ran on."""
    return threading.current_thread()


def hand_of_this_thread() -> threading.Thread:
    answer = send(runner, REQUEST, CONTRACT, 5.0)
    assert isinstance(answer, Sent)
    thread: threading.Thread = answer.result
    return thread


# The hand-off ----------------------------------------------------------------------------------


def test_the_executor_answers_through_one_long_lived_thread() -> None:
    first = hand_of_this_thread()
    assert first is not threading.current_thread() and first.name == "callgate-executor"
    answers = [send(lambda request, n=n: (threading.current_thread(), n), REQUEST, CONTRACT,
                    5.0) for n in range(50)]
    assert answers == [Sent((first, n)) for n in range(50)]  # the same thread served all


def test_a_hung_executor_is_an_unknown_outcome_and_holds_up_no_later_call() -> None:
    release, ran_on = threading.Event(), []

    def hung(request: ExecutionRequest) -> Any:
        ran_on.append(threading.current_thread())
        return release.wait(10)

    started = time.monotonic()
    timed_out = send(hung, REQUEST, CONTRACT, 0.05)
    assert timed_out == Failed(ErrorClass.UNKNOWN_OUTCOME, "no answer within 0.05s after sending")
    # The next call gets a new hand at once, though the first executor still runs.
    next_hand = hand_of_this_thread()
    assert time.monotonic() - started < 5
    given_up = ran_on[0]
    assert next_hand is not given_up and given_up.is_alive()
    release.set()
    given_up.join(5)
    assert not given_up.is_alive() and next_hand.is_alive()  # the given-up hand ended


def test_an_executor_answering_as_its_caller_gives_up_leaves_no_thread_waiting() -> None:
    # Answers land on either side of the timeout; every given-up hand must end.
    ran_on: list[threading.Thread] = []

    def late(request: ExecutionRequest, delay: float) -> None:
        ran_on.append(threading.current_thread())
        time.sleep(delay)

    for delay in (0.0, 0.001, 0.002, 0.003, 0.004):
        send(lambda request, delay=delay: late(request, delay), REQUEST, CONTRACT, 0.002)
    current = hand_of_this_thread()
    for thread in set(ran_on) - {current}:
        thread.join(5)
        assert not thread.is_alive()


def test_a_calling_thread_that_ends_takes_its_hand_with_it() -> None:
    hands: list[threading.Thread] = []
    caller = threading.Thread(target=lambda: hands.append(hand_of_this_thread()))
    caller.start()
    caller.join(10)
    hands[0].join(5)
    assert not hands[0].is_alive()


def test_an_executors_exception_comes_back_classified() -> None:
    def unavailable(request: ExecutionRequest) -> Any:
        raise Unavailable("down for maintenance")

    failed = send(unavailable, REQUEST, CONTRACT, 5.0)
    assert isinstance(failed, Failed) and failed.error_class == ErrorClass.TRANSIENT
    assert "down for maintenance" in failed.detail


def test_an_interrupt_in_the_executor_is_raised_in_the_caller() -> None:
    def interrupted(request: ExecutionRequest) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        send(interrupted, REQUEST, CONTRACT, 5.0)
    assert send(lambda request: 1, REQUEST, CONTRACT, 5.0) == Sent(1)


SPAN: contextvars.ContextVar[str] = contextvars.ContextVar("span", default="none")


def test_the_executor_runs_in_the_callers_context() -> None:
    token = SPAN.set("caller's span")
    try:
        assert send(lambda request: SPAN.get(), REQUEST, CONTRACT, 5.0) == Sent(
            "caller's span")
    finally:
        SPAN.reset(token)


def test_each_calling_thread_has_its_own_hand() -> None:
    seen: dict[int, threading.Thread] = {}
    together = threading.Barrier(4)

    def call(n: int) -> None:
        seen[n] = hand_of_this_thread()
        together.wait(10)  # all four callers alive at once

    threads = [threading.Thread(target=call, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(seen) == [0, 1, 2, 3]
    assert len(set(seen.values())) == 4
    assert {hand.name for hand in seen.values()} == {"callgate-executor"}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_gets_a_hand_of_its_own() -> None:
    send(lambda request: "parent", REQUEST, CONTRACT, 5.0)  # the parent's hand exists
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports by its exit status
        answer = send(lambda request: "child", REQUEST, CONTRACT, 2.0)
        os._exit(0 if answer == Sent("child") else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# An executor that keeps its own deadline -------------------------------------------------------


def test_a_deadline_keeping_executor_runs_in_the_calling_thread() -> None:
    assert send(keeps_deadline(runner), REQUEST, CONTRACT, 5.0) == Sent(
        threading.current_thread())


def test_either_executor_runs_in_a_copy_of_the_callers_context() -> None:
    """It reads the caller's context variables; what it sets stays its own, both ways."""
    def reads_and_sets(request: ExecutionRequest) -> str:
        seen = SPAN.get()
        SPAN.set("the executor's span")
        return seen

    token = SPAN.set("caller's span")
    try:
        for executor in (reads_and_sets, keeps_deadline(reads_and_sets)):
            assert send(executor, REQUEST, CONTRACT, 5.0) == Sent("caller's span")
            assert SPAN.get() == "caller's span"
    finally:
        SPAN.reset(token)


def test_a_deadline_keeping_executors_failures_are_classified_as_any_executors() -> None:
    def unavailable(request: ExecutionRequest) -> Any:
        raise Unavailable("down for maintenance")

    def gave_up(request: ExecutionRequest) -> Any:
        raise OutcomeTimeout("no answer from the CRM by the deadline")

    def timed_out(request: ExecutionRequest) -> Any:
        raise TimeoutError

    for failing in (unavailable, gave_up, timed_out):
        assert send(keeps_deadline(failing), REQUEST, CONTRACT, 5.0) == send(
            failing, REQUEST, CONTRACT, 5.0)
    with pytest.raises(KeyboardInterrupt):
        send(keeps_deadline(interrupt), REQUEST, CONTRACT, 5.0)


def interrupt(request: ExecutionRequest) -> Any:
    raise KeyboardInterrupt


def test_a_deadline_keeping_executor_that_overruns_is_waited_for() -> None:
    """The mark is the host's word that the executor keeps the deadline: nothing else stops
    it, and its answer, however late, is the answer (no outcome is made unknown)."""
    def late(request: ExecutionRequest) -> str:
        time.sleep(0.05)
        return "answered"

    started = time.monotonic()
    assert send(keeps_deadline(late), REQUEST, CONTRACT, 0.001) == Sent("answered")
    assert time.monotonic() - started >= 0.05


def test_a_marked_method_is_its_objects_method_still_marked() -> None:
    class Crm:
        def __init__(self) -> None:
            self.sent: list[str] = []

        @keeps_deadline
        def create(self, request: ExecutionRequest) -> str:
            self.sent.append(request.operation_id)
            return threading.current_thread().name

    crm = Crm()
    assert send(crm.create, REQUEST, CONTRACT, 5.0) == Sent(threading.current_thread().name)
    assert crm.sent == ["op_1"]


def test_keeps_deadline_marks_once_and_only_callables() -> None:
    marked = keeps_deadline(runner)
    assert keeps_deadline(marked) is marked and marked.__wrapped__ is runner
    assert (marked.__name__, marked.__doc__) == ("runner", runner.__doc__)
    assert repr(marked) == f"keeps_deadline({runner!r})"
    with pytest.raises(TypeError, match="keeps_deadline takes an executor"):
        keeps_deadline("createFollowUp")  # type: ignore[arg-type]


def test_a_gate_with_deadline_keeping_executors_decides_as_with_threaded_ones(
        reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    for faults in ({}, {"createFollowUp": {"timeout_after_applying": 1,
                                           "fail_before_sending": 1}}):
        seen = []
        for gate in (make_gate(reference_world, faults),
                     make_gate(reference_world, faults, keeping_deadlines=True)):
            decisions = [gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
                         for _ in range(2)]  # executed (or reconciled), then the receipt
            seen.append([(decision.route, decision.result, decision.operation_id,
                          decision.agent_message, [str(entry)
                                                   for entry in decision.trace])
                         for decision in decisions])
        assert seen[0] == seen[1]
        assert [decision[0] for decision in seen[0]] == [Route.RETURN_RESULT,
                                                          Route.RETURN_RECEIPT]


# Operation keys --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


@given(st.text(max_size=8), st.text(max_size=8),
       st.dictionaries(st.text(max_size=5), json_values, max_size=4))
def test_operation_keys_are_the_documented_digests(request_id: str, tool: str,
                                                    arguments: dict[str, Any]) -> None:
    """The ID as ``canonical`` documents it (SHA-256 over the length-prefixed parts),
    worked out here independently: an ID must not change between versions, or a retry
    across an upgrade would look like a new write."""
    digest = hashlib.sha256()
    for part in (request_id, tool, "contract", canonical_json(arguments)):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big") + data)
    expected_hash = hashlib.sha256(canonical_json(arguments).encode("utf-8")).hexdigest()
    keys = operation_keys(request_id, tool, "contract", arguments)
    assert keys == ("op_" + digest.hexdigest()[:32], expected_hash)
    assert keys == (operation_id(request_id, tool, "contract", arguments),
                    arguments_hash(arguments))


canonical_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=6)
    | st.text(st.characters(codec="utf-8", max_codepoint=0x40), max_size=4)  # controls
    | st.sampled_from(["e\u0301", "\u00e9", "\u212b", "\ufb01", "1e5", "-0."])  # NFD, NFC
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=3) | st.tuples(children)
    | st.dictionaries(st.text(max_size=4) | st.integers(0, 20), children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=500, deadline=None)
@given(canonical_values)
def test_canonical_json_is_the_standard_librarys_text_of_the_normalised_value(
        value: Any) -> None:
    """Whichever way it is written (msgspec when the value is already its normal form, else
    the standard library after ``normalise``), the text is the one it always was, character
    for character: operation IDs are made of it."""
    expected = json.dumps(normalise(value), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)
    assert canonical_json(value) == expected


@pytest.mark.parametrize("refused", [float("nan"), [float("inf")], {"a": object()}])
def test_canonical_json_refuses_what_has_no_json_form(refused: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        canonical_json(refused)


# The executed call's log record ------------------------------------------------------------------


def make_gate(world: dict[str, Any], faults: dict[str, Any] | None = None, *,
              keeping_deadlines: bool = False) -> Gate:
    simulator = Simulator(world, faults_by_tool(faults or {}))
    clock = FakeClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    executors = simulator.executors()
    if keeping_deadlines:
        executors = {tool: keeps_deadline(executor) for tool, executor in executors.items()}
    return Gate(CONFIG, resolvers=WorldResolvers(world), executors=executors,
                finder=simulator.find, store=MemoryStore(), clock=clock, sleep=clock.sleep,
                rng=random.Random(7), secret=b"test-secret")


@pytest.mark.parametrize("faults", [
    {},
    {"createFollowUp": {"timeout_after_applying": 1, "fail_before_sending": 1}},
    {"createFollowUp": {"corrupt_result": True}},
], ids=["executed", "retried-and-reconciled", "to-review"])
def test_what_the_counters_read_is_what_the_log_says(reference_world: dict[str, Any],
                                                     dana: dict[str, Any],
                                                     faults: dict[str, Any]) -> None:
    gate = make_gate(reference_world, faults)
    decision = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    facts = dict(decision.counted())  # before the log is read: the few fields worked out
    log = decision.log
    assert facts == {key: log[key] for key in facts}
    assert decision.counted() is log  # once read, the log itself


def test_an_executed_calls_log_reads_as_it_was_when_the_call_ended(
        reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    gate = make_gate(reference_world)
    started = time.perf_counter()
    decision = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    took_ms = (time.perf_counter() - started) * 1000
    time.sleep(0.05)
    log = decision.log
    assert decision.route == Route.RETURN_RESULT
    assert (log["route"], log["receipt_state"], log["operation_id"]) == (
        "return_result", "succeeded", decision.operation_id)
    assert log["result"] == decision.result and log["request_id"] == "r1"
    assert log["elapsed_ms"] <= took_ms  # taken when the call ended, not when it was read
    assert [entry.step for entry in decision.trace][-1] == "route"
    assert decision.log is log  # built once


def test_the_operation_and_the_executors_request_are_the_ordinary_dataclasses(
        reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    """``NewOperation`` and ``ExecutionRequest`` are made without their frozen
    ``__init__`` (``store.base.made``): each equals, reprs and replaces as one made the
    ordinary way, with every field present in its order."""
    import dataclasses

    from callgate_rules.store.base import NewOperation

    received: list[ExecutionRequest] = []

    def executor(request: ExecutionRequest) -> dict[str, Any]:
        received.append(request)
        return {"id": "F-1", **request.arguments}  # what verify checks

    clock = FakeClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    gate = Gate(load([CONTRACTS, POLICIES]), executors={"createFollowUp": executor},
                resolvers=WorldResolvers(reference_world), store=MemoryStore(), clock=clock)
    decision, progress = gate.decide_steps(Calls.follow_up(), dana, clock(), request_id="r1")
    machine = gate.write_machine(progress, dana, "r1")
    assert gate.plans.router.ended(decision, progress, machine.run(),
                                   machine.operation.operation_id).route == Route.RETURN_RESULT
    for made_here, kind in ((machine.operation, NewOperation), (received[0], ExecutionRequest)):
        ordinary = kind(**{f.name: getattr(made_here, f.name)
                           for f in dataclasses.fields(kind)})  # type: ignore[arg-type]
        assert list(vars(made_here)) == [f.name for f in dataclasses.fields(kind)]
        assert made_here == ordinary and repr(made_here) == repr(ordinary)
        assert dataclasses.replace(made_here) == ordinary
        with pytest.raises(dataclasses.FrozenInstanceError):
            made_here.tool = "other"  # type: ignore[misc]
