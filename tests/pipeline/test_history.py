"""``history``: the run's earlier proposals in the rules, kept by the store.

Through ``Gate.handle`` on the memory store, on one SQLite file shared by two gates, and on
PostgreSQL shared by two gates (skipped without ``CALLGATE_TEST_POSTGRES_URL``); the host's
own history; the retention; a store that cannot be read; lint's type for ``history``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.authoring.lint import lint
from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.errors import StoreError
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.execute import ExecutionRequest
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.history import entry_of
from callgate_rules.store import MemoryStore, SqliteStore
from callgate_rules.store.base import ReceiptStore
from callgate_rules.store.history import HistoryEntry
from callgate_rules.taxonomy import ErrorClass, Route

BANKING = Path(__file__).resolve().parents[2] / "examples" / "banking"
HOLDER = {"id": "U-1", "role": "holder"}
PAYEE = "DE89370400440532013000"
T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)


@pytest.fixture(scope="module")
def config() -> GateConfig:
    return load([BANKING / "contracts", BANKING / "policies"])


class Bank:
    """The destination: every payment and payee it was asked to make, in order."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def executor(self, tool: str) -> Any:
        def execute(request: ExecutionRequest) -> dict[str, Any]:
            self.writes.append((tool, dict(request.arguments)))
            return {"id": f"tx-{len(self.writes)}", **request.arguments}
        return execute

    def executors(self) -> dict[str, Any]:
        return {tool: self.executor(tool) for tool in ("sendMoney", "createPayee",
                                                       "sendEmail", "readChannel",
                                                       "readInbox")}


# the payees on file: the one the instalments go to, and another
ON_FILE = WorldResolvers({"payees": [
    {"id": "PY-1", "owner": "U-1", "iban": "DE89370400440532013000", "name": "Northwind"},
    {"id": "PY-2", "owner": "U-1", "iban": "GB29NWBK60161331926819", "name": "Landlord"},
    {"id": "PY-3", "owner": "U-2", "iban": "NL91ABNA0417164300", "name": "someone else's"}]})


def gate_on(config: GateConfig, store: ReceiptStore, bank: Bank, clock: FakeClock,
            **more: Any) -> Gate:
    return Gate(config, executors=bank.executors(), store=store, clock=clock,
                resolvers=ON_FILE, sleep=clock.sleep, secret=b"history-test-secret", **more)


def payment(amount: float, subject: str, recipient: str = PAYEE) -> dict[str, Any]:
    return {"name": "sendMoney",
            "arguments": {"recipient": recipient, "amount": amount, "subject": subject}}


def test_the_third_instalment_of_600_waits_for_a_person(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    gate = gate_on(config, MemoryStore(), bank, clock)
    run = Run(started_at=T0)
    routes = []
    for number in (1, 2, 3):
        decision = gate.handle(payment(600, f"instalment {number}"), actor=HOLDER,
                               request_id=f"req-{number}", run=run)
        routes.append((decision.route, decision.rule))
        clock.now += timedelta(minutes=1)
    assert routes[:2] == [(Route.RETURN_RESULT, "banking-access/account-holder")] * 2
    assert routes[2] == (Route.AWAIT_CONFIRMATION, "sendMoney/daily-limit-per-recipient")
    assert [tool for tool, _ in bank.writes] == ["sendMoney", "sendMoney"]
    # another recipient has a limit of its own
    other = gate.handle(payment(600, "rent", "GB29NWBK60161331926819"), actor=HOLDER,
                        request_id="req-4", run=run)
    assert other.route == Route.RETURN_RESULT


def test_a_confirmed_instalment_counts_and_the_next_waits_too(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    store = MemoryStore()
    gate = gate_on(config, store, bank, clock)
    run = Run(started_at=T0)
    for number in (1, 2):
        gate.handle(payment(600, f"part {number}"), actor=HOLDER, request_id=f"r{number}",
                    run=run)
    held = gate.handle(payment(600, "part 3"), actor=HOLDER, request_id="r3", run=run)
    assert held.route == Route.AWAIT_CONFIRMATION and held.confirmation_token
    confirmed = gate.confirm(held.confirmation_token, actor=HOLDER, confirmed_by="U-1")
    assert confirmed.route == Route.RETURN_RESULT
    entries = store.run_history(run.run_id, since=T0)
    assert [(e.route, e.executed, e.error_class) for e in entries] == [
        ("return_result", True, None)] * 3
    # 1,800 already paid: even a small payment now needs a person
    small = gate.handle(payment(10, "part 4"), actor=HOLDER, request_id="r4", run=run)
    assert small.route == Route.AWAIT_CONFIRMATION
    assert len(bank.writes) == 3


def test_int_and_double_amounts_sum_alike(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    gate = gate_on(config, MemoryStore(), bank, clock)
    run = Run(started_at=T0)
    first = gate.handle(payment(900, "a"), actor=HOLDER, request_id="a", run=run)
    second = gate.handle(payment(600.5, "b"), actor=HOLDER, request_id="b", run=run)
    assert (first.route, second.route) == (Route.RETURN_RESULT, Route.AWAIT_CONFIRMATION)


def test_the_same_payment_twice_in_one_request_counts_once(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    gate = gate_on(config, MemoryStore(), bank, clock)
    run = Run(started_at=T0)
    first = gate.handle(payment(800, "rent"), actor=HOLDER, request_id="same", run=run)
    again = gate.handle(payment(800, "rent"), actor=HOLDER, request_id="same", run=run)
    assert (first.route, again.route) == (Route.RETURN_RESULT, Route.RETURN_RECEIPT)
    third = gate.handle(payment(600, "more"), actor=HOLDER, request_id="other", run=run)
    assert third.route == Route.RETURN_RESULT  # 800 + 600: the receipt was not a payment
    assert len(bank.writes) == 2


def test_another_run_has_its_own_history(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    gate = gate_on(config, MemoryStore(), bank, clock)
    for run_number in (1, 2):
        run = Run(started_at=T0)
        for number in (1, 2):
            decision = gate.handle(payment(700, f"{run_number}/{number}"), actor=HOLDER,
                                   request_id=f"{run_number}-{number}", run=run)
            assert decision.route == Route.RETURN_RESULT


def test_a_payee_created_in_the_run_is_paid_only_with_a_person(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    gate = gate_on(config, MemoryStore(), bank, clock)
    run = Run(started_at=T0)
    new = "FR1420041010050500013M02606"
    created = gate.handle({"name": "createPayee", "arguments": {"iban": new, "name": "X"}},
                          actor=HOLDER, request_id="r1", run=run)
    paid = gate.handle(payment(50, "invoice", new), actor=HOLDER, request_id="r2", run=run)
    assert created.route == Route.RETURN_RESULT
    assert (paid.route, paid.rule) == (Route.AWAIT_CONFIRMATION,
                                       "sendMoney/payee-created-in-this-run")


def test_entries_older_than_the_retention_are_not_seen(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    store = MemoryStore()
    gate = gate_on(config, store, bank, clock, history_retention=timedelta(minutes=1))
    run = Run(started_at=T0)
    gate.handle(payment(900, "old"), actor=HOLDER, request_id="old", run=run)
    clock.now += timedelta(minutes=2)
    later = gate.handle(payment(900, "new"), actor=HOLDER, request_id="new", run=run,
                        now=clock())
    assert later.route == Route.RETURN_RESULT
    assert store.purge_history(older_than=clock() - timedelta(minutes=1)) == 1
    assert [e.request_id for e in store.run_history(run.run_id, since=T0)] == ["new"]


def test_a_host_history_is_read_and_nothing_is_recorded(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    store = MemoryStore()
    gate = gate_on(config, store, bank, clock)
    run = Run(started_at=T0)
    kept: list[HistoryEntry] = [HistoryEntry(
        run_id=run.run_id, at=T0, tool="sendMoney",
        arguments={"recipient": PAYEE, "amount": 1000, "subject": "earlier"},
        route="return_result", error_class=None, request_id="earlier", executed=True,
        executed_at=T0)]
    decision = gate.handle(payment(600, "now"), actor=HOLDER, request_id="now", run=run,
                           history=kept)
    assert decision.route == Route.AWAIT_CONFIRMATION
    assert store.run_history(run.run_id, since=T0) == []
    # the host keeps the entry the gate would have kept
    entry = entry_of(decision, config.contracts["sendMoney"], run.run_id, "now", T0)
    assert (entry.route, entry.executed, entry.error_class) == (
        "await_confirmation", False, "confirmation_required")
    # a held entry did not run: 1,000 + 400 passes, 1,000 + 600 needs a person
    assert gate.check(payment(400, "x"), actor=HOLDER, history=[*kept, entry]).route \
        == Route.EXECUTE
    assert gate.check(payment(600, "x"), actor=HOLDER, history=[*kept, entry]).route \
        == Route.AWAIT_CONFIRMATION


def test_an_account_not_on_file_is_paid_once_without_a_person(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    gate = gate_on(config, MemoryStore(), bank, clock)
    run = Run(started_at=T0)
    typed = "NL91ABNA0417164300"  # the user typed it for the rent
    rent = gate.handle(payment(100, "rent", typed), actor=HOLDER, request_id="r1", run=run)
    again = gate.handle(payment(100, "the rest", typed), actor=HOLDER, request_id="r2",
                        run=run)
    assert rent.route == Route.RETURN_RESULT
    assert (again.route, again.rule) == (Route.AWAIT_CONFIRMATION,
                                         "sendMoney/new-account-paid-once")
    on_file = [gate.handle(payment(100, f"#{n}"), actor=HOLDER, request_id=f"f{n}",
                           run=run).route for n in (1, 2)]
    assert on_file == [Route.RETURN_RESULT, Route.RETURN_RESULT]


def test_a_history_nothing_reads_is_not_kept(tmp_path: Path) -> None:
    policy = (BANKING / "policies" / "access.yaml").read_text()
    (tmp_path / "access.yaml").write_text(policy[:policy.index("  sequences:")])
    config = load([BANKING / "contracts" / "createPayee.yaml", tmp_path])
    store = MemoryStore()
    gate = gate_on(config, store, Bank(), FakeClock(T0))
    run = Run(started_at=T0)
    gate.handle({"name": "createPayee", "arguments": {"iban": PAYEE, "name": "N"}},
                actor=HOLDER, request_id="r", run=run)
    assert not gate.plans.records_history
    assert store.run_history(run.run_id, since=T0) == []


class UnreadableHistory(MemoryStore):
    def run_history(self, run_id: str, *, since: datetime,
                    limit: int = 1000) -> list[HistoryEntry]:
        raise StoreError("connection refused")


def test_a_history_that_cannot_be_read_executes_nothing(config: GateConfig) -> None:
    bank = Bank()
    gate = gate_on(config, UnreadableHistory(), bank, FakeClock(T0))
    decision = gate.handle(payment(10, "x"), actor=HOLDER, request_id="r",
                           run=Run(started_at=T0))
    assert decision.error_class == ErrorClass.TRANSIENT
    assert "connection refused" not in decision.agent_message
    assert bank.writes == []


def test_masked_arguments_stay_masked_in_the_history(tmp_path: Path,
                                                     config: GateConfig) -> None:
    contract = (BANKING / "contracts" / "sendMoney.yaml").read_text()
    (tmp_path / "sendMoney.yaml").write_text(
        contract.replace("  confirmation:\n", "  mask: [subject]\n  confirmation:\n"))
    masked = load([tmp_path, BANKING / "policies"])
    store = MemoryStore()
    gate = gate_on(masked, store, Bank(), FakeClock(T0))
    run = Run(started_at=T0)
    gate.handle(payment(10, "secret subject"), actor=HOLDER, request_id="r", run=run)
    (entry,) = store.run_history(run.run_id, since=T0)
    assert entry.arguments["subject"] == "***" and entry.arguments["amount"] == 10


# Two gates, one store ------------------------------------------------------------------------


def two_gates_split_payment(config: GateConfig, first: ReceiptStore,
                            second: ReceiptStore) -> None:
    """Instalments alternating between two gates on one store: the third still waits."""
    bank, clock = Bank(), FakeClock(T0)
    gates = [gate_on(config, first, bank, clock), gate_on(config, second, bank, clock)]
    run_id = uuid.uuid4().hex
    routes = []
    for number in range(3):
        # each instance has a Run object of its own for the same run
        run = Run(started_at=T0, run_id=run_id)
        decision = gates[number % 2].handle(payment(600, f"part {number}"), actor=HOLDER,
                                            request_id=f"req-{number}", run=run)
        routes.append(decision.route)
        clock.now += timedelta(seconds=1)
    assert routes == [Route.RETURN_RESULT, Route.RETURN_RESULT, Route.AWAIT_CONFIRMATION]
    held = [e for e in second.run_history(run_id, since=T0) if not e.executed]
    assert [e.request_id for e in held] == ["req-2"]


def test_two_gates_on_one_sqlite_file_share_the_history(config: GateConfig,
                                                        tmp_path: Path) -> None:
    first, second = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    try:
        two_gates_split_payment(config, first, second)
    finally:
        first.close()
        second.close()


POSTGRES_URL = os.environ.get("CALLGATE_TEST_POSTGRES_URL")


@pytest.fixture()
def postgres_stores() -> Iterator[tuple[ReceiptStore, ReceiptStore]]:
    if not POSTGRES_URL:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set; the PostgreSQL history test "
                    "needs a server")
    import psycopg

    from callgate_rules.store import PostgresStore

    schema = f"callgate_history_{uuid.uuid4().hex[:10]}"
    first = PostgresStore(POSTGRES_URL, schema=schema)
    second = PostgresStore(POSTGRES_URL, schema=schema)
    yield first, second
    first.close()
    second.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_two_gates_on_one_postgres_database_share_the_history(
        config: GateConfig, postgres_stores: tuple[ReceiptStore, ReceiptStore]) -> None:
    two_gates_split_payment(config, *postgres_stores)


# lint ------------------------------------------------------------------------------------------


def lint_rule(tmp_path: Path, expression: str) -> list[tuple[str, str]]:
    contract = (BANKING / "contracts" / "readChannel.yaml").read_text()
    (tmp_path / "readChannel.yaml").write_text(contract.replace(
        "  examples:\n",
        f"  rules:\n    - name: probe\n      expression: '{expression}'\n"
        "      error_class: forbidden\n      message: refused\n  examples:\n"))
    for other in (BANKING / "contracts").glob("*.yaml"):
        if other.name != "readChannel.yaml":
            (tmp_path / other.name).write_text(other.read_text())
    (tmp_path / "access.yaml").write_text((BANKING / "policies" / "access.yaml").read_text())
    return [(f.code, f.message) for f in lint([tmp_path])
            if f.severity != "note" and f.code != "no-routing-table"]


def test_lint_knows_the_shape_of_history(tmp_path: Path) -> None:
    assert lint_rule(tmp_path, 'history.all(h, h.tool != "sendEmail" || !h.executed)') == []
    assert lint_rule(tmp_path, "history.exists(h, has(h.executed_at) "
                               "&& now - h.executed_at < duration(\"1h\"))") == []
    unknown = lint_rule(tmp_path, "history.exists(h, h.tol == \"x\")")
    assert any("tol" in message and "tool" in message for _, message in unknown), unknown
    never = lint_rule(tmp_path, "history.exists(h, h.executed == \"yes\")")
    assert never, "a bool compared with a text is reported"


def test_a_preview_in_the_run_sees_its_history(config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    gate = gate_on(config, MemoryStore(), bank, clock)
    run = Run(started_at=T0)
    for number in (1, 2):
        gate.handle(payment(600, f"part {number}"), actor=HOLDER, request_id=f"r{number}",
                    run=run)
    third = payment(600, "part 3")
    assert not gate.preview(third, actor=HOLDER, request_id="r3").needs_confirmation
    preview = gate.preview(third, actor=HOLDER, request_id="r3", run=run)
    assert preview.needs_confirmation and preview.draft and "part 3" in preview.draft


def test_the_async_gate_passes_the_run_and_a_host_history(config: GateConfig) -> None:
    import asyncio

    from callgate_rules.pipeline.asynchronous import AsyncGate

    bank, clock = Bank(), FakeClock(T0)
    gate = AsyncGate(config, executors=bank.executors(), store=MemoryStore(), clock=clock,
                     resolvers=ON_FILE,
                     sleep=clock.sleep, secret=b"history-test-secret")
    run = Run(started_at=T0)
    earlier = [HistoryEntry(run_id=run.run_id, at=T0, tool="sendMoney",
                            arguments={"recipient": PAYEE, "amount": 1200, "subject": "e"},
                            route="return_result", error_class=None, request_id="e",
                            executed=True, executed_at=T0)]

    async def decide() -> tuple[Route, Route, Route]:
        checked = await gate.acheck(payment(600, "a"), actor=HOLDER, history=earlier)
        handled = await gate.ahandle(payment(600, "a"), actor=HOLDER, request_id="a",
                                     run=run, history=earlier)
        previewed = await gate.apreview(payment(600, "b"), actor=HOLDER, request_id="b",
                                        run=run, history=earlier)
        return checked.route, handled.route, previewed.decision.route

    assert asyncio.run(decide()) == (Route.AWAIT_CONFIRMATION,) * 3
    assert bank.writes == []


# The stores' history, one contract for all three ------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def history_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        store = SqliteStore(tmp_path / "h.db")
        yield store
        store.close()
    else:
        yield request.getfixturevalue("postgres_stores")[0]


def test_the_store_keeps_a_run_in_order_bounded_and_detached(history_store: Any) -> None:
    run_id = uuid.uuid4().hex
    for n in range(5):
        history_store.record_history(HistoryEntry(
            run_id=run_id, at=T0 + timedelta(minutes=n), tool="sendMoney",
            arguments={"amount": n, "nested": {"k": [n]}}, route="await_confirmation",
            error_class="confirmation_required", request_id=f"r{n}", operation_id=f"op{n}"))
    history_store.record_history(HistoryEntry(
        run_id="another", at=T0, tool="x", arguments={}, route="refuse",
        error_class="forbidden", request_id="q"))
    read = history_store.run_history(run_id, since=T0 + timedelta(minutes=1), limit=3)
    assert [e.request_id for e in read] == ["r2", "r3", "r4"]
    read[0].arguments["nested"]["k"].append("changed")  # type: ignore[index]
    assert history_store.run_history(run_id, since=T0)[2].arguments == {
        "amount": 2, "nested": {"k": [2]}}
    assert history_store.mark_executed("op3", at=T0 + timedelta(hours=1),
                                       route="return_result", result={"id": "tx"}) == 1
    third = history_store.run_history(run_id, since=T0)[3]
    assert (third.executed, third.route, third.error_class, third.result) == (
        True, "return_result", None, {"id": "tx"})
    assert third.executed_at == T0 + timedelta(hours=1)
    assert history_store.run_of("op3") == run_id and history_store.run_of("nope") is None
    assert history_store.purge_history(older_than=T0 + timedelta(minutes=2)) == 3
    assert [e.request_id for e in history_store.run_history(run_id, since=T0)] == [
        "r2", "r3", "r4"]


class ReceiptsOnly:
    """A host's receipt store that keeps no histories (it delegates the receipt protocol)."""

    HISTORY_METHODS = frozenset({"record_history", "run_history", "mark_executed", "run_of",
                                 "purge_history"})

    def __init__(self) -> None:
        self._store = MemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name in self.HISTORY_METHODS:
            raise AttributeError(name)
        return getattr(self._store, name)


def test_a_store_without_histories_leaves_them_to_the_gates_memory(
        config: GateConfig) -> None:
    bank, clock = Bank(), FakeClock(T0)
    gate = gate_on(config, ReceiptsOnly(), bank, clock)  # type: ignore[arg-type]
    run = Run(started_at=T0)
    routes = [gate.handle(payment(600, f"part {n}"), actor=HOLDER, request_id=f"r{n}",
                          run=run).route for n in range(3)]
    assert routes == [Route.RETURN_RESULT, Route.RETURN_RESULT, Route.AWAIT_CONFIRMATION]
    assert gate.histories is gate.histories
    assert len(gate.histories.run_history(run.run_id, since=T0)) == 3
