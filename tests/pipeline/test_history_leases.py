"""Run leases: one run's decisions over ``history`` take turns across gate instances.

The store's lease (``take_run_lease``/``release_run_lease``) on the memory store, an SQLite
file and PostgreSQL (skipped without ``CALLGATE_TEST_POSTGRES_URL``); then through
``Gate.handle``: threads of two gates racing instalments on one store never pay past the
limit; a lease held elsewhere past the wait makes the proposal ``transient``, never a hang;
an expired lease is taken over; a tool whose rules do not read ``history`` never waits;
``Gate.confirm`` holds it too. Real processes racing on one file or database are in
``tests/processes/test_history_processes.py``.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import GateConfig
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.execute import ExecutionRequest
from callgate_rules.pipeline.gate import Gate, utc_now
from callgate_rules.store import MemoryStore, SqliteStore
from callgate_rules.store.base import ReceiptStore
from callgate_rules.store.history import RunHistory
from callgate_rules.taxonomy import ErrorClass, Route

BANKING = Path(__file__).resolve().parents[2] / "examples" / "banking"
HOLDER = {"id": "U-1", "role": "holder"}
PAYEE = "DE89370400440532013000"
T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
ON_FILE = WorldResolvers({"payees": [
    {"id": "PY-1", "owner": "U-1", "iban": PAYEE, "name": "Northwind"}]})
POSTGRES_URL = os.environ.get("CALLGATE_TEST_POSTGRES_URL")


@pytest.fixture(scope="module")
def config() -> GateConfig:
    return load([BANKING / "contracts", BANKING / "policies"])


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReceiptStore]:
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "sqlite":
        opened: ReceiptStore = SqliteStore(tmp_path / "receipts.sqlite3")
        yield opened
        opened.close()
        return
    if not POSTGRES_URL:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set")
    import psycopg

    from callgate_rules.store import PostgresStore

    schema = f"callgate_leases_{uuid.uuid4().hex[:10]}"
    opened = PostgresStore(POSTGRES_URL, schema=schema)
    yield opened
    opened.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def leases_of(store: ReceiptStore) -> RunHistory:
    assert isinstance(store, RunHistory)
    return store


class Bank:
    """The destination: the payments it made, each taking ``delay`` seconds, so that a
    second decision of the run would have time to read a history without the first."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.payments: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def pay(self, request: ExecutionRequest) -> dict[str, Any]:
        time.sleep(self.delay)
        with self._lock:
            self.payments.append(dict(request.arguments))
            return {"id": f"tx-{len(self.payments)}"}

    def executors(self) -> dict[str, Any]:
        return {"sendMoney": self.pay, "readChannel": lambda request: {"messages": []}}


def payment(amount: float, subject: str) -> dict[str, Any]:
    return {"name": "sendMoney",
            "arguments": {"recipient": PAYEE, "amount": amount, "subject": subject}}


# The store's lease ------------------------------------------------------------------------


def test_one_holder_at_a_time_until_released_or_expired(store: ReceiptStore) -> None:
    leases = leases_of(store)
    later = T0 + timedelta(seconds=30)
    assert leases.take_run_lease("run-a", holder="one", expires_at=later, now=T0)
    assert not leases.take_run_lease("run-a", holder="two", expires_at=later, now=T0)
    assert leases.take_run_lease("run-b", holder="two", expires_at=later, now=T0)  # its own
    assert not leases.release_run_lease("run-a", holder="two")  # not two's to give back
    assert leases.release_run_lease("run-a", holder="one")
    assert leases.take_run_lease("run-a", holder="two", expires_at=later, now=T0)
    # two dies holding it: once it has expired the next taker has it, and two's late
    # release gives back nothing that is no longer its own
    assert not leases.take_run_lease("run-a", holder="three", expires_at=later,
                                     now=later - timedelta(microseconds=1))
    assert leases.take_run_lease("run-a", holder="three", expires_at=later + later.resolution,
                                 now=later)
    assert not leases.release_run_lease("run-a", holder="two")
    assert leases.release_run_lease("run-a", holder="three")


# What any sequence of takes and releases may do: the store agrees with the simplest model
# of a lease (one holder until released or expired), whatever the holders and the times.
OPERATIONS = st.lists(st.tuples(
    st.sampled_from(["take", "release"]), st.sampled_from(["one", "two", "three"]),
    st.integers(min_value=0, max_value=20), st.integers(min_value=1, max_value=10)),
    max_size=25)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_any_sequence_agrees_with_one_holder_until_released_or_expired(
        store: ReceiptStore, operations: list[tuple[str, str, int, int]]) -> None:
    leases, run_id = leases_of(store), f"model-{uuid.uuid4().hex}"
    held: tuple[str, datetime] | None = None  # the model: holder, expiry
    for kind, holder, second, length in operations:
        now = T0 + timedelta(seconds=second)
        if kind == "take":
            expected = held is None or held[1] <= now
            assert leases.take_run_lease(run_id, holder=holder, now=now,
                                         expires_at=now + timedelta(seconds=length)) \
                == expected
            if expected:
                held = (holder, now + timedelta(seconds=length))
        else:
            expected = held is not None and held[0] == holder
            assert leases.release_run_lease(run_id, holder=holder) == expected
            if expected:
                held = None


def test_purging_the_history_drops_the_leases_dead_holders_left(store: ReceiptStore) -> None:
    leases = leases_of(store)
    assert leases.take_run_lease("dead", holder="died", expires_at=T0, now=T0)
    assert leases.take_run_lease("live", holder="lives", now=T0,
                                 expires_at=T0 + timedelta(hours=2))
    leases.purge_history(older_than=T0 + timedelta(hours=1))
    assert not leases.release_run_lease("dead", holder="died")  # gone
    assert leases.release_run_lease("live", holder="lives")  # kept


# Through the gate -------------------------------------------------------------------------


def test_racing_threads_of_two_gates_never_pay_past_the_limit(
        config: GateConfig, store: ReceiptStore) -> None:
    # 1,500 a day per recipient: of six instalments of 600 raced by six threads over two
    # gates, exactly two run; the others wait for a person. Without the lease each thread
    # would read a history without the others' payments in flight (the bank takes 50 ms).
    bank = Bank(delay=0.05)
    gates = [Gate(config, executors=bank.executors(), store=store, resolvers=ON_FILE,
                  secret=b"lease-test-secret") for _ in range(2)]
    run_id = f"race-{uuid.uuid4().hex[:8]}"
    start, decisions = threading.Barrier(6), []

    def instalment(number: int) -> None:
        gate = gates[number % 2]
        start.wait()
        decisions.append(gate.handle(payment(600, f"part {number}"), actor=HOLDER,
                                     request_id=f"part-{number}",
                                     run=Run(started_at=utc_now(), run_id=run_id)))

    threads = [threading.Thread(target=instalment, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    routes = sorted(str(decision.route) for decision in decisions)
    assert routes == ["await_confirmation"] * 4 + ["return_result"] * 2
    assert len(bank.payments) == 2
    assert sum(gate.counters["run_lease_lost"] for gate in gates) == 0


def test_a_lease_held_past_the_wait_is_transient_not_a_hang(
        config: GateConfig, store: ReceiptStore) -> None:
    bank = Bank()
    gate = Gate(config, executors=bank.executors(), store=store, resolvers=ON_FILE,
                secret=b"lease-test-secret", run_lease_wait=timedelta(milliseconds=200))
    run = Run(started_at=utc_now(), run_id=f"busy-{uuid.uuid4().hex[:8]}")
    assert leases_of(store).take_run_lease(run.run_id, holder="elsewhere",
                                           expires_at=utc_now() + timedelta(minutes=5),
                                           now=utc_now())
    started = time.monotonic()
    decision = gate.handle(payment(100, "waits"), actor=HOLDER, request_id="r1", run=run)
    waited = time.monotonic() - started
    assert (decision.error_class, decision.route) == (ErrorClass.TRANSIENT, Route.RETRY)
    assert "held its lease for longer than 0.2s" in decision.log["detail"]
    assert 0.2 <= waited < 5
    assert bank.payments == [] and gate.counters["run_lease_busy"] == 1
    # a tool whose rules do not read history neither waits nor takes it
    read = gate.handle({"name": "readChannel", "arguments": {"channel": "general"}},
                       actor=HOLDER, request_id="r2", run=run)
    assert read.route == Route.RETURN_RESULT and gate.counters["run_lease_busy"] == 1
    # given back, the run goes on; and the gate gives its own back once the entry is kept
    assert leases_of(store).release_run_lease(run.run_id, holder="elsewhere")
    paid = gate.handle(payment(100, "now"), actor=HOLDER, request_id="r3", run=run)
    assert paid.route == Route.RETURN_RESULT and len(bank.payments) == 1
    assert leases_of(store).take_run_lease(run.run_id, holder="next",
                                           expires_at=utc_now() + timedelta(seconds=5),
                                           now=utc_now())


def test_a_fake_sleep_cannot_make_the_wait_spin_forever(config: GateConfig) -> None:
    # A frozen clock and a sleep that returns at once (a scenario's, a test's): the wait is
    # bounded by the sleeps it asked for too, so it ends at once instead of after 10 s.
    store, bank = MemoryStore(), Bank()
    gate = Gate(config, executors=bank.executors(), store=store, resolvers=ON_FILE,
                clock=lambda: T0, sleep=lambda seconds: None, secret=b"lease-test-secret")
    run = Run(started_at=T0, run_id="frozen")
    store.take_run_lease(run.run_id, holder="elsewhere", expires_at=T0 + timedelta(hours=1),
                         now=T0)
    started = time.monotonic()
    decision = gate.handle(payment(100, "x"), actor=HOLDER, request_id="r1", run=run)
    assert decision.error_class == ErrorClass.TRANSIENT and bank.payments == []
    assert time.monotonic() - started < 5  # the bound is 10 s of sleeps, none of them slept


def test_a_dead_holders_lease_is_taken_over_once_expired(config: GateConfig) -> None:
    # Time from a fake clock that the gate's backoff moves: the lease of a holder that
    # died lasts the receipts' lease (60 s by default), then the run goes on.
    clock, store, bank = FakeClock(T0), MemoryStore(), Bank()
    gate = Gate(config, executors=bank.executors(), store=store, resolvers=ON_FILE,
                clock=clock, sleep=clock.sleep, secret=b"lease-test-secret",
                run_lease_wait=timedelta(minutes=2))
    run = Run(started_at=T0, run_id="crashed")
    store.take_run_lease(run.run_id, holder="died", expires_at=T0 + timedelta(seconds=60),
                         now=T0)
    decision = gate.handle(payment(100, "after"), actor=HOLDER, request_id="r1", run=run)
    assert decision.route == Route.RETURN_RESULT
    assert timedelta(seconds=60) <= clock() - T0 < timedelta(seconds=61)
    assert not store.release_run_lease(run.run_id, holder="died")


def test_confirm_holds_the_lease_and_a_busy_run_leaves_the_token_usable(
        config: GateConfig, store: ReceiptStore) -> None:
    bank = Bank()
    gate = Gate(config, executors=bank.executors(), store=store, resolvers=ON_FILE,
                secret=b"lease-test-secret", run_lease_wait=timedelta(milliseconds=100))
    run = Run(started_at=utc_now(), run_id=f"confirm-{uuid.uuid4().hex[:8]}")
    for number in (1, 2):
        gate.handle(payment(600, f"part {number}"), actor=HOLDER, request_id=f"r{number}",
                    run=run)
    held = gate.handle(payment(600, "part 3"), actor=HOLDER, request_id="r3", run=run)
    assert held.route == Route.AWAIT_CONFIRMATION and held.confirmation_token
    leases = leases_of(store)
    assert leases.take_run_lease(run.run_id, holder="elsewhere",
                                 expires_at=utc_now() + timedelta(minutes=5), now=utc_now())
    busy = gate.confirm(held.confirmation_token, actor=HOLDER, confirmed_by="U-1")
    assert (busy.error_class, busy.route) == (ErrorClass.TRANSIENT, Route.RETRY)
    assert len(bank.payments) == 2
    assert leases.release_run_lease(run.run_id, holder="elsewhere")
    confirmed = gate.confirm(held.confirmation_token, actor=HOLDER, confirmed_by="U-1")
    assert confirmed.route == Route.RETURN_RESULT and len(bank.payments) == 3
