"""Exactly-once across real processes: races, workers killed mid-call, dropped connections.

Workers are started with the "spawn" context so each one is a fresh interpreter with its
own store object, like separate gate hosts. Lease expiry is reached with an explicit ``now``
in the future, never by sleeping.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.errors import LeaseLost, StoreError
from callgate_rules.store import (
    ClaimOutcome,
    NewOperation,
    PostgresStore,
    ReceiptState,
    ReceiptStore,
    SqliteStore,
)

T0 = datetime(2031, 3, 14, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
SPAWN = multiprocessing.get_context("spawn")
RACERS = 8
JOIN_TIMEOUT = 60.0


@dataclass(frozen=True)
class StoreSpec:
    """How a child process opens the store under test (picklable, unlike a store)."""

    kind: str
    location: str
    schema: str | None = None

    def open(self) -> ReceiptStore:
        if self.kind == "sqlite":
            return SqliteStore(self.location)
        return PostgresStore(self.location, schema=self.schema)


def operation(operation_id: str) -> NewOperation:
    return NewOperation(
        operation_id=operation_id,
        request_id="req-race",
        tool="create_invoice",
        contract_version="1",
        args_hash="hash-" + operation_id,
        arguments={"invoice": operation_id, "amount": 10},
        actor={"user_id": "u-1"},
    )


def append_line(path: str, line: str) -> None:
    # One write() on an O_APPEND descriptor: lines from many processes never interleave.
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, (line + "\n").encode())
    finally:
        os.close(descriptor)


# Child process entry points (module level, so "spawn" can import them) ---------------------


def race_for_operations(
    spec: StoreSpec,
    operation_ids: list[str],
    worker: str,
    start: Barrier,
    executions_log: str,
    claims_log: str,
) -> None:
    store = spec.open()
    order = list(operation_ids)
    random.Random(worker).shuffle(order)
    start.wait()
    for operation_id in order:
        claim = store.claim(operation(operation_id), worker=worker, lease=LEASE, now=T0)
        append_line(claims_log, f"{operation_id} {worker} {claim.outcome.value}")
        if claim.may_execute:
            append_line(executions_log, f"{operation_id} {worker}")
            store.finish(
                operation_id, worker=worker, state=ReceiptState.SUCCEEDED, now=T0,
                result={"executed_by": worker},
            )
    store.close()


def claim_then_hang(spec: StoreSpec, operation_id: str, worker: str, claimed: Event) -> None:
    store = spec.open()
    if store.claim(operation(operation_id), worker=worker, lease=LEASE, now=T0).may_execute:
        claimed.set()
    time.sleep(JOIN_TIMEOUT)  # the write is in flight here when the process is killed


def hold_sqlite_write_lock(path: str, locked: Event) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    locked.set()
    time.sleep(JOIN_TIMEOUT)  # killed while the transaction is open


# Fixtures ----------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    if request.param == "sqlite":
        spec = StoreSpec("sqlite", str(tmp_path / "receipts.db"))
    else:
        spec = StoreSpec(
            "postgres",
            request.getfixturevalue("postgres_url"),
            request.getfixturevalue("postgres_schema"),
        )
    # Create the schema once here, so the children do not all race to migrate first.
    spec.open().close()
    return spec


def start_process(target: Callable[..., None], *args: Any) -> Any:
    process = SPAWN.Process(target=target, args=args, daemon=True)
    process.start()
    return process


def kill(process: Any) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.join(JOIN_TIMEOUT)
    assert process.exitcode == -signal.SIGKILL


# (a) Racing processes ----------------------------------------------------------------------


def test_racing_processes_execute_each_operation_exactly_once(
    spec: StoreSpec, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    operation_ids = [f"race-{run}-{n}" for n in range(25)]
    executions_log, claims_log = str(tmp_path / "executions.log"), str(tmp_path / "claims.log")
    start = SPAWN.Barrier(RACERS)
    racers = [
        start_process(
            race_for_operations, spec, operation_ids, f"worker-{n}", start, executions_log,
            claims_log,
        )
        for n in range(RACERS)
    ]
    for racer in racers:
        racer.join(JOIN_TIMEOUT)
    assert [racer.exitcode for racer in racers] == [0] * RACERS

    executions = [line.split() for line in Path(executions_log).read_text().splitlines()]
    claims = [line.split() for line in Path(claims_log).read_text().splitlines()]
    assert Counter(operation_id for operation_id, _ in executions) == Counter(operation_ids)
    assert len(claims) == RACERS * len(operation_ids)
    losing_outcomes = {outcome for _, _, outcome in claims if outcome != "claimed"}
    assert losing_outcomes <= {ClaimOutcome.BUSY.value, ClaimOutcome.EXISTING.value}
    store = spec.open()
    try:
        for operation_id, executor in executions:
            receipt = store.get(operation_id)
            assert receipt is not None
            assert receipt.state is ReceiptState.SUCCEEDED
            assert receipt.result == {"executed_by": executor}
            assert receipt.attempts == 1
    finally:
        store.close()


# (b) A worker killed mid-call --------------------------------------------------------------


def test_killed_worker_leaves_a_claim_that_must_be_reconciled(spec: StoreSpec) -> None:
    operation_id = f"killed-{uuid.uuid4().hex[:8]}"
    claimed = SPAWN.Event()
    worker = start_process(claim_then_hang, spec, operation_id, "doomed-worker", claimed)
    assert claimed.wait(JOIN_TIMEOUT), "the worker never claimed"
    kill(worker)

    store = spec.open()
    try:
        before_expiry = store.claim(
            operation(operation_id), worker="rescuer", lease=LEASE, now=T0 + LEASE / 2
        )
        after_expiry = store.claim(
            operation(operation_id), worker="rescuer", lease=LEASE, now=T0 + LEASE
        )
        with pytest.raises(LeaseLost):
            store.finish(
                operation_id, worker="doomed-worker", state=ReceiptState.SUCCEEDED, now=T0
            )
    finally:
        store.close()

    assert before_expiry.outcome is ClaimOutcome.BUSY
    assert after_expiry.outcome is ClaimOutcome.RECONCILE
    assert not after_expiry.may_execute
    assert (after_expiry.receipt.attempts, after_expiry.receipt.lease_owner) == (2, "rescuer")


def test_worker_killed_inside_a_sqlite_transaction_does_not_wedge_the_file(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "receipts.db")
    SqliteStore(path).close()
    locked = SPAWN.Event()
    holder = start_process(hold_sqlite_write_lock, path, locked)
    assert locked.wait(JOIN_TIMEOUT), "the holder never took the write lock"

    impatient = SqliteStore(path, busy_timeout=0.2)
    try:
        with pytest.raises(StoreError, match="locked"):
            impatient.claim(operation("blocked"), worker="w1", lease=LEASE, now=T0)
        kill(holder)
        claim = impatient.claim(operation("blocked"), worker="w1", lease=LEASE, now=T0)
    finally:
        impatient.close()

    assert claim.outcome is ClaimOutcome.CLAIMED


# (c) PostgreSQL connections dropped between claim and finish -------------------------------


def with_application_name(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


def terminate_backends(admin: Any, application_name: str) -> int:
    (terminated,) = admin.execute(
        """
        SELECT count(*) FROM (
            SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
            WHERE application_name = %s
        ) AS terminated
        """,
        (application_name,),
    ).fetchone()
    return int(terminated)


def test_postgres_connection_lost_before_recording_leads_to_reconcile(
    postgres_url: str, postgres_schema: str, postgres_admin: Any
) -> None:
    operation_id = f"dropped-{uuid.uuid4().hex[:8]}"
    victim_name = f"callgate_victim_{uuid.uuid4().hex[:8]}"
    victim = PostgresStore(with_application_name(postgres_url, victim_name), schema=postgres_schema)
    assert victim.claim(operation(operation_id), worker="victim", lease=LEASE, now=T0).may_execute

    # The write went out; then the server drops the worker's connections and the worker
    # goes away before it can record anything.
    assert terminate_backends(postgres_admin, victim_name) >= 1
    victim.close()

    rescuer = PostgresStore(postgres_url, schema=postgres_schema)
    try:
        before_expiry = rescuer.claim(
            operation(operation_id), worker="rescuer", lease=LEASE, now=T0 + LEASE / 2
        )
        after_expiry = rescuer.claim(
            operation(operation_id), worker="rescuer", lease=LEASE, now=T0 + LEASE
        )
        with pytest.raises(LeaseLost):
            rescuer.finish(operation_id, worker="victim", state=ReceiptState.SUCCEEDED, now=T0)
    finally:
        rescuer.close()

    assert before_expiry.outcome is ClaimOutcome.BUSY
    assert after_expiry.outcome is ClaimOutcome.RECONCILE
    assert after_expiry.receipt.attempts == 2


def test_postgres_store_recovers_when_the_server_drops_idle_connections(
    postgres_url: str, postgres_schema: str, postgres_admin: Any
) -> None:
    operation_id = f"recovered-{uuid.uuid4().hex[:8]}"
    worker_name = f"callgate_worker_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(with_application_name(postgres_url, worker_name), schema=postgres_schema)
    try:
        store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
        assert terminate_backends(postgres_admin, worker_name) >= 1

        done = store.finish(
            operation_id, worker="w1", state=ReceiptState.SUCCEEDED, now=T0, result={"ok": 1}
        )
        again = store.claim(operation(operation_id), worker="w2", lease=LEASE, now=T0 + LEASE)
    finally:
        store.close()

    assert (done.state, done.result) == (ReceiptState.SUCCEEDED, {"ok": 1})
    assert again.outcome is ClaimOutcome.EXISTING
