"""Separate processes on one store (an SQLite file, or PostgreSQL when
``CALLGATE_TEST_POSTGRES_URL`` is set): a payment one process held, another process's
confirmation approved, covers a third process's later payment to the same account in the
same run — and nothing in another run or to another account (``approval_covers``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
POSTGRES_SKIP = ("CALLGATE_TEST_POSTGRES_URL is not set; the PostgreSQL approval process "
                 "test needs a server")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'receipts.sqlite3'}"
        return
    base = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
    if not base:
        pytest.skip(POSTGRES_SKIP)
    import psycopg

    schema = f"callgate_appr_{uuid.uuid4().hex[:10]}"
    yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def worker(store_url: str, run_id: str, *arguments: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.processes.approval_worker", store_url, run_id,
         *arguments], cwd=REPO, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.integration
def test_an_approval_given_in_one_process_covers_the_next_in_another(store_url: str) -> None:
    run_id = uuid.uuid4().hex
    held = worker(store_url, run_id, "propose", "DE-NEW", "first")
    assert (held["route"], held["rule"]) == ("await_confirmation", "pay/payee-on-file")
    confirmed = worker(store_url, run_id, "confirm", held["token"], "dana")
    assert confirmed["route"] == "return_result"
    later = worker(store_url, run_id, "propose", "DE-NEW", "second")
    assert later["route"] == "return_result"
    assert later["covered"] and later["covered"][0].startswith(
        f"approval of {held['operation_id']} by dana at ")
    assert later["covered_by"][0]["operation_id"] == held["operation_id"]
    other_account = worker(store_url, run_id, "propose", "DE-OTHER", "third")
    assert other_account["route"] == "await_confirmation"
    other_run = worker(store_url, uuid.uuid4().hex, "propose", "DE-NEW", "fourth")
    assert other_run["route"] == "await_confirmation"
