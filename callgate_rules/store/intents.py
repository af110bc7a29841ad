"""Run intents, kept by the store: the bound a run's user request puts on what the run may
do (``callgate_rules.intent``), stored with the run so every instance serving it reads the
same one.

One row per run: its ID, the intent's canonical JSON, its version, who declared that
version and when. Binding is a compare-and-set on the version, so two instances narrowing
one run's intent at once cannot both win with different bounds: the first declaration is
an ``INSERT`` that the primary key decides (``ON CONFLICT DO NOTHING``), each narrowing an
``UPDATE ... WHERE version = {the version it narrowed}``. The loser re-reads and narrows
what is there now (``pipeline.intents.declare``). An intent stays until
``purge_run_intents`` removes those declared before a cutoff.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol, runtime_checkable

from callgate_rules.store.base import as_utc, canonical_json, read_stored_json
from callgate_rules.store.statements import Dialect, Query, StorePart, execute, render


@dataclass(frozen=True)
class StoredIntent:
    """A run's intent as the store keeps it: ``intent`` is its data (``RunIntent.as_data``)."""

    run_id: str
    version: int
    intent: Mapping[str, Any]
    declared_by: str
    declared_at: datetime


@runtime_checkable
class RunIntents(Protocol):
    """What a store that keeps run intents offers (every store callgate ships does)."""

    def run_intent(self, run_id: str) -> StoredIntent | None:
        """The run's intent, or ``None`` when none was declared."""
        ...

    def bind_run_intent(self, run_id: str, intent: Mapping[str, Any], *, version: int,
                        declared_by: str, now: datetime) -> bool:
        """Store ``intent`` as version ``version`` of the run's: the first (1) only when the
        run has none, a later one only over ``version - 1``; whether it was stored."""
        ...

    def purge_run_intents(self, *, older_than: datetime) -> int:
        """Delete the intents declared before ``older_than``; how many."""
        ...


class MemoryIntents:
    """Run intents in this process: ``MemoryStore``'s, and a gate's own when its store keeps
    none. Kept as JSON text: a reader gets its own copy."""

    def __init__(self) -> None:
        self._intents_lock = threading.Lock()
        self._intents: dict[str, tuple[int, str, str, datetime]] = {}

    def run_intent(self, run_id: str) -> StoredIntent | None:
        with self._intents_lock:
            kept = self._intents.get(run_id)
        if kept is None:
            return None
        version, intent, declared_by, declared_at = kept
        return StoredIntent(run_id, version, read_stored_json(intent), declared_by,
                            declared_at)

    def bind_run_intent(self, run_id: str, intent: Mapping[str, Any], *, version: int,
                        declared_by: str, now: datetime) -> bool:
        text = canonical_json(intent)
        with self._intents_lock:
            kept = self._intents.get(run_id)
            if (kept[0] if kept is not None else 0) != version - 1:
                return False
            self._intents[run_id] = (version, text, declared_by, as_utc(now))
            return True

    def purge_run_intents(self, *, older_than: datetime) -> int:
        older_than = as_utc(older_than)
        with self._intents_lock:
            old = [run_id for run_id, kept in self._intents.items() if kept[3] < older_than]
            for run_id in old:
                del self._intents[run_id]
        return len(old)


# The SQL, written once; ``IntentStatements`` renders it for a dialect ----------------------

SELECT_INTENT = "SELECT * FROM callgate_run_intents WHERE run_id = {run_id}"
FIRST_INTENT = """
    INSERT INTO callgate_run_intents (run_id, version, intent, declared_by, declared_at)
    VALUES ({run_id}, 1, {intent:json}, {declared_by}, {declared_at})
    ON CONFLICT (run_id) DO NOTHING
"""
NARROWED_INTENT = """
    UPDATE callgate_run_intents
    SET version = {version}, intent = {intent:json}, declared_by = {declared_by},
        declared_at = {declared_at}
    WHERE run_id = {run_id} AND version = {previous}
"""
PURGE_INTENTS = "DELETE FROM callgate_run_intents WHERE declared_at < {cutoff}"

SQLITE_INTENTS = [
    """
    CREATE TABLE callgate_run_intents (
        run_id      TEXT PRIMARY KEY,
        version     INTEGER NOT NULL,
        intent      TEXT NOT NULL,
        declared_by TEXT NOT NULL,
        declared_at TEXT NOT NULL
    )
    """,
]
POSTGRES_INTENTS = [
    """
    CREATE TABLE callgate_run_intents (
        run_id      text PRIMARY KEY,
        version     integer NOT NULL,
        intent      jsonb NOT NULL,
        declared_by text NOT NULL,
        declared_at timestamptz NOT NULL
    )
    """,
]


@dataclass(frozen=True)
class IntentStatements:
    """The run-intent statements in one dialect, rendered once per store class."""

    select: Query
    first: Query
    narrowed: Query
    purge: Query

    @classmethod
    def of(cls, dialect: Dialect) -> IntentStatements:
        return cls(render(SELECT_INTENT, dialect), render(FIRST_INTENT, dialect),
                   render(NARROWED_INTENT, dialect), render(PURGE_INTENTS, dialect))


class SqlRunIntents(StorePart):
    """The run-intent methods of ``store.sql.SqlReceiptStore``."""

    _intent_sql: ClassVar[IntentStatements]

    def run_intent(self, run_id: str) -> StoredIntent | None:
        with self._read() as cursor:
            execute(cursor, self._intent_sql.select, {"run_id": run_id})
            row = cursor.fetchone()
        if row is None:
            return None
        return StoredIntent(run_id=row["run_id"], version=int(row["version"]),
                            intent=self._json_value(row["intent"]),
                            declared_by=row["declared_by"],
                            declared_at=self._time_value(row["declared_at"]))

    def bind_run_intent(self, run_id: str, intent: Mapping[str, Any], *, version: int,
                        declared_by: str, now: datetime) -> bool:
        parameters = {"run_id": run_id, "intent": canonical_json(intent),
                      "declared_by": declared_by, "declared_at": self._time_parameter(now),
                      "version": version, "previous": version - 1}
        statement = self._intent_sql.first if version == 1 else self._intent_sql.narrowed
        with self._statement() as cursor:
            execute(cursor, statement, parameters)
            return cursor.rowcount == 1

    def purge_run_intents(self, *, older_than: datetime) -> int:
        with self._statement() as cursor:
            execute(cursor, self._intent_sql.purge,
                    {"cutoff": self._time_parameter(older_than)})
            return cursor.rowcount
