"""Real processes sharing one receipt store (an SQLite file, or PostgreSQL when
``CALLGATE_TEST_POSTGRES_URL`` is set): a claim race and a crash mid-call, each checked
for the number of writes the destination received."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
POSTGRES_SKIP = ("CALLGATE_TEST_POSTGRES_URL is not set; the PostgreSQL process tests need a "
                 "server (see README)")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'receipts.sqlite3'}"
        return
    base = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
    if not base:
        pytest.skip(POSTGRES_SKIP)
    import psycopg

    schema = f"callgate_proc_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in base else "?"
    yield f"{base}{separator}schema={schema}"
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def worker(tmp_path: Path, store_url: str, request_id: str, *extra: str
           ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.processes.worker", store_url,
         str(tmp_path / "destination.sqlite3"), request_id, *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def writes(tmp_path: Path) -> list[tuple[str, int]]:
    connection = sqlite3.connect(tmp_path / "destination.sqlite3")
    try:
        return connection.execute("SELECT operation_id, pid FROM writes").fetchall()
    finally:
        connection.close()


def test_eight_processes_race_on_one_operation(tmp_path: Path, store_url: str) -> None:
    start_at = str(time.time() + 3)  # after every process has imported and compiled
    processes = [worker(tmp_path, store_url, "req-race", "--start-at", start_at)
                 for _ in range(8)]
    outputs = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
        outputs.append(json.loads(stdout.strip().splitlines()[-1]))
    rows = writes(tmp_path)
    assert len(rows) == 1, rows  # exactly one execution
    routes = sorted(o["route"] for o in outputs)
    assert routes.count("return_result") == 1
    # The others saw the receipt, or waited on the live claim until their budget ran out;
    # none of them wrote.
    assert all(o["route"] in ("return_result", "return_receipt", "review") for o in outputs)
    assert len({o["operation_id"] for o in outputs}) == 1


def test_crash_after_apply_is_reconciled_not_repeated(tmp_path: Path, store_url: str) -> None:
    crashed = worker(tmp_path, store_url, "req-crash", "--crash-after-apply")
    _, stderr = crashed.communicate(timeout=60)
    assert crashed.returncode == 17, stderr
    assert len(writes(tmp_path)) == 1  # the destination applied the write
    # The same call again, after the dead worker's 60 s lease has expired.
    again = worker(tmp_path, store_url, "req-crash", "--now", "2026-11-29T12:02:00+00:00")
    stdout, stderr = again.communicate(timeout=60)
    assert again.returncode == 0, stderr
    outcome = json.loads(stdout.strip().splitlines()[-1])
    assert outcome["route"] == "return_result"
    assert outcome["detail"] == "late confirmation"
    assert len(writes(tmp_path)) == 1  # reconciled by operation ID, never sent again
