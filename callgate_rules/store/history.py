"""A run's history, kept by the store: every proposal a gate handled for one run.

The rules read it as the CEL variable ``history`` (``pipeline.history`` makes the variable
and documents its shape). It is kept here, beside the receipts, so that several gate
instances serving one run (several app or gateway processes on one SQLite file or one
PostgreSQL database) see the same history. Each entry is written once, when its proposal
ends, and changed once more at most: when a write held for a person's confirmation runs
(``mark_executed``, by operation ID).

Reads are bounded twice: only entries newer than ``since`` (the gate's retention), and only
the newest ``limit`` of them. ``purge_history`` deletes what is older than the retention.
Time always comes from the caller, as for receipts.

**What changed since a mark** (``history_changes``, the ``HistoryFeed`` every store callgate
ships offers): the entries written or changed since the last read, and the mark of this
one, so that a reader keeps a run's entries decoded and reads only what is new
(``pipeline.history.RunViews``). Each row carries the mark of its last change (``changed``,
the stores' migration 7), written by the statement that writes the row; a read returns the
rows changed at or after the mark it is given, and the store's horizon, the mark to give
next time. The store keeps it exact, not the reader: on SQLite, whose writers take turns,
the mark is the next position (``sqlite_sequence``, which a deletion never lowers); on
PostgreSQL, whose concurrent writers commit in any order, a row's mark is its transaction's
ID and the horizon is the oldest transaction still running when the read began, so a row
committed later, whatever its position, is never behind the horizon. A read also returns
the oldest entry the store keeps at or after ``since``: a purge (which deletes the oldest
entries) shows as an entry gone, and the reader reads the run afresh.

**Run leases** (``take_run_lease``, ``release_run_lease``) make one run's decisions atomic
across instances: a gate that decides a call whose rules read ``history`` first takes the
run's lease (a row of ``callgate_run_leases``: run ID, holder, expiry; the stores'
migration 3), reads the history, decides, executes, writes the entry, and only then
releases it. Taking it is one
statement, ``INSERT ... ON CONFLICT (run_id) DO UPDATE ... WHERE expires_at <= now``: the
primary key decides between two instances, and a lease whose holder died is taken over once
it has expired. ``pipeline.runs.RunHold`` waits for a lease held elsewhere, with backoff and
a bound.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from callgate_rules.store.base import as_utc, canonical_json, read_stored_json
from callgate_rules.store.statements import Dialect, Query, render

# Newest entries read per decision at most: a run longer than this is judged on its tail.
HISTORY_LIMIT = 1000


@dataclass(frozen=True)
class HistoryEntry:
    """One proposal of a run as it ended. ``arguments`` are the validated arguments with the
    contract's masked fields masked; ``result`` is kept only for a contract that declares
    its result's shape (``spec.result``)."""

    run_id: str
    at: datetime  # when the proposal was decided
    tool: str
    arguments: Mapping[str, Any]
    route: str
    error_class: str | None
    request_id: str
    operation_id: str | None = None
    executed: bool = False  # known to have run (a read answered, a write succeeded)
    executed_at: datetime | None = None
    result: Any = None


@runtime_checkable
class RunHistory(Protocol):
    """What a store that keeps run histories offers (every store callgate ships does)."""

    def record_history(self, entry: HistoryEntry) -> None: ...

    def run_history(self, run_id: str, *, since: datetime,
                    limit: int = HISTORY_LIMIT) -> list[HistoryEntry]:
        """The run's entries decided at or after ``since``, oldest first; the newest
        ``limit`` of them when there are more."""
        ...

    def mark_executed(self, operation_id: str, *, at: datetime, route: str,
                      result: Any = None) -> int:
        """Record that the held write ``operation_id`` ran (its entries lose the error
        class that held it); how many entries it changed."""
        ...

    def run_of(self, operation_id: str) -> str | None:
        """The run whose history holds ``operation_id``, or ``None``."""
        ...

    def purge_history(self, *, older_than: datetime) -> int:
        """Delete the entries decided before ``older_than``, and the run leases that
        expired before it (left by holders that died); how many entries it deleted."""
        ...

    # A run's lease (``pipeline.runs.RunHold``): one history-reading decision at a time.

    def take_run_lease(self, run_id: str, *, holder: str, expires_at: datetime,
                       now: datetime) -> bool:
        """Take ``run_id``'s lease for ``holder`` until ``expires_at``: ``True`` when no
        one holds it or its holder's lease expired before ``now``, else ``False``."""
        ...

    def release_run_lease(self, run_id: str, *, holder: str) -> bool:
        """Give the lease back, if ``holder`` still holds it; whether it did."""
        ...


@dataclass(frozen=True)
class HistoryChanges:
    """What ``history_changes`` read: ``entries`` (position, entry), oldest first for a
    fresh read, in no order otherwise; ``mark``, what to pass next time; ``oldest``, the
    ``at`` of the oldest entry the store keeps at or after ``since`` (``None`` for none, and
    for a fresh read, which needs no check); ``complete``, whether a fresh read holds every
    entry at or after ``since`` (not only the newest ``limit``)."""

    entries: list[tuple[int, HistoryEntry]]
    mark: int
    oldest: datetime | None = None
    complete: bool = True


@runtime_checkable
class HistoryFeed(Protocol):
    """A store that says what changed in a run since a mark (see the module's docstring)."""

    def history_changes(self, run_id: str, *, since: datetime, mark: int | None,
                        limit: int = HISTORY_LIMIT) -> HistoryChanges:
        """With ``mark=None``, a fresh read: ``run_history``'s entries with their positions.
        Else the run's entries written or changed at or after ``mark`` (whatever their
        ``at``), and the oldest ``at`` kept at or after ``since``."""
        ...


@dataclass
class _MemoryRun:
    """One run's entries in ``MemoryHistory``: each without its arguments and result, and
    those two as JSON, by position; their order (``at``, then position); and the change log
    (mark, position), marks rising."""

    kept: dict[int, tuple[HistoryEntry, str, str | None]] = field(default_factory=dict)
    order: list[tuple[datetime, int]] = field(default_factory=list)
    changes: list[tuple[int, int]] = field(default_factory=list)


class MemoryHistory:
    """Run histories in this process: ``MemoryStore``'s, and the gate's own when its store
    keeps none. Arguments and results are kept as JSON text, as the SQL stores keep them:
    what a caller reads is its own copy, and decoding is cheaper than a deep copy."""

    def __init__(self) -> None:
        self._history_lock = threading.Lock()
        self._runs: dict[str, _MemoryRun] = {}
        self._run_of_operation: dict[str, str] = {}
        self._leases: dict[str, tuple[str, datetime]] = {}  # run ID: holder, expiry
        self._positions = 0  # the last entry's position
        self._marks = 0  # the last change's mark

    def take_run_lease(self, run_id: str, *, holder: str, expires_at: datetime,
                       now: datetime) -> bool:
        with self._history_lock:
            held = self._leases.get(run_id)
            if held is not None and held[1] > as_utc(now):
                return False
            self._leases[run_id] = (holder, as_utc(expires_at))
            return True

    def release_run_lease(self, run_id: str, *, holder: str) -> bool:
        with self._history_lock:
            held = self._leases.get(run_id)
            if held is None or held[0] != holder:
                return False
            del self._leases[run_id]
            return True

    def record_history(self, entry: HistoryEntry) -> None:
        at = as_utc(entry.at)
        kept = (replace(entry, at=at, arguments={}, result=None),
                canonical_json(entry.arguments),
                None if entry.result is None else canonical_json(entry.result))
        with self._history_lock:
            run = self._runs.setdefault(entry.run_id, _MemoryRun())
            self._positions += 1
            self._marks += 1
            run.kept[self._positions] = kept
            bisect.insort(run.order, (at, self._positions))
            run.changes.append((self._marks, self._positions))
            if entry.operation_id is not None:
                self._run_of_operation.setdefault(entry.operation_id, entry.run_id)

    def run_history(self, run_id: str, *, since: datetime,
                    limit: int = HISTORY_LIMIT) -> list[HistoryEntry]:
        with self._history_lock:
            found = self._newest(run_id, as_utc(since), limit)
        return [_decoded(*kept) for _, kept in found]

    def history_changes(self, run_id: str, *, since: datetime, mark: int | None,
                        limit: int = HISTORY_LIMIT) -> HistoryChanges:
        since = as_utc(since)
        with self._history_lock:
            horizon = self._marks + 1
            if mark is None:
                found = self._newest(run_id, since, limit + 1)
                return HistoryChanges([(position, _decoded(*kept))
                                       for position, kept in found[-limit:]],
                                      horizon, complete=len(found) <= limit)
            run = self._runs.get(run_id) or _MemoryRun()
            changed = {position for _, position in
                       run.changes[bisect.bisect_left(run.changes, (mark, 0)):]}
            found = [(position, run.kept[position]) for position in changed
                     if position in run.kept]
            first = bisect.bisect_left(run.order, (since,))
            oldest = run.order[first][0] if first < len(run.order) else None
        return HistoryChanges([(position, _decoded(*kept)) for position, kept in found],
                              horizon, oldest)

    def _newest(self, run_id: str, since: datetime,
                limit: int) -> list[tuple[int, tuple[HistoryEntry, str, str | None]]]:
        """The run's newest ``limit`` kept entries at or after ``since``, oldest first, by
        position (the caller holds the lock)."""
        run = self._runs.get(run_id) or _MemoryRun()
        order = run.order[bisect.bisect_left(run.order, (since,)):][-limit:]
        return [(position, run.kept[position]) for _, position in order]

    def mark_executed(self, operation_id: str, *, at: datetime, route: str,
                      result: Any = None) -> int:
        kept_result = None if result is None else canonical_json(result)
        with self._history_lock:
            run = self._runs.get(self._run_of_operation.get(operation_id, ""))
            if run is None:
                return 0
            changed = 0
            for position, (entry, arguments, _) in run.kept.items():
                if entry.operation_id == operation_id:
                    run.kept[position] = (replace(entry, executed=True, route=route,
                                                  error_class=None, executed_at=as_utc(at)),
                                          arguments, kept_result)
                    self._marks += 1
                    run.changes.append((self._marks, position))
                    changed += 1
            return changed

    def run_of(self, operation_id: str) -> str | None:
        with self._history_lock:
            return self._run_of_operation.get(operation_id)

    def purge_history(self, *, older_than: datetime) -> int:
        older_than = as_utc(older_than)
        purged = 0
        with self._history_lock:
            self._leases = {run_id: held for run_id, held in self._leases.items()
                            if held[1] >= older_than}
            for run_id, run in list(self._runs.items()):
                cut = bisect.bisect_left(run.order, (older_than,))
                for _, position in run.order[:cut]:
                    del run.kept[position]
                del run.order[:cut]
                purged += cut
                run.changes = [change for change in run.changes if change[1] in run.kept]
                if not run.kept:
                    del self._runs[run_id]
            self._run_of_operation = {}
            for run_id, run in self._runs.items():
                for entry, _, _ in run.kept.values():
                    if entry.operation_id is not None:
                        self._run_of_operation.setdefault(entry.operation_id, run_id)
            return purged


def _decoded(entry: HistoryEntry, arguments: str, result: str | None) -> HistoryEntry:
    """A kept entry with its arguments and result decoded: the caller's own copy. Made
    field by field: ``dataclasses.replace`` would cost more than decoding."""
    return HistoryEntry(entry.run_id, entry.at, entry.tool, read_stored_json(arguments),
                        entry.route, entry.error_class, entry.request_id, entry.operation_id,
                        entry.executed, entry.executed_at,
                        None if result is None else read_stored_json(result))


# The SQL, written once; ``HistoryStatements`` renders it for a dialect ---------------------

# ``{changed}`` is the dialect's mark of a change (``CHANGE_MARKS``): the statement that writes
# a row writes its mark.
INSERT_HISTORY = """
    INSERT INTO callgate_run_history (run_id, at, tool, arguments, route, error_class,
                                      request_id, operation_id, executed, executed_at, result,
                                      changed)
    VALUES ({{run_id}}, {{at}}, {{tool}}, {{arguments:json}}, {{route}}, {{error_class:text}},
            {{request_id}}, {{operation_id:text}}, {{executed}}, {{executed_at}},
            {{result:json}}, {changed})
"""
# newest first, so that LIMIT keeps the tail; the caller puts them back in order
SELECT_HISTORY = """
    SELECT * FROM callgate_run_history
    WHERE run_id = {run_id} AND at >= {since}
    ORDER BY at DESC, position DESC
    LIMIT {limit}
"""
MARK_EXECUTED = """
    UPDATE callgate_run_history
    SET executed = {{executed}}, executed_at = {{executed_at}}, route = {{route}},
        error_class = NULL, result = {{result:json}}, changed = {changed}
    WHERE operation_id = {{operation_id}}
"""
# The mark a fresh read starts from, read before its rows (a row changed in between is read
# twice, never missed); ``{horizon}`` is the dialect's (``CHANGE_MARKS``).
HORIZON = "SELECT {horizon} AS horizon"
# What changed at or after a mark, with the next mark and the oldest entry kept at or after
# ``since`` in the same statement (one snapshot); always one row, whose entry columns are
# NULL when nothing changed. Not bounded by ``since``: the index (run_id, changed) answers.
CHANGES = """
    SELECT feed.horizon, feed.oldest, entry.*
    FROM (SELECT {horizon} AS horizon,
                 (SELECT min(at) FROM callgate_run_history
                  WHERE run_id = {{run_id}} AND at >= {{since}}) AS oldest) AS feed
    LEFT JOIN callgate_run_history AS entry
        ON entry.run_id = {{run_id}} AND entry.changed >= {{mark}}
"""
RUN_OF = """
    SELECT run_id FROM callgate_run_history WHERE operation_id = {operation_id} LIMIT 1
"""
PURGE_HISTORY = "DELETE FROM callgate_run_history WHERE at < {cutoff}"
# One statement: the primary key decides between two takers, the WHERE lets a taker past a
# lease only once it has expired (its holder died, or overran it).
TAKE_RUN_LEASE = """
    INSERT INTO callgate_run_leases (run_id, holder, expires_at)
    VALUES ({run_id}, {holder}, {expires_at})
    ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
    WHERE callgate_run_leases.expires_at <= {now}
"""
RELEASE_RUN_LEASE = """
    DELETE FROM callgate_run_leases WHERE run_id = {run_id} AND holder = {holder}
"""
PURGE_RUN_LEASES = "DELETE FROM callgate_run_leases WHERE expires_at < {cutoff}"

# The table, as each dialect's migration 2 creates it.
SQLITE_TABLE = [
    """
    CREATE TABLE callgate_run_history (
        position     INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id       TEXT NOT NULL,
        at           TEXT NOT NULL,
        tool         TEXT NOT NULL,
        arguments    TEXT NOT NULL,
        route        TEXT NOT NULL,
        error_class  TEXT,
        request_id   TEXT NOT NULL,
        operation_id TEXT,
        executed     INTEGER NOT NULL,
        executed_at  TEXT,
        result       TEXT
    )
    """,
    "CREATE INDEX callgate_run_history_run ON callgate_run_history (run_id, at)",
    """
    CREATE INDEX callgate_run_history_operation ON callgate_run_history (operation_id)
        WHERE operation_id IS NOT NULL
    """,
]
POSTGRES_TABLE = [
    """
    CREATE TABLE callgate_run_history (
        position     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id       text NOT NULL,
        at           timestamptz NOT NULL,
        tool         text NOT NULL,
        arguments    jsonb NOT NULL,
        route        text NOT NULL,
        error_class  text,
        request_id   text NOT NULL,
        operation_id text,
        executed     boolean NOT NULL,
        executed_at  timestamptz,
        result       jsonb
    )
    """,
    "CREATE INDEX callgate_run_history_run ON callgate_run_history (run_id, at)",
    """
    CREATE INDEX callgate_run_history_operation ON callgate_run_history (operation_id)
        WHERE operation_id IS NOT NULL
    """,
]


# Each dialect's mark of a change and horizon (see the module's docstring), by its placeholder
# (sqlite3's, psycopg's). SQLite: the next position, from ``sqlite_sequence``, which
# AUTOINCREMENT keeps and no deletion lowers; a change marked with it is read again until
# the next entry moves it on, which costs a row, never a miss. PostgreSQL: the writing
# transaction's ID, and the oldest transaction running when the read's snapshot was taken.
NEXT_POSITION = ("(SELECT coalesce(max(seq), 0) + 1 FROM sqlite_sequence "
                 "WHERE name = 'callgate_run_history')")
CHANGE_MARKS = {
    "?": {"changed": NEXT_POSITION, "horizon": NEXT_POSITION},
    "%s": {"changed": "pg_current_xact_id()::text::bigint",
           "horizon": "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"},
}
# Migration 7 of each dialect: the column and its index. Rows written before it have no mark:
# a fresh read has them, and a change marks them.
SQLITE_CHANGES = [
    "ALTER TABLE callgate_run_history ADD COLUMN changed INTEGER",
    "CREATE INDEX callgate_run_history_changes ON callgate_run_history (run_id, changed)",
]
POSTGRES_CHANGES = [
    "ALTER TABLE callgate_run_history ADD COLUMN changed bigint",
    "CREATE INDEX callgate_run_history_changes ON callgate_run_history (run_id, changed)",
]


# The leases, as each dialect's migration 3 creates them. A row lives while its lease is
# held: released leases are deleted, an expired one is overwritten by the next taker.
SQLITE_LEASES = [
    """
    CREATE TABLE callgate_run_leases (
        run_id     TEXT PRIMARY KEY,
        holder     TEXT NOT NULL,
        expires_at TEXT NOT NULL
    )
    """,
]
POSTGRES_LEASES = [
    """
    CREATE TABLE callgate_run_leases (
        run_id     text PRIMARY KEY,
        holder     text NOT NULL,
        expires_at timestamptz NOT NULL
    )
    """,
]


@dataclass(frozen=True)
class HistoryStatements:
    """The run-history statements in one dialect, rendered once per store class."""

    insert: Query
    select: Query
    mark_executed: Query
    run_of: Query
    purge: Query
    take_lease: Query
    release_lease: Query
    purge_leases: Query
    horizon: Query
    changes: Query

    @classmethod
    def of(cls, dialect: Dialect) -> HistoryStatements:
        marks = CHANGE_MARKS[dialect.placeholder]

        def marked(template: str) -> Query:
            return render(template.format(**marks), dialect)

        return cls(marked(INSERT_HISTORY), render(SELECT_HISTORY, dialect),
                   marked(MARK_EXECUTED), render(RUN_OF, dialect),
                   render(PURGE_HISTORY, dialect), render(TAKE_RUN_LEASE, dialect),
                   render(RELEASE_RUN_LEASE, dialect), render(PURGE_RUN_LEASES, dialect),
                   marked(HORIZON), marked(CHANGES))
