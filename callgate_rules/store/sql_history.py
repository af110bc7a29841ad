"""A run's history in SQL: the ``ReceiptStore`` methods of ``store.history`` (the entries
of a run and their executions, what changed in a run since a mark) and of the run leases,
for every dialect.

``SqlRunHistory`` is a part of ``store.sql.SqlReceiptStore``, which brings the cursors,
the dialect's statements (``_history_sql``) and how instants and JSON are stored.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from callgate_rules.store.base import canonical_json
from callgate_rules.store.history import (
    HISTORY_LIMIT,
    HistoryChanges,
    HistoryEntry,
    HistoryStatements,
)
from callgate_rules.store.statements import Cursor, Row, StorePart, execute


class SqlRunHistory(StorePart):
    """The run history's methods of ``SqlReceiptStore`` (see the module's docstring)."""

    _history_sql: ClassVar[HistoryStatements]

    if TYPE_CHECKING:  # supplied by SqlReceiptStore and its dialects
        def _lease_statement(self) -> AbstractContextManager[Cursor]: ...

    def record_history(self, entry: HistoryEntry) -> None:
        executed_at = entry.executed_at
        parameters = {
            "run_id": entry.run_id, "at": self._time_parameter(entry.at), "tool": entry.tool,
            "arguments": canonical_json(entry.arguments), "route": entry.route,
            "error_class": entry.error_class, "request_id": entry.request_id,
            "operation_id": entry.operation_id, "executed": entry.executed,
            "executed_at": None if executed_at is None else self._time_parameter(executed_at),
            # SQL NULL, not JSON null: nothing to decode when the entry is read back
            "result": None if entry.result is None else canonical_json(entry.result),
        }
        with self._statement() as cursor:
            execute(cursor, self._history_sql.insert, parameters)

    def run_history(self, run_id: str, *, since: datetime,
                    limit: int = HISTORY_LIMIT) -> list[HistoryEntry]:
        parameters = {"run_id": run_id, "since": self._time_parameter(since), "limit": limit}
        with self._read() as cursor:
            execute(cursor, self._history_sql.select, parameters)
            rows = cursor.fetchall()
        return [self._history_entry(row) for row in reversed(rows)]

    def history_changes(self, run_id: str, *, since: datetime, mark: int | None,
                        limit: int = HISTORY_LIMIT) -> HistoryChanges:
        parameters = {"run_id": run_id, "since": self._time_parameter(since), "mark": mark,
                      "limit": limit + 1}
        entry = self._history_entry
        if mark is None:  # a fresh read: the horizon first, then the rows
            with self._read() as cursor:
                execute(cursor, self._history_sql.horizon, parameters)
                horizon = int(cursor.fetchone()["horizon"])
                execute(cursor, self._history_sql.select, parameters)
                rows = cursor.fetchall()
            return HistoryChanges([(row["position"], entry(row)) for row in reversed(rows[:limit])],
                                  horizon, complete=len(rows) <= limit)
        # One statement, one snapshot: sent on its own (on PostgreSQL no transaction's
        # round trips around it), read to its end.
        with self._statement() as cursor:
            execute(cursor, self._history_sql.changes, parameters)
            rows = cursor.fetchall()
        oldest = rows[0]["oldest"]
        return HistoryChanges(
            [(row["position"], entry(row)) for row in rows if row["position"] is not None],
            int(rows[0]["horizon"]), None if oldest is None else self._time_value(oldest))

    def _history_entry(self, row: Row) -> HistoryEntry:
        time, json_value, executed_at = self._time_value, self._json_value, row["executed_at"]
        return HistoryEntry(
            run_id=row["run_id"], at=time(row["at"]), tool=row["tool"],
            arguments=json_value(row["arguments"]), route=row["route"],
            error_class=row["error_class"], request_id=row["request_id"],
            operation_id=row["operation_id"], executed=bool(row["executed"]),
            executed_at=None if executed_at is None else time(executed_at),
            result=None if row["result"] is None else json_value(row["result"]))

    def mark_executed(self, operation_id: str, *, at: datetime, route: str,
                      result: Any = None) -> int:
        parameters = {"operation_id": operation_id, "executed": True, "route": route,
                      "executed_at": self._time_parameter(at),
                      "result": None if result is None else canonical_json(result)}
        with self._statement() as cursor:
            execute(cursor, self._history_sql.mark_executed, parameters)
            return cursor.rowcount

    def run_of(self, operation_id: str) -> str | None:
        with self._read() as cursor:
            execute(cursor, self._history_sql.run_of, {"operation_id": operation_id})
            row = cursor.fetchone()
        return None if row is None else str(row["run_id"])

    def purge_history(self, *, older_than: datetime) -> int:
        parameters = {"cutoff": self._time_parameter(older_than)}
        with self._lease_statement() as cursor:  # the leases dead holders left behind
            execute(cursor, self._history_sql.purge_leases, parameters)
        with self._statement() as cursor:
            execute(cursor, self._history_sql.purge, parameters)
            return cursor.rowcount

    def take_run_lease(self, run_id: str, *, holder: str, expires_at: datetime,
                       now: datetime) -> bool:
        parameters = {"run_id": run_id, "holder": holder, "now": self._time_parameter(now),
                      "expires_at": self._time_parameter(expires_at)}
        with self._lease_statement() as cursor:
            execute(cursor, self._history_sql.take_lease, parameters)
            return cursor.rowcount == 1

    def release_run_lease(self, run_id: str, *, holder: str) -> bool:
        with self._lease_statement() as cursor:
            execute(cursor, self._history_sql.release_lease,
                    {"run_id": run_id, "holder": holder})
            return cursor.rowcount == 1
