"""The write path's cost in statements: what a new claim and a finish send to the database.

An executed write is one claim and one finish. Each is one statement committed on its own
(a new operation ID needs nothing read back; a finish returns its row), so the store makes
the two durable commits the guarantees need and nothing more. The receipt a fast claim
returns is the one a read of the row gives back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.store import ClaimOutcome, ReceiptState, ReceiptStore, SqliteStore
from callgate_rules.store.sqlite import RETURNING_SQLITE
from tests.store.test_store_contract import LEASE, T0, operation

pytestmark = pytest.mark.skipif(sqlite3.sqlite_version_info < RETURNING_SQLITE,
                                reason=f"SQLite {sqlite3.sqlite_version} has no RETURNING")


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[SqliteStore, list[str]]]:
    store = SqliteStore(tmp_path / "receipts.db")
    statements: list[str] = []
    store._connection().set_trace_callback(lambda sql: statements.append(" ".join(sql.split())))
    yield store, statements
    store.close()


def test_a_new_claim_is_one_statement_and_its_receipt_is_the_stored_one(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    store, statements = traced
    claim = store.claim(operation("op-new"), worker="w1", lease=LEASE, now=T0)

    assert claim.outcome is ClaimOutcome.CLAIMED
    assert len(statements) == 1 and statements[0].startswith("INSERT INTO callgate_receipts")
    assert claim.receipt == store.get("op-new")


def test_a_finish_is_one_statement(traced: tuple[SqliteStore, list[str]]) -> None:
    store, statements = traced
    store.claim(operation("op-done"), worker="w1", lease=LEASE, now=T0)
    statements.clear()
    done = store.finish("op-done", worker="w1", state=ReceiptState.SUCCEEDED, now=T0,
                        result={"refund_id": "R-1"})

    assert len(statements) == 1 and statements[0].startswith("UPDATE callgate_receipts")
    assert done == store.get("op-done")
    assert (done.state, done.result, done.lease_owner) == (
        ReceiptState.SUCCEEDED, {"refund_id": "R-1"}, None)


def test_an_existing_operation_id_is_decided_under_the_write_lock(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    store, statements = traced
    store.claim(operation("op-twice"), worker="w1", lease=LEASE, now=T0)
    statements.clear()
    again = store.claim(operation("op-twice"), worker="w2", lease=LEASE, now=T0)

    assert again.outcome is ClaimOutcome.BUSY
    assert "BEGIN IMMEDIATE" in statements and statements[-1] == "COMMIT"


def test_a_finish_committed_on_its_own_is_seen_by_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "receipts.db"
    writer: ReceiptStore = SqliteStore(path)
    writer.claim(operation("op-seen"), worker="w1", lease=LEASE, now=T0)
    writer.finish("op-seen", worker="w1", state=ReceiptState.SUCCEEDED, now=T0, result=[1])
    reader = sqlite3.connect(path)
    try:
        row: Any = reader.execute(
            "SELECT state, result FROM callgate_receipts WHERE operation_id = 'op-seen'"
        ).fetchone()
    finally:
        reader.close()
        writer.close()
    assert tuple(row) == ("succeeded", "[1]")
