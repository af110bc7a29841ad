"""The receipt of an executed write keeps the hash of its decision's log line
(``Receipt.log_line``): kept once by every store, added to existing SQLite files and
PostgreSQL schemas by a migration that leaves their receipts readable, and written by the
gate for the decision that executed the write only."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.decision_log import DecisionLog, line_hash
from callgate_rules.documents.source import read_data_file
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store import MemoryStore, PostgresStore, ReceiptStore, SqliteStore
from callgate_rules.store import postgres as postgres_module
from callgate_rules.store import sqlite as sqlite_module
from callgate_rules.store.base import NewOperation, ReceiptState

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
LINE, OTHER_LINE = "a" * 64, "b" * 64


def operation(operation_id: str) -> NewOperation:
    return NewOperation(operation_id=operation_id, request_id="r-1", tool="sendPayment",
                        contract_version="1", args_hash="h", arguments={"amount": 5},
                        actor={"id": "U-7"})


def executed(store: ReceiptStore, operation_id: str) -> None:
    store.claim(operation(operation_id), worker="w", lease=timedelta(seconds=30), now=NOW)
    store.finish(operation_id, worker="w", state=ReceiptState.SUCCEEDED, now=NOW,
                 result={"ok": True})


def test_a_receipt_keeps_the_first_line_it_is_linked_to(store: ReceiptStore) -> None:
    executed(store, "op-linked")
    assert store.get("op-linked").log_line is None  # type: ignore[union-attr]
    assert store.link_log_line("op-linked", LINE) is True
    assert store.link_log_line("op-linked", OTHER_LINE) is False  # a later decision
    assert store.link_log_line("op-nowhere", LINE) is False
    receipt = store.get("op-linked")
    assert receipt is not None and receipt.log_line == LINE
    assert receipt.state == ReceiptState.SUCCEEDED and receipt.result == {"ok": True}
    listed = store.list_receipts(state=ReceiptState.SUCCEEDED, limit=1000)
    assert [r.log_line for r in listed if r.operation_id == "op-linked"] == [LINE]


# Migrations: existing databases gain the column, their receipts stay readable -------------


OLD_RECEIPT = ("op-old", "succeeded", "r-0", "sendPayment", "1", "h", '{"amount":5}',
               '{"id":"U-7"}', '{"ok":true}', 1)


def test_an_sqlite_file_of_schema_4_gains_the_column(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.db"
    with monkeypatch.context() as old:  # the store as it was before the column
        old.setattr(sqlite_module, "MIGRATIONS", sqlite_module.MIGRATIONS[:4])
        old.setattr(sqlite_module, "SCHEMA_VERSION", 4)
        SqliteStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO callgate_receipts (operation_id, state, request_id, tool, "
            "contract_version, args_hash, arguments, actor, result, attempts, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*OLD_RECEIPT, NOW.isoformat(), NOW.isoformat()))
    with SqliteStore(path) as store:
        old_receipt = store.get("op-old")
        assert old_receipt is not None and old_receipt.log_line is None
        assert old_receipt.result == {"ok": True}
        assert store.link_log_line("op-old", LINE)
        assert store.get("op-old").log_line == LINE  # type: ignore[union-attr]
    with sqlite3.connect(path) as connection:
        versions = [v for (v,) in connection.execute(
            "SELECT version FROM callgate_schema_version ORDER BY version")]
    assert versions == [version for version, _ in sqlite_module.MIGRATIONS]  # 5 and later


def test_a_postgres_schema_of_version_4_gains_the_column(
        postgres_url: str, postgres_admin: Any, new_postgres_schema: Callable[[], str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from psycopg import sql

    schema = new_postgres_schema()
    with monkeypatch.context() as old:
        old.setattr(postgres_module, "MIGRATIONS", postgres_module.MIGRATIONS[:4])
        old.setattr(postgres_module, "SCHEMA_VERSION", 4)
        PostgresStore(postgres_url, schema=schema).close()
    postgres_admin.execute(sql.SQL(
        "INSERT INTO {}.callgate_receipts (operation_id, state, request_id, tool, "
        "contract_version, args_hash, arguments, actor, result, attempts, created_at, "
        "updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)").format(
        sql.Identifier(schema)), (*OLD_RECEIPT, NOW, NOW))
    with PostgresStore(postgres_url, schema=schema) as store:
        old_receipt = store.get("op-old")
        assert old_receipt is not None and old_receipt.log_line is None
        assert store.link_log_line("op-old", LINE)
        assert store.get("op-old").log_line == LINE  # type: ignore[union-attr]
        executed(store, "op-new")
        assert store.link_log_line("op-new", OTHER_LINE)


# The gate links the decision that executed the write, and only it ------------------------


DANA = {"id": "U-7", "tenant": "acme", "role": "agent", "teams": ["billing"],
        "organizations": ["org-northwind"]}
FOLLOW_UP = {"name": "createFollowUp", "arguments": {
    "ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}}
TICKET = {"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}}


def gate_over(store: ReceiptStore | str, log: DecisionLog | None) -> Gate:
    world = read_data_file(str(REPO / "examples" / "world.yaml"), "world")
    return Gate.from_paths(REPO / "contracts", REPO / "policies", store=store,
                           decision_log=log, resolvers=WorldResolvers(world), clock=lambda: NOW,
                           executors={"createFollowUp": lambda request: {
                               "id": "F-1", **request.arguments},
                                      "getTicketStatus": lambda request: {"status": "open"}})


@pytest.mark.parametrize("where", ["memory", "sqlite"])
def test_the_executed_writes_receipt_names_its_line_and_a_repeat_does_not(
        tmp_path: Path, where: str) -> None:
    store: ReceiptStore = MemoryStore() if where == "memory" \
        else SqliteStore(tmp_path / "r.db")
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(path)
    with gate_over(store, log) as gate:
        session = {"authenticated": True}
        first = gate.handle(FOLLOW_UP, actor=DANA, request_id="req-1", session=session)
        again = gate.handle(FOLLOW_UP, actor=DANA, request_id="req-1", session=session)
        gate.handle(TICKET, actor=DANA, request_id="req-2", session=session)
    log.close()
    assert first.operation_id is not None and first.operation_id == again.operation_id
    assert str(again.error_class) == "duplicate"
    lines = path.read_text().splitlines()
    assert [json.loads(line)["route"] for line in lines] == [
        "return_result", "return_receipt", "return_result"]
    receipt = store.get(first.operation_id)
    assert receipt is not None and receipt.log_line == line_hash(lines[0])
    store.close()


def test_without_a_decision_log_nothing_is_linked(tmp_path: Path) -> None:
    store = MemoryStore()
    with gate_over(store, None) as gate:
        decision = gate.handle(FOLLOW_UP, actor=DANA, request_id="req-1",
                               session={"authenticated": True})
    assert decision.operation_id is not None
    assert store.get(decision.operation_id).log_line is None  # type: ignore[union-attr]



class StoreWithoutLinks:
    """A host's own store written before ``link_log_line`` was part of the protocol."""

    def __init__(self, store: ReceiptStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        if name == "link_log_line":
            raise AttributeError(name)
        return getattr(self._store, name)


def test_a_store_that_cannot_link_still_executes_and_is_counted(tmp_path: Path) -> None:
    store = MemoryStore()
    log = DecisionLog(tmp_path / "decisions.jsonl")
    with gate_over(StoreWithoutLinks(store), log) as gate:  # type: ignore[arg-type]
        decision = gate.handle(FOLLOW_UP, actor=DANA, request_id="req-1",
                               session={"authenticated": True})
        assert str(decision.route) == "return_result" and decision.error_class is None
        assert gate.counters["log_line_not_linked"] == 1
    log.close()


def test_a_held_write_is_linked_to_the_line_of_the_confirmation_that_ran_it(
        tmp_path: Path) -> None:
    """The gateway tests' sendMessage waits for a person every time."""
    config = REPO / "tests" / "gateway" / "config"
    store, path = MemoryStore(), tmp_path / "decisions.jsonl"
    log = DecisionLog(path)
    writer = {"id": "U-1", "tenant": "acme", "role": "writer"}
    with Gate.from_paths(config / "contracts", config / "policies", store=store,
                         decision_log=log, clock=lambda: NOW,
                         executors={"sendMessage": lambda request: {"sent": True}}) as gate:
        held = gate.handle({"name": "sendMessage", "arguments": {"to": "bo@example.com",
                                                                  "text": "Hello"}},
                           actor=writer, request_id="req-message")
        assert str(held.route) == "await_confirmation" and held.operation_id is not None
        assert store.get(held.operation_id).log_line is None  # type: ignore[union-attr]
        ran = gate.confirm(held.confirmation_token or "", actor=writer, confirmed_by="bo")
    log.close()
    assert str(ran.route) == "return_result", (ran.log["detail"], ran.log["error_class"])
    lines = path.read_text().splitlines()
    assert store.get(held.operation_id).log_line == line_hash(lines[-1])  # type: ignore[union-attr]
