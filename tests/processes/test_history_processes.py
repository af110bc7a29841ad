"""Real processes deciding one run's payments on one store (an SQLite file, or PostgreSQL
when ``CALLGATE_TEST_POSTGRES_URL`` is set): the run's lease makes a cumulative limit over
``history`` exact across them, and a holder killed with the lease leaves it to expire.

The limit is the banking example's: at most 1,500 a day per recipient in a run, a payment
past it waiting for a person. Instalments of 250: exactly six may run.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
POSTGRES_SKIP = ("CALLGATE_TEST_POSTGRES_URL is not set; the PostgreSQL process tests need a "
                 "server (see README)")


@dataclass(frozen=True)
class Store:
    url: str
    schema: str | None  # PostgreSQL's, to read the lease table

    def leases(self) -> list[tuple[str, str, datetime]]:
        """The lease rows: run ID, holder, expiry."""
        if self.schema is None:
            path = self.url.removeprefix("sqlite:///")
            with sqlite3.connect(path) as connection:
                rows = connection.execute(
                    "SELECT run_id, holder, expires_at FROM callgate_run_leases").fetchall()
            return [(run, holder, datetime.fromisoformat(at)) for run, holder, at in rows]
        import psycopg

        with psycopg.connect(os.environ["CALLGATE_TEST_POSTGRES_URL"]) as connection:
            found = connection.execute(
                f'SELECT run_id, holder, expires_at FROM "{self.schema}".callgate_run_leases'
            ).fetchall()
        return [(run, holder, at) for run, holder, at in found]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        yield Store(f"sqlite:///{tmp_path / 'receipts.sqlite3'}", None)
        return
    base = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
    if not base:
        pytest.skip(POSTGRES_SKIP)
    import psycopg

    schema = f"callgate_hist_{uuid.uuid4().hex[:10]}"
    yield Store(f"{base}{'&' if '?' in base else '?'}schema={schema}", schema)
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def worker(tmp_path: Path, store: Store, run_id: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.processes.history_worker", store.url,
         str(tmp_path / "bank.sqlite3"), run_id, *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def outputs(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    stdout, stderr = process.communicate(timeout=180)
    assert process.returncode == 0, stderr
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def paid(tmp_path: Path) -> list[float]:
    """The amounts the bank paid."""
    connection = sqlite3.connect(tmp_path / "bank.sqlite3")
    try:
        return [json.loads(body)["amount"]
                for (body,) in connection.execute("SELECT body FROM writes").fetchall()]
    finally:
        connection.close()


def test_three_processes_racing_instalments_pay_exactly_the_limit(
        tmp_path: Path, store: Store) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    # opened once first, so the race is not also a race to create the schema
    worker(tmp_path, store, "warm-up", "--amount", "1").communicate(timeout=120)
    start_at = str(time.time() + 4)  # after every process has imported and compiled
    processes = [worker(tmp_path, store, run_id, "--instalments", "4", "--start-at",
                        start_at) for _ in range(3)]
    decided = [line for process in processes for line in outputs(process)]
    amounts = paid(tmp_path)
    assert amounts.count(1.0) == 1  # the warm-up, in a run of its own
    instalments = [amount for amount in amounts if amount == 250.0]
    # 6 x 250 = 1,500: never a seventh, and none of the six lost to a guess
    assert len(instalments) == 6, decided
    routes = sorted(line["route"] for line in decided)
    assert routes == ["await_confirmation"] * 6 + ["return_result"] * 6, decided
    assert {line["rule"] for line in decided if line["route"] == "await_confirmation"} == {
        "sendMoney/daily-limit-per-recipient"}
    assert store.leases() == []  # every lease given back


def test_a_holder_killed_with_the_lease_leaves_it_to_expire(
        tmp_path: Path, store: Store) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "holding"
    holder = worker(tmp_path, store, run_id, "--lease", "6", "--hang-in-lookup", str(marker))
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert holder.poll() is None and time.monotonic() < deadline, holder.stderr
        time.sleep(0.02)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(30)
    ((leased_run, holder_name, expires_at),) = store.leases()
    assert leased_run == run_id and f":{holder.pid}:" in holder_name
    # the next process of the run waits for the dead holder's lease to expire, then pays
    (line,) = outputs(worker(tmp_path, store, run_id, "--lease", "6"))
    assert line["route"] == "return_result", line
    if line["started"] < expires_at.timestamp():
        assert line["ended"] >= expires_at.timestamp() - 0.01, (line, expires_at)
    assert paid(tmp_path) == [250.0]
    assert store.leases() == []
