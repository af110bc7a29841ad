"""``approval_covers``: a person's approval of a value covers later calls of the same run,
by the same actor, with exactly the same value at every declared path — and nothing else.

Through ``Gate.handle`` and ``Gate.confirm`` on the memory store, on one SQLite file shared by
two gates, and on PostgreSQL shared by two gates (skipped without
``CALLGATE_TEST_POSTGRES_URL``); a host that keeps the history itself; the hosted flow's
token and review-page approvals; the compiler's and lint's checks of the declaration; a
hypothesis property over random sequences of calls and approvals.

The documents are ``tests/data/approval_covers``: ``pay`` asks about an account not on file
(``approval_covers: [args.recipient]``) and about an amount over 100 (no declaration);
``transfer`` always asks (``confirmation.required`` covering ``args.recipient`` and
``args.memo``); ``notify`` asks about an account not on file with no declaration.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.authoring.lint import lint
from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.errors import ConfigError
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.pipeline.approvals import (
    APPROVAL_ROUTE,
    approval_entries_of,
    question_key,
)
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.history import entry_of, variable
from callgate_rules.pipeline.hosted import HostedWrites
from callgate_rules.store import MemoryStore, SqliteStore
from callgate_rules.store.base import ReceiptStore
from callgate_rules.store.history import HistoryEntry
from callgate_rules.taxonomy import ErrorClass, Route
from tests.conftest import Destination

DOCUMENTS = Path(__file__).resolve().parents[1] / "data" / "approval_covers"
HOLDER = {"id": "U-1", "role": "holder"}
OTHER_HOLDER = {"id": "U-2", "role": "holder"}
T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
NEW = "DE-NEW-PAYEE"


@pytest.fixture(scope="module")
def config() -> GateConfig:
    return load([DOCUMENTS])


class Bank(Destination):
    """The destination: every write it was asked to make, in order."""

    def __init__(self) -> None:
        super().__init__("pay", "transfer", "notify")


def gate_on(config: GateConfig, store: ReceiptStore, clock: FakeClock,
            bank: Bank | None = None) -> Gate:
    return Gate(config, executors=(bank or Bank()).executors(), store=store, clock=clock,
                sleep=clock.sleep, secret=b"approval-covers-test-secret")


def pay(recipient: str = NEW, amount: float = 50, **more: Any) -> dict[str, Any]:
    return {"name": "pay", "arguments": {"recipient": recipient, "amount": amount, **more}}


_requests = iter(range(10**9))


def propose(gate: Gate, call: dict[str, Any], run: Run, actor: dict[str, Any] = HOLDER,
            **more: Any) -> Decision:
    return gate.handle(call, actor=actor, request_id=f"req-{next(_requests)}", run=run, **more)


def approved(gate: Gate, call: dict[str, Any], run: Run, actor: dict[str, Any] = HOLDER,
             by: str = "alice") -> Decision:
    """The call held for a person, then confirmed by ``by``: the confirmed decision."""
    held = propose(gate, call, run, actor)
    assert held.route == Route.AWAIT_CONFIRMATION and held.confirmation_token, held.trace
    confirmed = gate.confirm(held.confirmation_token, actor=actor, confirmed_by=by)
    assert confirmed.route == Route.RETURN_RESULT, confirmed.trace
    return confirmed


def covering(decision: Decision) -> list[str]:
    return [entry.detail for entry in decision.trace if entry.result == "covered"]


@pytest.fixture()
def memory_gate(config: GateConfig) -> tuple[Gate, MemoryStore, FakeClock, Bank]:
    clock, store, bank = FakeClock(T0), MemoryStore(), Bank()
    return gate_on(config, store, clock, bank), store, clock, bank


# The later call with the same value, in the same run, by the same actor ------------------------


def test_the_same_payee_approved_once_is_not_asked_again_in_the_run(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, store, _, bank = memory_gate
    run = Run(started_at=T0)
    first = approved(gate, pay(amount=50, memo="instalment 1"), run)
    second = propose(gate, pay(amount=60.0, memo="instalment 2"), run)
    assert second.route == Route.RETURN_RESULT
    assert [tool for tool, _ in bank.writes] == ["pay", "pay"]
    # the trace and the log say which approval covered it
    assert covering(second) == [f"approval of {first.operation_id} by alice at "
                                f"{T0.isoformat()}"]
    assert second.log["covered_by"] == [{"question": "pay/payee-on-file",
                                         "operation_id": first.operation_id,
                                         "approved_by": "alice", "at": T0.isoformat()}]
    # the approval is an entry of the run's history, kept by the store; rules never see it
    entries = store.run_history(run.run_id, since=T0)
    assert [entry.route for entry in entries] == ["return_result", APPROVAL_ROUTE,
                                                  "return_result"]
    assert NEW not in str(entries[1].arguments)  # a key, not the value
    assert [element["route"] for element in variable(entries)] == ["return_result"] * 2


def test_950_and_950_point_0_are_one_value(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, *_ = memory_gate
    run = Run(started_at=T0)
    approved(gate, {"name": "transfer", "arguments": {"recipient": "DE-1", "amount": 950,
                                                      "memo": "rent"}}, run)
    later = propose(gate, {"name": "transfer", "arguments": {"recipient": "DE-1",
                                                             "amount": 950.0, "memo": "rent"}},
                    run)
    assert later.route == Route.RETURN_RESULT and covering(later)


# ... and everything else still asks -------------------------------------------------------------


def test_another_value_is_asked_about(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, *_ = memory_gate
    run = Run(started_at=T0)
    approved(gate, pay(), run)
    for other in ("DE-OTHER-PAYEE", NEW.lower(), NEW + " ", "DE-NEW-PAYEE\u200b"):
        decision = propose(gate, pay(other), run)
        assert (decision.route, decision.rule) == (Route.AWAIT_CONFIRMATION,
                                                   "pay/payee-on-file"), other


def test_another_run_is_asked(memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, *_ = memory_gate
    approved(gate, pay(), Run(started_at=T0))
    decision = propose(gate, pay(), Run(started_at=T0))
    assert (decision.route, decision.rule) == (Route.AWAIT_CONFIRMATION, "pay/payee-on-file")


def test_another_actor_is_asked(memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, *_ = memory_gate
    run = Run(started_at=T0)
    approved(gate, pay(), run)
    decision = propose(gate, pay(), run, actor=OTHER_HOLDER)
    assert (decision.route, decision.rule) == (Route.AWAIT_CONFIRMATION, "pay/payee-on-file")


def test_a_confirmation_never_given_covers_nothing(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, store, _, bank = memory_gate
    run = Run(started_at=T0)
    held = propose(gate, pay(amount=50, memo="one"), run)
    assert held.route == Route.AWAIT_CONFIRMATION  # the person says no: the token is unused
    again = propose(gate, pay(amount=50, memo="two"), run)
    assert (again.route, again.rule) == (Route.AWAIT_CONFIRMATION, "pay/payee-on-file")
    assert bank.writes == []
    assert APPROVAL_ROUTE not in {e.route for e in store.run_history(run.run_id, since=T0)}


def test_an_expired_confirmation_covers_nothing(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, store, clock, bank = memory_gate
    run = Run(started_at=T0)
    held = propose(gate, pay(), run)
    clock.now += timedelta(days=2)  # past the confirmation's expiry
    late = gate.confirm(held.confirmation_token or "", actor=HOLDER, confirmed_by="alice")
    assert late.route == Route.REFUSE and bank.writes == []
    later_run = Run(started_at=clock.now, run_id=run.run_id)
    again = propose(gate, pay(memo="again"), later_run)
    assert (again.route, again.rule) == (Route.AWAIT_CONFIRMATION, "pay/payee-on-file")
    assert APPROVAL_ROUTE not in {e.route for e in store.run_history(run.run_id, since=T0)}


def test_a_confirmation_for_another_actor_covers_nothing(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, store, _, _ = memory_gate
    run = Run(started_at=T0)
    held = propose(gate, pay(), run)
    refused = gate.confirm(held.confirmation_token or "", actor=OTHER_HOLDER,
                           confirmed_by="mallory")
    assert refused.route == Route.REFUSE
    assert propose(gate, pay(memo="x"), run).route == Route.AWAIT_CONFIRMATION
    assert APPROVAL_ROUTE not in {e.route for e in store.run_history(run.run_id, since=T0)}


def test_a_rule_without_the_declaration_asks_every_time(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    gate, *_ = memory_gate
    run = Run(started_at=T0)
    note = {"name": "notify", "arguments": {"recipient": NEW, "text": "hello"}}
    approved(gate, note, run)
    again = propose(gate, {"name": "notify", "arguments": {"recipient": NEW, "text": "bye"}},
                    run)
    assert (again.route, again.rule) == (Route.AWAIT_CONFIRMATION, "notify/recipient-on-file")
    # nor does pay's approval of the payee cover notify's question about it
    approved(gate, pay(), run)
    third = propose(gate, {"name": "notify", "arguments": {"recipient": NEW, "text": "3"}},
                    run)
    assert third.route == Route.AWAIT_CONFIRMATION and not covering(third)


def test_only_the_covered_question_is_skipped(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    """The amount over 100 still asks (its rule declares nothing); a blocked account is
    still refused; a frozen session is still denied: rights and every other rule hold."""
    gate, *_ = memory_gate
    run = Run(started_at=T0)
    approved(gate, pay(amount=500), run)  # both questions answered at once
    large = propose(gate, pay(amount=500, memo="again"), run)
    assert (large.route, large.rule) == (Route.AWAIT_CONFIRMATION, "pay/small-amount")
    assert covering(large)  # the payee's question was covered, the amount's asked
    frozen = propose(gate, pay(amount=10), run, session={"frozen": True})
    assert frozen.error_class == ErrorClass.FORBIDDEN and not covering(frozen)


def test_a_write_held_twice_and_confirmed_in_turn_runs_both(
        memory_gate: tuple[Gate, MemoryStore, FakeClock, Bank]) -> None:
    """The second held write is covered by the first's approval when it is confirmed: it
    still runs (its confirmation is not refused as "no longer passes its checks")."""
    gate, _, _, bank = memory_gate
    run = Run(started_at=T0)
    first = propose(gate, pay(memo="a"), run)
    second = propose(gate, pay(memo="b"), run)
    for held in (first, second):
        done = gate.confirm(held.confirmation_token or "", actor=HOLDER, confirmed_by="alice")
        assert done.route == Route.RETURN_RESULT
    assert len(bank.writes) == 2


def test_a_host_that_keeps_the_history_records_the_approval_itself(config: GateConfig) -> None:
    gate = Gate(config, store=MemoryStore(), secret=b"s")
    history: list[HistoryEntry] = []
    held = gate.check(pay(), actor=HOLDER, now=T0, history=history)
    assert held.route == Route.AWAIT_CONFIRMATION
    assert held.log["approval_questions"][0]["question"] == "pay/payee-on-file"
    again = gate.check(pay(memo="2"), actor=HOLDER, now=T0, history=history)
    assert again.route == Route.AWAIT_CONFIRMATION  # nothing recorded: nothing covers
    history.append(entry_of(held, config.contracts["pay"], "run", "r1", T0))
    history += approval_entries_of(held, run_id="run", request_id="r1", approved_by="alice",
                                   at=T0)
    later = gate.check(pay(memo="3"), actor=HOLDER, now=T0, history=history)
    assert later.route == Route.EXECUTE and covering(later)


def test_the_key_binds_question_actor_and_every_value() -> None:
    key = question_key("pay/payee-on-file", HOLDER, {"recipient": "A", "memo": "m"},
                       [("recipient",), ("memo",)])
    assert key == question_key("pay/payee-on-file", dict(HOLDER),
                               {"memo": "m", "recipient": "A", "amount": 5},
                               [("recipient",), ("memo",)])
    different = [
        question_key("pay/other", HOLDER, {"recipient": "A", "memo": "m"},
                     [("recipient",), ("memo",)]),
        question_key("pay/payee-on-file", OTHER_HOLDER, {"recipient": "A", "memo": "m"},
                     [("recipient",), ("memo",)]),
        question_key("pay/payee-on-file", HOLDER, {"recipient": "A"},
                     [("recipient",), ("memo",)]),  # absent is not ""
        question_key("pay/payee-on-file", HOLDER, {"recipient": "A", "memo": ""},
                     [("recipient",), ("memo",)]),
        question_key("pay/payee-on-file", HOLDER, {"recipient": "A", "memo": None},
                     [("recipient",), ("memo",)]),
    ]
    assert key not in different and len(set(different)) == len(different)


# The hosted flow: a token confirmed, a write approved or declined on the review page -----------


def test_hosted_approvals_cover_and_declines_do_not(config: GateConfig) -> None:
    clock = FakeClock(T0)
    hosted = HostedWrites(config, store=MemoryStore(), clock=clock, sleep=clock.sleep,
                          secret=b"hosted-secret")
    run_id = "hosted-run"

    def decide(memo: str) -> Decision:
        return hosted.decide(pay(memo=memo), actor=HOLDER, request_id=f"h-{memo}",
                             run_id=run_id)

    declined = decide("declined")
    assert declined.route == Route.AWAIT_CONFIRMATION and declined.operation_id
    hosted.decline(declined.operation_id, by="bob", note="not this payee")
    assert decide("after the decline").route == Route.AWAIT_CONFIRMATION
    # approved on the review page, then claimed by the host: the approval is recorded
    on_page = decide("on the page")
    assert on_page.operation_id
    hosted.approve(on_page.operation_id, approver="carol")
    claimed = hosted.claim_operation(on_page.operation_id, actor=HOLDER)
    assert claimed.action == "execute", claimed
    later = decide("later")
    assert later.route == Route.EXECUTE and covering(later)
    assert "by carol" in covering(later)[0]


# Two gates on one store -------------------------------------------------------------------------


def two_gates_share_the_approval(config: GateConfig, first: ReceiptStore,
                                 second: ReceiptStore) -> None:
    clock, bank = FakeClock(T0), Bank()
    one, other = gate_on(config, first, clock, bank), gate_on(config, second, clock, bank)
    run_id = uuid.uuid4().hex
    held = propose(one, pay(memo="first"), Run(started_at=T0, run_id=run_id))
    assert held.route == Route.AWAIT_CONFIRMATION
    clock.now += timedelta(seconds=1)
    # the other instance takes the person's confirmation
    confirmed = other.confirm(held.confirmation_token or "", actor=HOLDER, confirmed_by="dana")
    assert confirmed.route == Route.RETURN_RESULT
    clock.now += timedelta(seconds=1)
    later = propose(one, pay(memo="second"), Run(started_at=T0, run_id=run_id))
    assert later.route == Route.RETURN_RESULT
    assert covering(later) == [f"approval of {held.operation_id} by dana at "
                               f"{(T0 + timedelta(seconds=1)).isoformat()}"]
    # and only there: another run on the same store still asks
    elsewhere = propose(other, pay(memo="third"), Run(started_at=T0))
    assert elsewhere.route == Route.AWAIT_CONFIRMATION
    assert len(bank.writes) == 2


def test_two_gates_on_one_sqlite_file_share_the_approval(config: GateConfig,
                                                         tmp_path: Path) -> None:
    first, second = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    try:
        two_gates_share_the_approval(config, first, second)
    finally:
        first.close()
        second.close()


POSTGRES_URL = os.environ.get("CALLGATE_TEST_POSTGRES_URL")


@pytest.fixture()
def postgres_stores() -> Iterator[tuple[ReceiptStore, ReceiptStore]]:
    if not POSTGRES_URL:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set; the PostgreSQL approval test "
                    "needs a server")
    import psycopg

    from callgate_rules.store import PostgresStore

    schema = f"callgate_approvals_{uuid.uuid4().hex[:10]}"
    first = PostgresStore(POSTGRES_URL, schema=schema)
    second = PostgresStore(POSTGRES_URL, schema=schema)
    yield first, second
    first.close()
    second.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.integration
def test_two_gates_on_one_postgres_database_share_the_approval(
        config: GateConfig, postgres_stores: tuple[ReceiptStore, ReceiptStore]) -> None:
    two_gates_share_the_approval(config, *postgres_stores)


# The declaration: schema, compiler, lint -------------------------------------------------------


def written(tmp_path: Path, old: str, new: str, document: str = "pay.yaml") -> Path:
    for source in DOCUMENTS.glob("*.yaml"):
        text = source.read_text(encoding="utf-8")
        if source.name == document:
            assert old in text
            text = text.replace(old, new)
        (tmp_path / source.name).write_text(text, encoding="utf-8")
    return tmp_path / document


@pytest.mark.parametrize(("declared", "wrong"), [
    ("[args.payee]", "args.payee"),
    ("[recipient]", "recipient"),  # an argument, but not written as a path of args
    ("[args.recipient, args.memo.first]", "args.memo.first"),
])
def test_a_path_that_names_no_argument_is_a_lint_error(tmp_path: Path, declared: str,
                                                       wrong: str) -> None:
    """At the file, line and column of the path, saying which paths there are."""
    path = written(tmp_path, "approval_covers: [args.recipient]",
                   f"approval_covers: {declared}")
    lines = path.read_text().splitlines()
    line = lines.index(f"      approval_covers: {declared}")
    errors = [f for f in lint([tmp_path]) if f.severity == "error"]
    assert [(f.location.path, f.location.line, f.location.column, f.code) for f in errors] \
        == [(str(path), line + 1, lines[line].index(wrong) + 1, "approval-covers-path")]
    assert f"{wrong!r} names no argument of this tool" in errors[0].message
    assert "args.recipient, args.amount, args.memo" in errors[0].message
    assert str(errors[0]).startswith(f"{path}:{line + 1}:{lines[line].index(wrong) + 1}: "
                                     "error approval-covers-path")
    with pytest.raises(ConfigError):
        load([tmp_path])  # the gate refuses to load it too


def test_a_masked_path_is_refused(tmp_path: Path) -> None:
    written(tmp_path, "  confirmation:\n", "  mask: [memo]\n  confirmation:\n")
    path = written(tmp_path, "approval_covers: [args.recipient]",
                   "approval_covers: [args.memo]")
    (tmp_path / "pay.yaml").write_text(path.read_text().replace(
        "  confirmation:\n", "  mask: [memo]\n  confirmation:\n", 1))
    errors = [f for f in lint([tmp_path]) if f.severity == "error"]
    assert [f.code for f in errors] == ["approval-covers-path"]
    assert "masked" in errors[0].message


def test_only_a_question_for_a_person_declares_it(tmp_path: Path) -> None:
    written(tmp_path, '      message: "{args.recipient} is blocked."\n',
            '      message: "{args.recipient} is blocked."\n'
            '      approval_covers: [args.recipient]\n')
    (tmp_path / "notify.yaml").write_text((tmp_path / "notify.yaml").read_text().replace(
        "  examples:", "  confirmation:\n    approval_covers: [args.recipient]\n  examples:"))
    errors = sorted((f.location.path.rsplit("/", 1)[-1], f.code, f.message)
                    for f in lint([tmp_path]) if f.severity == "error")
    assert [(name, code) for name, code, _ in errors] == [
        ("notify.yaml", "approval-covers"), ("pay.yaml", "approval-covers")]
    assert "required is not true" in errors[0][2]
    assert "error_class is not confirmation_required" in errors[1][2]


@pytest.mark.parametrize("declared", ["[]", "args.recipient", "[1]", '[""]'])
def test_the_schema_wants_a_list_of_paths(tmp_path: Path, declared: str) -> None:
    written(tmp_path, "approval_covers: [args.recipient]", f"approval_covers: {declared}")
    errors = [f for f in lint([tmp_path]) if f.severity == "error"]
    assert [f.code for f in errors] == ["schema"]
    assert "approval_covers" in errors[0].message


# The property --------------------------------------------------------------------------------


@dataclass
class Approved:
    """What the model of the property remembers: (run, actor id, recipient, memo)."""

    values: set[tuple[str, str, str, str | None]] = field(default_factory=set)


STEP = st.tuples(
    st.sampled_from(["run-a", "run-b"]),
    st.sampled_from(["U-1", "U-2"]),
    st.sampled_from(["DE-1", "DE-2", "de-1"]),
    st.sampled_from([None, "rent", "Rent"]),
    st.sampled_from([10, 10.0, 25]),
    st.sampled_from(["approve", "decline", "expire"]),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=9))  # within calls_per_tool_per_run
def test_a_call_runs_unasked_only_after_an_approval_of_exactly_its_values(
        config: GateConfig, steps: list[tuple[str, str, str, str | None, float, str]]) -> None:
    """For random sequences of transfers (every one asks unless covered) and a person's
    answers (approve, decline, or confirm too late), a transfer runs unasked if and only if
    an earlier transfer of the same run, by the same actor, with exactly the same recipient
    and memo (absent equal only to absent) was approved."""
    clock, bank = FakeClock(T0), Bank()
    gate = gate_on(config, MemoryStore(), clock, bank)
    runs = {name: Run(started_at=T0, run_id=f"{name}-{uuid.uuid4().hex}")
            for name in ("run-a", "run-b")}
    model = Approved()
    for run_name, actor_id, recipient, memo, amount, answer in steps:
        arguments: dict[str, Any] = {"recipient": recipient, "amount": amount}
        if memo is not None:
            arguments["memo"] = memo
        actor = {"id": actor_id, "role": "holder"}
        decision = propose(gate, {"name": "transfer", "arguments": arguments},
                           runs[run_name], actor)
        expected = (run_name, actor_id, recipient, memo) in model.values
        assert (decision.route == Route.RETURN_RESULT) == expected, (steps, decision.trace)
        assert bool(covering(decision)) == expected
        if expected:
            continue
        assert decision.route == Route.AWAIT_CONFIRMATION
        if answer == "decline":
            continue
        if answer == "expire":
            clock.now += timedelta(days=2)
        confirmed = gate.confirm(decision.confirmation_token or "", actor=actor,
                                 confirmed_by="person")
        if answer == "approve":
            assert confirmed.route == Route.RETURN_RESULT
            model.values.add((run_name, actor_id, recipient, memo))
        else:
            assert confirmed.route == Route.REFUSE
            clock.now = T0  # back inside the runs' history retention


# The control-set evaluation counts the questions it asks ----------------------------------------


def test_the_control_set_evaluation_reports_confirmations_per_100() -> None:
    from callgate_rules.harness.control_set import load_control_set
    from callgate_rules.harness.evaluation import evaluate, report_lines

    repo = Path(__file__).resolve().parents[2]
    config = load([repo / "contracts", repo / "policies"])
    evaluation = evaluate(load_control_set(repo / "examples" / "control_set.yaml"), config)
    expected_to_run = [r for r in evaluation.results if r.request.expect.expects_execution]
    asked = [r for r in expected_to_run
             if r.decision is not None and r.decision.route == Route.AWAIT_CONFIRMATION]
    assert asked  # the shipped set has a write a person confirms
    figures = evaluation.as_dict()["totals"]["confirmations"]
    assert figures == {"asked": len(asked), "calls_expected_to_run": len(expected_to_run),
                       "per_100": round(100 * len(asked) / len(expected_to_run), 1)}
    assert f"confirmations      {len(asked)} of {len(expected_to_run)} calls expected to run " \
           f"({100 * len(asked) / len(expected_to_run):.1f} per 100)" in report_lines(evaluation)


# AgentDojo: fewer questions, and what runs unasked no wider --------------------------------------


@pytest.mark.integration  # runs the evaluation as its command, in a process
def test_agentdojo_slack_asks_fewer_in_one_session_and_runs_no_more_injections() -> None:
    """``benchmarks/agentdojo_evaluation.py benchmarks/agentdojo/slack --one-session``, whose
    configuration declares ``approval_covers`` on its recipient, user and channel questions:
    every question a covering approval saves is a legitimate write that ran unasked, and no
    attack figure differs with or without covering."""
    from tests.harness.agentdojo_support import SUITES, count, measured

    figures = measured(SUITES / "slack", "--one-session")
    writes = int(figures["one session, legitimate writes"])
    covered, _ = count(figures["one session, run unasked because an earlier approval "
                               "covered them"])
    asked = int(figures["one session, confirmations asked"])
    assert covered > 0
    with_covering = float(figures["one session, confirmations per 100 legitimate writes"])
    without = float(figures["one session, confirmations per 100 legitimate writes, no "
                            "approval covering"])
    assert with_covering == round(100 * asked / writes, 1)
    assert without == round(100 * (asked + covered) / writes, 1)
    for prefix in ("one session, injection tasks that ran with no person asked after the "
                   "session", "injected calls that ran with no person asked after the "
                   "user's writes were approved"):
        plain = figures[prefix + (" (pairs)" if prefix.startswith("injected") else "")]
        uncovered = figures[prefix + (", no approval covering (pairs)"
                                      if prefix.startswith("injected")
                                      else ", no approval covering")]
        assert count(plain) == count(uncovered), prefix
    # each task as its own run asks no question twice: covering saves none there
    assert figures["confirmations per 100 legitimate writes"] == \
        figures["confirmations per 100 legitimate writes, no approval covering"]
    assert count(figures["legitimate writes run unasked because an earlier approval "
                         "covered them"])[0] == 0
