"""The receipt store in one SQLite file, shared by threads and processes on one machine.

The receipt protocol is ``store.sql``'s; this module holds SQLite's dialect and connections.
Every write that decides from what it reads runs in a ``BEGIN IMMEDIATE`` transaction: it
takes the database's write lock before reading, so deciding from a row and changing it is one
atomic step across threads and processes (the busy timeout makes the others wait instead of
failing), and no row needs a lock of its own. A write that is one statement (a new claim, a
finish, a renewal, whose ``WHERE`` clause is the guarantee) is committed on its own. WAL
mode lets readers go on while a writer works. ``synchronous=FULL`` because a
claim lost on power failure could let a write run twice.

Times are stored as fixed-width ISO 8601 text in UTC, which sorts and compares as text the
same way as the instants do, and stays readable in the ``sqlite3`` shell; JSON is stored as
its canonical text.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from callgate_rules.errors import StoreConfigError, StoreError
from callgate_rules.store.base import as_utc, read_stored_json
from callgate_rules.store.history import (
    SQLITE_CHANGES,
    SQLITE_LEASES,
    SQLITE_TABLE,
    HistoryStatements,
)
from callgate_rules.store.intents import SQLITE_INTENTS, IntentStatements
from callgate_rules.store.sessions import SQLITE_SESSIONS, SessionStatements
from callgate_rules.store.sql import DriverErrors, SqlReceiptStore, pending_migrations
from callgate_rules.store.statements import Cursor, Dialect, Row, Statements, execute, render

# Each entry upgrades the schema by one version; never edit one that has shipped.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """
            CREATE TABLE callgate_receipts (
                operation_id            TEXT PRIMARY KEY,
                state                   TEXT NOT NULL,
                request_id              TEXT NOT NULL,
                tool                    TEXT NOT NULL,
                contract_version        TEXT NOT NULL,
                args_hash               TEXT NOT NULL,
                arguments               TEXT NOT NULL,
                actor                   TEXT NOT NULL,
                result                  TEXT,
                error_class             TEXT,
                detail                  TEXT,
                confirmed_by            TEXT,
                confirmed_at            TEXT,
                confirmation_expires_at TEXT,
                lease_owner             TEXT,
                lease_expires_at        TEXT,
                attempts                INTEGER NOT NULL DEFAULT 0,
                created_at              TEXT NOT NULL,
                updated_at              TEXT NOT NULL
            )
            """,
            """
            CREATE INDEX callgate_receipts_finished
                ON callgate_receipts (updated_at)
                WHERE state IN ('succeeded', 'failed')
            """,
            """
            CREATE TABLE callgate_reviews (
                queue_position INTEGER PRIMARY KEY AUTOINCREMENT,
                review_id      TEXT NOT NULL UNIQUE,
                tool           TEXT NOT NULL,
                reason         TEXT NOT NULL,
                summary        TEXT NOT NULL,
                operation_id   TEXT,
                payload        TEXT NOT NULL,
                status         TEXT NOT NULL,
                created_at     TEXT NOT NULL,
                taken_by       TEXT,
                taken_at       TEXT,
                resolution     TEXT,
                note           TEXT,
                resolved_by    TEXT,
                resolved_at    TEXT
            )
            """,
            """
            CREATE INDEX callgate_reviews_queue
                ON callgate_reviews (status, created_at, queue_position)
            """,
        ],
    ),
    (2, SQLITE_TABLE),  # run histories (store.history)
    (3, SQLITE_LEASES),  # run leases: one run's history-reading decisions, one at a time
    (4, SQLITE_SESSIONS),  # the review page's sessions (store.sessions)
    # the hash of the decision log line of the decision that executed a write: a column
    # without a default, so an existing file gains it at once and its receipts read None
    (5, ["ALTER TABLE callgate_receipts ADD COLUMN log_line TEXT"]),
    (6, SQLITE_INTENTS),  # run intents (store.intents)
    (7, SQLITE_CHANGES),  # each history row's mark of its last change (store.history)
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

# INSERT ... ON CONFLICT DO NOTHING arrived in SQLite 3.24 (2018). Before RETURNING (3.35,
# with its early fixes in 3.35.5) a written row is read back by its key inside the same
# transaction; with it, a write that needs nothing else is one autocommitted statement.
MINIMUM_SQLITE = (3, 24, 0)
RETURNING_SQLITE = (3, 35, 5)

SQLITE = Dialect(
    placeholder="?",
    casts={"json": "", "text": ""},  # JSON is TEXT, and SQLite infers no parameter types
    row_lock="",  # BEGIN IMMEDIATE holds the write lock on the whole file already
    returning="",
)
SQLITE_RETURNING = replace(SQLITE, returning=" RETURNING *")

OLDEST_OPEN_REVIEW = render(
    """
    SELECT review_id FROM callgate_reviews
    WHERE status = 'open'
    ORDER BY created_at, queue_position
    LIMIT 1
    """,
    SQLITE,
)
SCOPED_OLDEST_OPEN_REVIEW = """
    SELECT review_id FROM callgate_reviews
    WHERE status = 'open' AND ({condition})
    ORDER BY created_at, queue_position
    LIMIT 1
"""
TAKE_REVIEW = render(
    """
    UPDATE callgate_reviews
    SET status = 'taken', taken_by = {reviewer}, taken_at = {now}
    WHERE review_id = {review_id}
    """,
    SQLITE,
)


# The day the last instant was written on (its ordinal) and its text ("2026-12-05T"): a
# store's instants, a lease's expiry among them, fall on one day nearly always, so nearly
# every one reuses it. One tuple, replaced whole, so that no thread reads one day's ordinal
# with another's text.
_day: tuple[int, str] = (0, "")
_TWO_DIGITS = tuple(f"{number:02d}" for number in range(60))


def _text(moment: datetime) -> str:
    """``moment`` in UTC as ISO 8601 text with microseconds, always the same length, so
    that instants compare as text (``purge``): ``isoformat(timespec="microseconds")``.

    Counted in instructions (callgrind), ``isoformat()`` costs about 12,400 an instant (the
    ``+00:00`` through the ``tzinfo``, and a printf-style format of seven numbers), and an
    executed write writes three; the day's text kept and the time of day put after it cost
    about 5,400."""
    global _day
    if moment.tzinfo is not UTC:  # nearly always is (``as_utc``, without its call)
        moment = as_utc(moment)
    ordinal = moment.toordinal()
    day = _day
    if day[0] != ordinal:
        day = _day = (ordinal, moment.isoformat()[:11])
    return (f"{day[1]}{_TWO_DIGITS[moment.hour]}:{_TWO_DIGITS[moment.minute]}:"
            f"{_TWO_DIGITS[moment.second]}.{str(moment.microsecond + 1_000_000)[1:]}+00:00")


class SqliteStore(SqlReceiptStore):
    """A ``ReceiptStore`` in the SQLite file at ``path``; the file is created if missing.

    One connection per thread, so a store object may be shared by threads; separate
    processes open their own store on the same file.
    """

    _sql = Statements(
        SQLITE_RETURNING if sqlite3.sqlite_version_info >= RETURNING_SQLITE else SQLITE
    )
    _history_sql = HistoryStatements.of(SQLITE)
    _intent_sql = IntentStatements.of(SQLITE)
    _dialect = SQLITE
    _sessions_sql = SessionStatements.of(SQLITE)
    _payload_actor = "json_extract(callgate_reviews.payload, '$.actor')"
    _driver_error = sqlite3.Error

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        super().__init__()
        self.path = os.path.abspath(os.fspath(path))
        self.url = f"sqlite:///{self.path}"
        if sqlite3.sqlite_version_info < MINIMUM_SQLITE:
            raise StoreConfigError(
                f"cannot open receipt store {self.url}: SQLite {sqlite3.sqlite_version} is too "
                f"old, callgate needs {'.'.join(map(str, MINIMUM_SQLITE))} or newer"
            )
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        # What ``_statement``, ``_lease_statement`` and ``_read`` enter: stateless, so made
        # once and shared by every thread (one made per statement cost about 3,000
        # instructions).
        self._statements = DriverErrors(
            self, functools.partial(self._kept_cursor, "connection", "FULL"))
        self._lease_statements = DriverErrors(
            self, functools.partial(self._kept_cursor, "lease_connection", "NORMAL"))
        self._reads = DriverErrors(self, self._cursor)
        try:
            # WAL is a property of the file: set once here, every later connection uses it.
            self._connection().execute("PRAGMA journal_mode=WAL")
            self.migrate()
        except StoreConfigError:
            self.close()
            raise
        except (sqlite3.Error, StoreError) as exc:
            self.close()
            raise StoreConfigError(_open_failure(self.url, exc)) from None

    def migrate(self) -> list[int]:
        """Apply the migrations this file has not seen yet; return their versions."""
        # Checked without the write lock first, so opening an up-to-date file never waits
        # for a writer.
        if self._schema_version() == SCHEMA_VERSION:
            return []
        with self._write() as cursor:
            cursor.execute(
                """
                CREATE TABLE IF NOT EXISTS callgate_schema_version (
                    version    INTEGER PRIMARY KEY,
                    applied_at TEXT NOT NULL
                )
                """
            )
            cursor.execute("SELECT coalesce(max(version), 0) FROM callgate_schema_version")
            (current,) = cursor.fetchone()
            applied = []
            for version, statements in pending_migrations(self.url, MIGRATIONS, current):
                for statement in statements:
                    cursor.execute(statement)
                cursor.execute(
                    "INSERT INTO callgate_schema_version (version, applied_at) VALUES (?, ?)",
                    (version, _text(datetime.now().astimezone())),
                )
                applied.append(version)
            return applied

    def _schema_version(self) -> int:
        with self._read() as cursor:
            table = cursor.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                ("callgate_schema_version",),
            ).fetchone()
            if table is None:
                return 0
            (version,) = cursor.execute(
                "SELECT coalesce(max(version), 0) FROM callgate_schema_version"
            ).fetchone()
            return int(version)

    def close(self) -> None:
        with self._connections_lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    # The dialect ---------------------------------------------------------------------------

    def _take_oldest_open_review(self, cursor: Cursor, parameters: Mapping[str, Any],
                                 condition: str = "1 = 1") -> Row | None:
        # The write lock of BEGIN IMMEDIATE keeps every other reviewer out until we commit.
        oldest_open = (OLDEST_OPEN_REVIEW if condition == "1 = 1" else
            render(SCOPED_OLDEST_OPEN_REVIEW.format(condition=condition), SQLITE))
        execute(cursor, oldest_open, parameters)
        oldest = cursor.fetchone()
        if oldest is None:
            return None
        taking = {**parameters, "review_id": oldest["review_id"]}
        execute(cursor, TAKE_REVIEW, taking)
        execute(cursor, self._sql.select_review, taking)
        row: Row | None = cursor.fetchone()
        return row

    @staticmethod
    def _field_text(column: str, name_parameter: str, /) -> str:
        path = f"'$.' || {{{name_parameter}}}"
        return (f"(CASE WHEN json_type({column}, {path}) = 'text' "
                f"THEN json_extract({column}, {path}) END)")

    _time_parameter = staticmethod(_text)
    _time_value = staticmethod(datetime.fromisoformat)
    _json_value = staticmethod(read_stored_json)

    # Connections and transactions ----------------------------------------------------------

    def _connection(self, kind: str = "connection",
                    synchronous: str = "FULL") -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, kind, None)
        if connection is not None and not self._closed:
            return connection
        with self._connections_lock:
            if self._closed:
                raise StoreError(f"the receipt store {self.url} is closed")
            # isolation_level=None: transactions are ours (BEGIN IMMEDIATE), not the module's.
            # check_same_thread=False only so close() may close every thread's connection.
            connection = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout,
            )
            self._connections.append(connection)
        connection.row_factory = sqlite3.Row
        connection.execute(f"PRAGMA synchronous={synchronous}")
        setattr(self._local, kind, connection)
        return connection

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Cursor]:
        with self._errors_as_store_errors():
            connection = self._connection()
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection.cursor()
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

    def _statement(self) -> DriverErrors[sqlite3.Cursor]:
        # No BEGIN: each statement takes the write lock (waiting out the busy timeout) and
        # commits, durably, when it is done.
        return self._statements

    def _lease_statement(self) -> DriverErrors[sqlite3.Cursor]:
        # A run lease is atomic, not durable (``SqlReceiptStore._lease_statement``): in WAL
        # mode synchronous=NORMAL commits without an fsync, on a connection of its own.
        return self._lease_statements

    def _kept_cursor(self, kind: str, synchronous: str) -> sqlite3.Cursor:
        """The cursor of this thread's ``kind`` connection for statements committed on
        their own, made once. Reusing it is safe because each such statement is a write
        read to its end before the next one runs (``SqlReceiptStore._send``), so nothing of
        one is pending when the next begins (a cursor made per statement cost about 1,100
        instructions, two an executed write)."""
        cursor: sqlite3.Cursor | None = getattr(self._local, kind + "_cursor", None)
        if cursor is None or self._closed:
            cursor = self._connection(kind, synchronous).cursor()
            setattr(self._local, kind + "_cursor", cursor)
        return cursor

    def _read(self) -> DriverErrors[sqlite3.Cursor]:
        return self._reads

    def _cursor(self) -> sqlite3.Cursor:
        return self._connection().cursor()


def _open_failure(url: str, exc: Exception) -> str:
    reason = str(exc.__cause__ if isinstance(exc.__cause__, sqlite3.Error) else exc)
    if "unable to open database file" in reason:
        reason += " — does the directory exist and may this user write to it?"
    return f"cannot open receipt store {url}: {reason}"

