"""Steps 5–7 through the library: operation IDs, the write state machine, reconciliation,
confirmation tokens, budgets and their limit paths, the decision log and counters."""

from __future__ import annotations

import dataclasses
import io
import json
import random
import time
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules import Gate, Route, Run, keeps_deadline
from callgate_rules.canonical import arguments_hash, canonical_json, operation_id
from callgate_rules.decision_log import DecisionLog
from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import Budgets, ErrorMapping
from callgate_rules.errors import OutcomeTimeout, Unavailable
from callgate_rules.harness.scenarios import FakeClock, load_scenarios, run_scenario
from callgate_rules.harness.simulator import Simulator, faults_by_tool
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.execute import ExecutionRequest, classify
from callgate_rules.pipeline.machine import backoff_delay
from callgate_rules.store import MemoryStore, ReceiptState, SqliteStore
from callgate_rules.taxonomy import ErrorClass
from tests.conftest import CONTRACTS, POLICIES, REPO, Calls

SCENARIOS = load_scenarios([REPO / "examples" / "scenarios"])
CONFIG = load([CONTRACTS, POLICIES])


def make_gate(world: dict[str, Any], dana: dict[str, Any] | None = None,
              faults: dict[str, Any] | None = None, store: Any = None,
              config: Any = CONFIG) -> tuple[Gate, Simulator, FakeClock]:
    simulator = Simulator(world, faults_by_tool(faults or {}))
    clock = FakeClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    gate = Gate(config, resolvers=WorldResolvers(world), executors=simulator.executors(),
                finder=simulator.find, store=store or MemoryStore(), clock=clock,
                sleep=clock.sleep, rng=random.Random(7), secret=b"test-secret")
    return gate, simulator, clock


# Operation IDs ---------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)
arguments = st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=5)


@given(arguments, st.randoms())
def test_operation_id_ignores_key_order(args: dict[str, Any], rnd: random.Random) -> None:
    items = list(args.items())
    rnd.shuffle(items)
    assert operation_id("r", "t", "t", args) == operation_id("r", "t", "t", dict(items))


@given(arguments, st.text(min_size=1, max_size=10), st.text(min_size=1, max_size=10))
def test_operation_id_differs_between_requests(args: dict[str, Any], a: str, b: str) -> None:
    same = operation_id(a, "t", "t", args) == operation_id(b, "t", "t", args)
    assert same == (a == b)


@given(st.integers(-2**52, 2**52))
def test_integral_floats_and_ints_are_one_number(n: int) -> None:
    assert canonical_json({"x": float(n)}) == canonical_json({"x": n})
    assert operation_id("r", "t", "t", {"x": float(n)}) == operation_id("r", "t", "t", {"x": n})


@given(st.text(max_size=12))
def test_unicode_forms_are_one_string(text: str) -> None:
    nfd = unicodedata.normalize("NFD", text)
    nfc = unicodedata.normalize("NFC", text)
    assert arguments_hash({nfd: nfd}) == arguments_hash({nfc: nfc})


def test_operation_id_separates_its_parts() -> None:
    # Length prefixes: moving characters between parts must change the ID.
    assert operation_id("ab", "c", "t", {}) != operation_id("a", "bc", "t", {})
    assert operation_id("r", "t", "t", {}).startswith("op_")


# Scenarios through the library ----------------------------------------------------------------


@pytest.mark.parametrize("executors", ["in-their-thread", "keeping-their-deadline"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_shipped_scenario(scenario: Any, executors: str, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    if executors == "keeping-their-deadline":
        # The simulated destination raises OutcomeTimeout itself, as an executor that keeps
        # its deadline does: called in the calling thread, every scenario ends alike.
        simulated = Simulator.executors
        monkeypatch.setattr(Simulator, "executors", lambda simulator: {
            tool: keeps_deadline(executor) for tool, executor in simulated(simulator).items()})
    store = SqliteStore(tmp_path / "receipts.sqlite3")
    try:
        result = run_scenario(scenario, CONFIG, store)
    finally:
        store.close()
    assert result.passed, "\n".join(result.failures)


def test_scenarios_cover_the_article_and_more() -> None:
    names = {s.name for s in SCENARIOS}
    for required in ("an ordinary ticket", "another customer's ticket", "a deleted ticket",
                     "an extra field", "the same proposal twice", "a failure before sending",
                     "a timeout after sending", "a late confirmation", "a state conflict",
                     "two contacts with the same name", "retries run out before sending"):
        assert required in names


# Execution details ----------------------------------------------------------------------------


def test_write_passes_operation_id_and_deadline(reference_world: dict[str, Any],
                                                dana: dict[str, Any]) -> None:
    seen: list[ExecutionRequest] = []
    gate, simulator, clock = make_gate(reference_world)
    real = simulator.executors()["createFollowUp"]

    def spy(request: ExecutionRequest) -> Any:
        seen.append(request)
        return real(request)

    gate.executors = {**gate.executors, "createFollowUp": spy}
    decision = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    assert decision.route == Route.RETURN_RESULT
    assert seen[0].operation_id == decision.operation_id
    assert seen[0].deadline == clock.now + timedelta(seconds=5)  # the contract's timeout
    assert seen[0].records["ticket"]["id"] == "T-1001"
    receipt = gate.store.get(decision.operation_id)
    assert receipt.state == ReceiptState.SUCCEEDED
    assert receipt.result == decision.result  # the destination's original answer


def test_same_call_in_another_request_is_a_new_operation(reference_world: dict[str, Any],
                                                         dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    first = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    second = gate.handle(Calls.follow_up(), actor=dana, request_id="r2")
    assert first.operation_id != second.operation_id
    assert second.route == Route.RETURN_RESULT
    assert simulator.write_count() == 2


def test_executor_timeout_is_an_unknown_outcome_then_reconciled(
        reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    real = simulator.executors()["createFollowUp"]

    def slow(request: ExecutionRequest) -> Any:
        result = real(request)  # applied at the destination...
        time.sleep(0.3)  # ...but the answer comes too late
        return result

    contract = gate.config.contracts["createFollowUp"]
    fast = dataclasses.replace(contract, timeout_seconds=0.05)
    gate.config = dataclasses.replace(
        gate.config, contracts={**gate.config.contracts, "createFollowUp": fast})
    gate.executors = {**gate.executors, "createFollowUp": slow}
    decision = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    assert decision.route == Route.RETURN_RESULT
    assert decision.log["detail"] == "late confirmation"
    assert simulator.write_count() == 1


def test_verify_failure_goes_to_review(reference_world: dict[str, Any],
                                       dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world,
                                   faults={"createFollowUp": {"corrupt_result": True}})
    decision = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    assert (decision.route, decision.error_class) == (Route.REVIEW,
                                                      ErrorClass.RECONCILE_FAILED)
    assert simulator.write_count() == 1
    assert [i.operation_id for i in gate.store.list_reviews()] == [decision.operation_id]


def test_rate_limit_waits_at_least_retry_after(reference_world: dict[str, Any],
                                               dana: dict[str, Any]) -> None:
    gate, simulator, clock = make_gate(
        reference_world, faults={"createFollowUp": {"rate_limit": 1, "retry_after": 2.5}})
    start = clock.now
    decision = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    assert decision.route == Route.RETURN_RESULT
    assert clock.now - start >= timedelta(seconds=2.5)
    assert decision.log["retries"] == 1


def test_expired_claim_of_a_dead_worker_is_reconciled_not_resent(
        reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    store = MemoryStore()
    gate, simulator, clock = make_gate(reference_world, store=store)
    crashed, _, _ = make_gate(reference_world, store=store)
    # A first worker claims, the destination applies, the worker dies before recording.
    decision = crashed.check(Calls.follow_up(), actor=dana)
    assert decision.route == Route.EXECUTE
    op = operation_id("r1", "createFollowUp", "createFollowUp", decision.arguments)
    from callgate_rules.store import NewOperation

    store.claim(NewOperation(op, "r1", "createFollowUp", "1.0.0",
                             arguments_hash(decision.arguments), decision.arguments, dana),
                worker="dead", lease=timedelta(seconds=60), now=clock.now)
    simulator.executors()["createFollowUp"](ExecutionRequest(
        "createFollowUp", decision.arguments, op, clock.now, dana))
    clock.now += timedelta(seconds=61)  # the dead worker's lease expires
    again = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    assert again.route == Route.RETURN_RESULT
    assert again.log["detail"] == "late confirmation"
    assert simulator.write_count() == 1


def test_busy_claim_waits_then_takes_the_limit_path(reference_world: dict[str, Any],
                                                    dana: dict[str, Any]) -> None:
    store = MemoryStore()
    gate, simulator, clock = make_gate(reference_world, store=store)
    decision = gate.check(Calls.follow_up(), actor=dana)
    from callgate_rules.store import NewOperation

    op = operation_id("r1", "createFollowUp", "createFollowUp", decision.arguments)
    store.claim(NewOperation(op, "r1", "createFollowUp", "1.0.0",
                             arguments_hash(decision.arguments), decision.arguments, dana),
                worker="other", lease=timedelta(hours=1), now=clock.now)
    busy = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    assert busy.error_class == ErrorClass.BUDGET_EXHAUSTED
    assert simulator.write_count() == 0


# Exception classification ---------------------------------------------------------------------


class HttpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class ReadTimeout(TimeoutError):
    pass


def test_classify_uses_the_most_specific_row() -> None:
    table = (
        ErrorMapping("Exception", None, None, ErrorClass.PERMANENT),
        ErrorMapping("HttpError", None, None, ErrorClass.PERMANENT),
        ErrorMapping("HttpError", "status", 429, ErrorClass.TRANSIENT),
        ErrorMapping("HttpError", "status", 503, ErrorClass.TRANSIENT),
    )
    assert classify(HttpError(429), table) == ErrorClass.TRANSIENT
    assert classify(HttpError(400), table) == ErrorClass.PERMANENT
    assert classify(ValueError("x"), table) == ErrorClass.PERMANENT  # via Exception


def test_classify_defaults_keep_the_sending_line() -> None:
    assert classify(Unavailable(), ()) == ErrorClass.TRANSIENT
    assert classify(OutcomeTimeout(), ()) == ErrorClass.UNKNOWN_OUTCOME
    assert classify(ReadTimeout(), ()) == ErrorClass.UNKNOWN_OUTCOME
    # An exception nobody declared may have happened after sending: never retried blind.
    assert classify(KeyError("x"), ()) == ErrorClass.UNKNOWN_OUTCOME


# Backoff ---------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(st.integers(0, 12), st.floats(0.001, 2), st.floats(0.01, 30), st.floats(1, 4),
       st.one_of(st.none(), st.floats(0, 100)), st.integers(0, 2**32))
def test_backoff_is_full_jitter_within_bounds(attempt: int, base: float, maximum: float,
                                              multiplier: float, retry_after: float | None,
                                              seed: int) -> None:
    budgets = Budgets(backoff_base_seconds=base, backoff_max_seconds=maximum,
                      backoff_multiplier=multiplier)
    delay = backoff_delay(attempt, budgets, random.Random(seed), retry_after)
    ceiling = min(maximum, base * multiplier ** attempt)
    assert 0 <= delay <= max(ceiling, retry_after or 0) + 1e-9
    if retry_after is not None:
        assert delay >= retry_after - 1e-9  # never earlier than the destination asked


# Confirmation tokens ---------------------------------------------------------------------------

EMAIL = Calls.plain("sendEmail", {"to": "anna.petrova@northwind.example", "subject": "Hi",
                                  "body": "Hello"})


def draft(gate: Gate, dana: dict[str, Any]) -> Any:
    decision = gate.handle(EMAIL, actor=dana, request_id="r1")
    assert decision.route == Route.AWAIT_CONFIRMATION
    assert decision.confirmation_token
    return decision


def test_confirmation_runs_once_and_records_who(reference_world: dict[str, Any],
                                                dana: dict[str, Any]) -> None:
    gate, simulator, clock = make_gate(reference_world)
    decision = draft(gate, dana)
    assert simulator.write_count() == 0
    done = gate.confirm(decision.confirmation_token, actor=dana, confirmed_by="dana")
    assert done.route == Route.RETURN_RESULT
    receipt = gate.store.get(decision.operation_id)
    assert receipt.confirmed_by == "dana" and receipt.confirmed_at == clock.now
    # The same token again: the model hears it ran, with the earlier result; no new write.
    replay = gate.confirm(decision.confirmation_token, actor=dana, confirmed_by="dana")
    assert (replay.route, replay.error_class) == (Route.RETURN_RECEIPT, ErrorClass.DUPLICATE)
    assert "already confirmed and done" in replay.agent_message
    assert replay.result == done.result and "nothing was executed" not in replay.agent_message
    assert simulator.write_count() == 1


@pytest.mark.parametrize("tamper", [
    lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"),  # signature changed
    lambda t: "x" + t,  # payload changed
    lambda t: "garbage",  # not a token at all
])
def test_tampered_token_is_refused(tamper: Callable[[str], str],
                                   reference_world: dict[str, Any],
                                   dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    decision = draft(gate, dana)
    refused = gate.confirm(tamper(decision.confirmation_token), actor=dana, confirmed_by="d")
    assert refused.route == Route.REFUSE
    assert simulator.write_count() == 0


def test_token_is_bound_to_the_actor(reference_world: dict[str, Any],
                                     dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    decision = draft(gate, dana)
    other = {**dana, "id": "U-8"}
    refused = gate.confirm(decision.confirmation_token, actor=other, confirmed_by="U-8")
    assert refused.route == Route.REFUSE and simulator.write_count() == 0


def test_expired_token_is_refused(reference_world: dict[str, Any],
                                  dana: dict[str, Any]) -> None:
    gate, simulator, clock = make_gate(reference_world)
    decision = draft(gate, dana)
    clock.now += timedelta(minutes=16)  # sendEmail drafts expire after 15 minutes
    refused = gate.confirm(decision.confirmation_token, actor=dana, confirmed_by="dana")
    assert refused.route == Route.REFUSE and "expired" in refused.user_message
    assert simulator.write_count() == 0


def test_rights_are_checked_again_on_confirmation(reference_world: dict[str, Any],
                                                  dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    decision = draft(gate, dana)
    suspended = {**dana, "suspended": True}
    refused = gate.confirm(decision.confirmation_token, actor=suspended, confirmed_by="dana")
    assert refused.error_class == ErrorClass.FORBIDDEN
    assert simulator.write_count() == 0


# Run budgets and limit paths -------------------------------------------------------------------


def routing_with(tmp_path: Path, extra: str) -> Any:
    from tests.conftest import Reference

    base = (POLICIES / "routing.yaml").read_text()
    contracts, policies = Reference.copy(tmp_path, base.replace("  on_limit:\n    path: hand_over",
                                                                extra))
    return load([contracts, policies])


def test_failures_per_run_limit(reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    run = Run(started_at=gate.clock())
    for index in range(4):  # the reference routing table allows 4 failures per run
        decision = gate.handle(Calls.follow_up(ticketId="T-9999"), actor=dana,
                               request_id=f"r{index}", run=run)
        assert decision.error_class == ErrorClass.NOT_FOUND
    limited = gate.handle(Calls.follow_up(), actor=dana, request_id="r9", run=run)
    assert (limited.route, limited.error_class) == (Route.REVIEW, ErrorClass.BUDGET_EXHAUSTED)
    assert "failed calls" in limited.log["detail"]
    assert simulator.write_count() == 0


def test_run_deadline_limit(reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    gate, simulator, clock = make_gate(reference_world)
    run = Run(started_at=gate.clock())
    clock.now += timedelta(seconds=121)
    limited = gate.handle(Calls.follow_up(), actor=dana, request_id="r1", run=run)
    assert limited.error_class == ErrorClass.BUDGET_EXHAUSTED
    assert "deadline" in limited.log["detail"] and simulator.write_count() == 0


@pytest.mark.parametrize("path,route", [("refuse", Route.REFUSE),
                                        ("partial_result", Route.REFUSE),
                                        ("hand_over", Route.REVIEW)])
def test_limit_path_is_declared(path: str, route: Route, tmp_path: Path,
                                reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    config = routing_with(tmp_path, f"  on_limit:\n    path: {path}")
    gate, simulator, _ = make_gate(reference_world, config=config,
                                   faults={"createFollowUp": {"fail_before_sending": 9}})
    decision = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    assert (decision.route, decision.limit_path) == (route, path)
    assert decision.log["retries"] == 3 and simulator.write_count() == 0
    # a hand-over names its review where every ending does (the service and gateway read it)
    assert decision.extra.get("review_id") == decision.log.get("review_id")
    assert (decision.extra.get("review_id") is not None) == (path == "hand_over")
    assert bool(gate.store.list_reviews()) == (route == Route.REVIEW)


def test_bad_arguments_and_denials_never_loop(reference_world: dict[str, Any],
                                              dana: dict[str, Any]) -> None:
    gate, simulator, clock = make_gate(reference_world)
    start = clock.now
    for call in (Calls.follow_up(ticketId="T-2001"), Calls.follow_up(extra=1)):
        decision = gate.handle(call, actor=dana, request_id="r1")
        assert decision.route == Route.REFUSE
    assert clock.now == start  # nothing slept, nothing retried
    assert simulator.calls == []


# Decision log and counters ---------------------------------------------------------------------


def test_decision_log_is_json_lines_with_masking(reference_world: dict[str, Any],
                                                 dana: dict[str, Any]) -> None:
    stream = io.StringIO()
    gate, _, _ = make_gate(reference_world)
    gate.decision_log = DecisionLog(stream)
    gate.handle(EMAIL, actor=dana, request_id="r1")
    gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["route"] for line in lines] == ["await_confirmation", "return_result"]
    assert lines[0]["arguments"]["body"] == "***"  # sendEmail masks the body
    assert lines[1]["operation_id"].startswith("op_")
    assert lines[1]["versions"]["ToolContract/createFollowUp"] == "1.0.0"
    assert lines[1]["result"]["ticketId"] == "T-1001"
    assert "Hello" not in stream.getvalue()


def test_decision_log_retention(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    now = datetime(2026, 11, 29, tzinfo=UTC)
    old = {"ts": (now - timedelta(days=40)).isoformat(), "route": "refuse"}
    new = {"ts": (now - timedelta(days=1)).isoformat(), "route": "execute"}
    path.write_text(json.dumps(old) + "\n" + json.dumps(new) + "\n")
    log = DecisionLog(path, retention=timedelta(days=30), now=now)
    log.close()
    assert [json.loads(x)["route"] for x in path.read_text().splitlines()] == ["execute"]


def test_counters_count_each_category(reference_world: dict[str, Any],
                                      dana: dict[str, Any]) -> None:
    gate, _, _ = make_gate(reference_world, faults={
        "createFollowUp": {"timeout_after_applying": 1, "fail_before_sending": 1}})
    gate.handle(Calls.follow_up(), actor=dana, request_id="r1")  # retry, unknown, reconcile
    gate.handle(Calls.follow_up(), actor=dana, request_id="r1")  # duplicate
    gate.handle(Calls.follow_up(ticketId="T-2001"), actor=dana, request_id="r2")  # denial
    gate.handle(Calls.follow_up(extra=1), actor=dana, request_id="r3")  # argument error
    counters = gate.counters
    assert counters["decisions"] == 4
    assert counters["retries"] >= 1
    assert counters["unknown_outcomes"] == 1
    assert counters["reconciliations"] == 1
    assert counters["suppressed_duplicates"] == 1
    assert counters["denials"] == 1
    assert counters["argument_errors"] == 1


def test_call_deadline_limit(reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    # The destination asks to come back in 40 s; the call deadline is 30 s: the limit path,
    # not a wait past the deadline.
    gate, simulator, clock = make_gate(
        reference_world, faults={"createFollowUp": {"rate_limit": 5, "retry_after": 40}})
    start = clock.now
    decision = gate.handle(Calls.follow_up(), actor=dana, request_id="r1")
    assert (decision.route, decision.error_class) == (Route.REVIEW, ErrorClass.BUDGET_EXHAUSTED)
    assert "deadline" in decision.log["detail"]
    assert clock.now == start  # it did not sleep 40 s into a 30 s deadline
    assert simulator.write_count() == 0
